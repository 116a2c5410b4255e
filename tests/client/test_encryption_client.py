"""Encryption when reading with the client: read_batches(private_key=, crypto_failure_action=)."""

from __future__ import annotations

import base64
import json
import logging
import os
import re

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.crypto_keys import CryptoStats
from pulsar_spark.protocol.crypto.errors import (
    CiphertextError,
    DataKeyError,
    DecryptionError,
    MissingPrivateKey,
)
from pulsar_spark.protocol.crypto.fields import ENCRYPTED_PROPERTIES
from tests.support.keys import KeyPair
from tests.support.official import produce


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, KeyPair]:
    directory = tmp_path_factory.mktemp("client-keys")
    return {name: KeyPair(directory, name) for name in ("a", "b")}


def _values(client: PulsarClient, topic: str, **kw) -> list[bytes]:
    return [
        v for batch in client.read_batches(topic, **kw) for v in batch.column("value").to_pylist()
    ]


def _entry(official_id: str) -> str:
    """``ledger:entry`` of an id as the official client prints it, ``(l,e,p,b)``."""
    ledger, entry = re.findall(r"-?\d+", official_id)[:2]
    return f"{ledger}:{entry}"


def assert_names_message(text: str, topic: str, entry: str, names: list[str]) -> None:
    """The error names the topic, the message id (at ``entry``), every key name, and
    says which option supplies a private key."""
    assert topic in text, text
    assert re.search(rf"message {entry}:-?\d+:-?\d+\b", text), text
    assert "key names " + ", ".join(repr(n) for n in names) in text, text
    assert "privateKey" in text and "private_key=" in text, text


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
        with pytest.raises(MissingPrivateKey) as info:
            _values(client, topic_name)
        assert_names_message(str(info.value), topic_name, _entry(ids[0]), ["app"])
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
        stats = CryptoStats()
        with caplog.at_level(logging.WARNING):
            got = _values(client, topic_name, crypto_failure_action="discard", crypto_stats=stats)
            assert got == [b"clear"]
        texts = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        # one line per discarded entry with its id, then one summary for the partition
        each = [t for t in texts if t.startswith("discarded encrypted message ")]
        assert len(each) == 1 and topic_name in each[0] and "key names app" in each[0]
        summary = [t for t in texts if re.match(r"discarded \d+ encrypted messages? of ", t)]
        assert len(summary) == 1, texts
        assert summary[0].startswith("discarded 3 encrypted messages of ")
        assert topic_name in summary[0] and "cryptoFailureAction=discard" in summary[0]
        assert stats.total_discarded == 3 and len(stats.discarded) == 1
        assert topic_name in next(iter(stats.discarded))
        caplog.clear()
        last = list(client.scan_ids(topic_name))[-1].message_id
        with caplog.at_level(logging.WARNING):  # nothing discarded: no summary
            got = _values(client, topic_name, start=last, crypto_failure_action="discard")
            assert got == [b"clear"]
        assert not [r for r in caplog.records if "discarded" in r.getMessage()]
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
    # 6 MiB that LZ4 cannot shrink below the broker's 5 MiB limit: the official producer
    # chunks it (a repetitive payload would compress to one small entry, not chunked).
    big = os.urandom(6 << 20)
    produce(
        url, topic_name, [b"before", big, b"after"], batching=False, chunking_enabled=True,
        compression="LZ4", encryption_key="app", crypto_key_reader=pair.reader(),
    )  # fmt: skip
    with PulsarClient(url) as client:
        assert _values(client, topic_name, private_key=pair.priv_url) == [b"before", big, b"after"]
        refs = list(client.scan_ids(topic_name))  # no key needed to find the messages
        assert len(refs) == 3
        # the big one took two entries (chunks): the next message is two entries on
        assert refs[2].message_id.entry - refs[1].message_id.entry == 2, refs
        with pytest.raises(MissingPrivateKey) as info:
            _values(client, topic_name)
        first = refs[0].message_id
        assert_names_message(str(info.value), topic_name, f"{first.ledger}:{first.entry}", ["app"])
        stats = CryptoStats()
        discarded = _values(client, topic_name, crypto_failure_action="discard", crypto_stats=stats)
        assert discarded == []
        assert stats.total_discarded == 3  # the chunked message once, not once per chunk
        # consume cannot hand a chunked message on (each chunk has its own IV): it fails
        with pytest.raises(DecryptionError, match="cannot be handed on encrypted") as info:
            _values(client, topic_name, crypto_failure_action="consume")
        assert topic_name in str(info.value) and "discard" in str(info.value)


