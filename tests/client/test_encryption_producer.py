"""Encryption when writing with the client: create_producer(encryption_keys=, public_key=)."""

from __future__ import annotations

import json
import os
import time

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.crypto.errors import CryptoKeyError
from tests.client.test_encryption_client import _values
from tests.support.keys import KeyPair, encryption_required_topic
from tests.support.official import official_client


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("producer-keys")
    return {name: KeyPair(directory, name) for name in ("a", "b")}


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
def test_our_encrypting_producer_is_read_by_the_official_consumer_and_by_us(
    pulsar_lite, topic_name, pairs, batching
) -> None:
    import pulsar

    url = pulsar_lite.service_url
    keys = json.dumps({"a": pairs["a"].pub_url, "b": pairs["b"].pub_url})
    sent = [f"ours-{i}".encode() * 3 for i in range(25)]
    with PulsarClient(url) as client:
        with client.create_producer(
            topic_name,
            compression="zstd",
            batching=batching,
            encryption_keys="a,b",
            public_key=keys,
        ) as producer:
            for value in sent:
                producer.send(value)
            producer.flush()
        assert _values(client, topic_name, private_key=pairs["b"].priv_url) == sent
    with official_client(url) as official:
        consumer = official.subscribe(
            topic_name, "d", initial_position=pulsar.InitialPosition.Earliest,
            crypto_key_reader=pairs["a"].reader(),
        )  # fmt: skip
        got = [consumer.receive(timeout_millis=20_000).data() for _ in sent]
        consumer.close()
    assert got == sent


def test_encrypted_chunks_from_our_producer_on_apache_pulsar(
    apache_pulsar, topic_name, pairs
) -> None:
    import pulsar

    url = apache_pulsar.service_url
    big = os.urandom(16384)  # 16 KiB (incompressible) in chunks of at most 4 KiB
    with PulsarClient(url) as client:
        with client.create_producer(
            topic_name, batching=False, chunk_max_size=4096, compression="lz4",
            encryption_keys="a", public_key=pairs["a"].pub_url,
        ) as producer:  # fmt: skip
            producer.send(b"small")
            producer.send(big)
            producer.flush()
        assert apache_pulsar.admin.internal_stats(topic_name)["numberOfEntries"] >= 5
        assert _values(client, topic_name, private_key=pairs["a"].priv_url) == [b"small", big]
    with official_client(url) as official:
        consumer = official.subscribe(
            topic_name, "d", initial_position=pulsar.InitialPosition.Earliest,
            crypto_key_reader=pairs["a"].reader(),
        )  # fmt: skip
        got = [consumer.receive(timeout_millis=20_000).data() for _ in range(2)]
        consumer.close()
    assert got == [b"small", big]


def test_key_options_are_checked_before_anything_is_sent(pulsar_lite, topic_name, pairs) -> None:
    with PulsarClient(pulsar_lite.service_url) as client:
        with pytest.raises(CryptoKeyError, match="public_key is not"):
            client.create_producer(topic_name, encryption_keys="a")
        with pytest.raises(CryptoKeyError, match="no public key for the encryption key name 'c'"):
            client.create_producer(
                topic_name, encryption_keys="a,c", public_key=json.dumps({"a": pairs["a"].pub_url})
            )


def test_the_java_consumer_decrypts_our_ec_encrypted_chunks_and_batches(
    apache_pulsar, topic_name, tmp_path
) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    from tests.support.java_crypto import java_consume_decrypted

    pair = KeyPair(
        tmp_path,
        "ec",
        ec.generate_private_key(ec.SECP256R1()),
        private_format=serialization.PrivateFormat.TraditionalOpenSSL,
    )
    priv, pub = pair.priv, pair.pub
    url = apache_pulsar.service_url
    big = os.urandom(12_000)
    small = [f"batched-{i}".encode() for i in range(5)]
    with PulsarClient(url) as client:
        with client.create_producer(
            topic_name, batching=False, chunk_max_size=4096, compression="snappy",
            encryption_keys="ec.key", public_key=pub.as_uri(),
        ) as producer:  # fmt: skip
            producer.send(big)
            producer.flush()
        with client.create_producer(
            topic_name, compression="zlib", encryption_keys="ec.key", public_key=pub.as_uri()
        ) as producer:
            for value in small:
                producer.send(value)
            producer.flush()
    got = java_consume_decrypted(url, topic_name, 1 + len(small), priv.as_uri())
    assert [v for v, _ in got] == [big, *small]
    assert all(names == ["ec.key"] for _, names in got)


def test_a_namespace_that_requires_encryption_takes_our_encrypting_producer_only(
    apache_pulsar, pairs
) -> None:
    from pulsar_spark.protocol.errors import ServerError

    topic = encryption_required_topic(apache_pulsar.admin, "enc")
    url = apache_pulsar.service_url
    with PulsarClient(url, operation_timeout=60) as client:
        with client.create_producer(
            topic, encryption_keys="a", public_key=pairs["a"].pub_url
        ) as producer:
            producer.send(b"sealed")
            producer.flush()
        assert _values(client, topic, private_key=pairs["a"].priv_url) == [b"sealed"]
        started = time.monotonic()
        with pytest.raises(ServerError, match=r"[Ee]ncryption is required") as refused:
            client.create_producer(topic)
        # The broker's MetadataError says no retry can help: it fails at once, not after
        # the operation timeout, and says it is not retriable.
        assert time.monotonic() - started < 20
        assert refused.value.retriable is False
