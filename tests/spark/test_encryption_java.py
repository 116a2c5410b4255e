"""Spark reads what the Java client encrypted with an EC key (ECIES), on Apache Pulsar.

The Java client is the only official one that wraps data keys with EC keys; the other
Spark encryption tests use the official Python client's RSA keys.
"""

from __future__ import annotations

import json
import os

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.support.java_crypto import java_produce_encrypted_many
from tests.support.keys import KeyPair


def test_spark_reads_a_java_ec_encrypted_topic_batches_and_chunks(
    read_pulsar, apache_pulsar, topic_name, tmp_path
) -> None:
    pair = KeyPair(
        tmp_path,
        "ec",
        ec.generate_private_key(ec.SECP256R1()),
        private_format=serialization.PrivateFormat.TraditionalOpenSSL,  # "EC PRIVATE KEY" (SEC1)
    )
    pub = pair.pub
    private = json.dumps({"ec.key": pair.priv_data})
    batched = [
        {"value": f"row-{i:03d}".encode(), "key": f"k{i % 5}", "properties": {"i": str(i)}}
        for i in range(200)
    ]
    big = os.urandom(20_000)  # in 4 KB chunks
    common = {"topic": topic_name, "public_keys": {"ec.key": pub.as_uri()}}
    java_produce_encrypted_many(
        apache_pulsar.service_url,
        [
            {**common, "values": batched, "compression": "ZSTD"},
            {**common, "values": [{"value": big, "key": "big"}], "batched": False,
             "compression": "LZ4", "chunk_max_size": 4096},
        ],
    )  # fmt: skip
    url = apache_pulsar.service_url
    df = read_pulsar(url, topic=topic_name, minPartitions="4", privateKey=private)
    rows = df.collect()
    got = sorted((bytes(r.value), bytes(r.key), dict(r.properties)) for r in rows)
    expected = [(m["value"], m["key"].encode(), m["properties"]) for m in batched]
    assert got == sorted([*expected, (big, b"big", {})])
    assert df.rdd.getNumPartitions() >= 2
    # Nothing of it reads as data without the key: discard leaves no row.
    assert read_pulsar(url, topic=topic_name, cryptoFailureAction="discard").collect() == []