def test_key_rotation_two_producers_two_key_names_read_with_a_map(
    pulsar_lite, topic_name, pairs
) -> None:
    """Ours with key name 'k1', the official one with 'k2', then ours again: a topic
    whose messages change keys over its life, read whole with a map of both keys."""
    url, (a, b) = pulsar_lite.service_url, (pairs["a"], pairs["b"])
    first = [f"ours-{i}".encode() for i in range(15)]
    second = [f"official-{i}".encode() for i in range(15)]
    third = [f"ours-again-{i}".encode() for i in range(5)]
    with PulsarClient(url) as client:
        with client.create_producer(
            topic_name, compression="lz4", encryption_keys="k1", public_key=a.pub_url
        ) as producer:
            for value in first:
                producer.send(value)
            producer.flush()
        official_ids = produce(url, topic_name, second, compression="ZSTD",
                               batching_max_messages=4, encryption_key="k2",
                               crypto_key_reader=b.reader())  # fmt: skip
        with client.create_producer(
            topic_name,
            batching=False,
            encryption_keys="k1",
            public_key="data:application/x-pem-file;base64,"
            + base64.b64encode(a.pub.read_bytes()).decode(),
        ) as producer:
            for value in third:
                producer.send(value)
            producer.flush()
        both = json.dumps({"k1": a.priv_url, "k2": b.priv_data})
        assert _values(client, topic_name, private_key=both) == first + second + third
        # A map without k2: the first official message fails, named with its key name.
        with pytest.raises(MissingPrivateKey) as info:
            _values(client, topic_name, private_key=json.dumps({"k1": a.priv_url}))
        assert_names_message(str(info.value), topic_name, _entry(official_ids[0]), ["k2"])
        stats = CryptoStats()
        only_k1 = _values(client, topic_name, private_key=json.dumps({"k1": a.priv_url}),
                          crypto_failure_action="discard", crypto_stats=stats)  # fmt: skip
        assert only_k1 == first + third and stats.total_discarded == len(second)


def test_a_corrupted_ciphertext_fails_the_read_naming_its_id(
    pulsar_lite, topic_name, pairs, monkeypatch
) -> None:
    """A payload altered after encryption (one bit of the ciphertext flipped before it
    is sent): AES-GCM's tag does not match, and the read fails naming the message."""
    from pulsar_spark.protocol.crypto.encrypt import Encryptor

    url, pair = pulsar_lite.service_url, pairs["a"]
    real = Encryptor.encrypt

    def corrupting(self, metadata, payload, *, now):
        out = bytearray(real(self, metadata, payload, now=now))
        out[len(out) // 2] ^= 0x10
        return bytes(out)

    with PulsarClient(url) as client:
        with client.create_producer(
            topic_name, batching=False, encryption_keys="app", public_key=pair.pub_url
        ) as producer:
            producer.send(b"good")
            producer.flush()
            monkeypatch.setattr(Encryptor, "encrypt", corrupting)
            producer.send(b"altered")
            producer.flush()
            monkeypatch.setattr(Encryptor, "encrypt", real)
            producer.send(b"good again")
            producer.flush()
        refs = list(client.scan_ids(topic_name))
        assert len(refs) == 3
        with pytest.raises(CiphertextError) as info:
            _values(client, topic_name, private_key=pair.priv_url)
        text, bad = str(info.value), refs[1].message_id
        assert "AES-GCM authentication failed" in text and topic_name in text
        assert f"message {bad.ledger}:{bad.entry}:" in text and "'app'" in text
        assert info.value.message_id is not None
        assert info.value.message_id.startswith(f"{bad.ledger}:{bad.entry}:")
        stats = CryptoStats()
        got = _values(client, topic_name, private_key=pair.priv_url,
                      crypto_failure_action="discard", crypto_stats=stats)  # fmt: skip
        assert got == [b"good", b"good again"] and stats.total_discarded == 1
