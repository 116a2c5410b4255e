"""Encryption when reading with the client: read_batches(private_key=, crypto_failure_action=)."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.crypto_errors import DataKeyError, MissingPrivateKey
from pulsar_spark.protocol.encryption import ENCRYPTED_PROPERTIES
from tests.support.official import produce

NONE = serialization.NoEncryption()


class Pair:
    def __init__(self, directory: Path, name: str) -> None:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.priv, self.pub = directory / f"{name}-priv.pem", directory / f"{name}-pub.pem"
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, NONE)
        self.priv.write_bytes(pem)
        self.pub.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.priv_url, self.pub_url = self.priv.as_uri(), self.pub.as_uri()
        #: The private key inline, as a secret store would hand it over.
        self.priv_data = "data:application/x-pem-file;base64," + base64.b64encode(pem).decode()

    def reader(self):
        import pulsar

        return pulsar.CryptoKeyReader(str(self.pub), str(self.priv))


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    directory = tmp_path_factory.mktemp("client-keys")
    return {name: Pair(directory, name) for name in ("a", "b")}


def _values(client: PulsarClient, topic: str, **kw) -> list[bytes]:
    return [
        v for batch in client.read_batches(topic, **kw) for v in batch.column("value").to_pylist()
    ]


def test_read_batches_decrypts_with_a_file_or_data_url_and_bounds_inside_batches(
    pulsar_lite, topic_name, pairs
) -> None:
    url, pair = pulsar_lite.service_url, pairs["a"]
    sent = [f"secret-{i}".encode() for i in range(30)]
    ids = produce(
        url,
        topic_name,
        sent,
        compression="LZ4",
        encryption_key="app",
        crypto_key_reader=pair.reader(),
    )
    with PulsarClient(url) as client:
        assert _values(client, topic_name, private_key=pair.priv_url) == sent
        assert _values(client, topic_name, private_key=json.dumps({"app": pair.priv_data})) == sent
        # start and end ids inside encrypted batches
        got = _values(
            client,
            topic_name,
            start=ids[5],
            end=ids[20],
            end_inclusive=False,
            private_key=pair.priv_url,
        )
        assert got == sent[5:20]
        with pytest.raises(MissingPrivateKey, match=r"'app'.*|privateKey"):
            _values(client, topic_name)
        with pytest.raises(DataKeyError, match="wrong private key"):
            _values(client, topic_name, private_key=pairs["b"].priv_url)


def test_crypto_failure_actions_discard_and_consume(pulsar_lite, topic_name, pairs, caplog) -> None:
    url = pulsar_lite.service_url
    produce(
        url,
        topic_name,
        [b"s1", b"s2", b"s3"],
        encryption_key="app",
        crypto_key_reader=pairs["a"].reader(),
    )
    produce(url, topic_name, [b"clear"])
    with PulsarClient(url) as client:
        with caplog.at_level(logging.WARNING):
            assert _values(client, topic_name, crypto_failure_action="discard") == [b"clear"]
        assert any(
            "discarded encrypted message" in r.getMessage() and topic_name in r.getMessage()
            for r in caplog.records
        )
        rows = [
            r
            for b in client.read_batches(topic_name, crypto_failure_action="consume")
            for r in b.to_pylist()
        ]
    assert rows[-1]["value"] == b"clear" and rows[-1]["properties"] == []
    for row in rows[:-1]:
        props = dict(row["properties"])
        assert props[ENCRYPTED_PROPERTIES[0]] == "app" and row["value"] not in (b"s1", b"s2", b"s3")


def test_id_scans_need_no_key_and_never_end_inside_an_encrypted_batch(
    pulsar_lite, topic_name, pairs
) -> None:
    url = pulsar_lite.service_url
    reader = pairs["a"].reader()
    produce(url, topic_name, [b"b"] * 10, encryption_key="app", crypto_key_reader=reader)
    produce(
        url,
        topic_name,
        [b"s1", b"s2"],
        batching=False,
        encryption_key="app",
        crypto_key_reader=reader,
    )
    with PulsarClient(url) as client:
        refs = list(client.scan_ids(topic_name))
        assert len(refs) == 12 and all(r.message_id.batch_index == -1 for r in refs)
        first = client.first_message(topic_name)
        assert first is not None and first[0] == refs[0].message_id
        # a range ending at such an id holds the whole batch
        rows = _values(client, topic_name, end=refs[3].message_id, private_key=pairs["a"].priv_url)
        end = refs[3].message_id
        held = sum(
            (r.message_id.ledger, r.message_id.entry) <= (end.ledger, end.entry) for r in refs
        )
        assert held >= 4 and rows == [b"b"] * held


def test_official_encrypted_chunked_messages_read_on_apache_pulsar(
    apache_pulsar, topic_name, pairs
) -> None:
    url, pair = apache_pulsar.service_url, pairs["a"]
    big = bytes(range(256)) * (6 * 4096)  # 6 MiB: the official producer chunks it
    produce(
        url, topic_name, [b"before", big, b"after"], batching=False, chunking_enabled=True,
        compression="LZ4", encryption_key="app", crypto_key_reader=pair.reader(),
    )  # fmt: skip
    with PulsarClient(url) as client:
        assert _values(client, topic_name, private_key=pair.priv_url) == [b"before", big, b"after"]
        refs = list(client.scan_ids(topic_name))  # no key needed to find the messages
        assert len(refs) == 3
        with pytest.raises(MissingPrivateKey, match="'app'"):
            _values(client, topic_name)
        discarded = _values(client, topic_name, crypto_failure_action="discard")
        assert discarded == []
