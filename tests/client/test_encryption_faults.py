"""Encrypted topics across reconnects: dropped connections and a broker restart.

A read of an encrypted topic through the fault proxy (connections cut every few frames)
or across a broker restart returns every message once, decrypted, with its key and
properties (in a batch those travel inside the encrypted payload), and a chunked message,
each chunk encrypted on its own, whole. An encrypting producer
whose connections are cut stores every message encrypted; on Apache Pulsar in a namespace
that requires encryption the broker refuses a PRODUCER without ``encrypted=true`` and a
message without encryption keys, so the re-created producers are seen to say so.
"""

from __future__ import annotations

import os

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.crypto.errors import MissingPrivateKey
from tests.support.keys import KeyPair, encryption_required_topic
from tests.support.official import produce


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> KeyPair:
    return KeyPair(tmp_path_factory.mktemp("fault-keys"), "app")


def _sent(n: int) -> list[dict]:
    return [
        {"value": f"secret-{i:05d}".encode() * 3, "key": f"k{i % 7}", "properties": {"i": str(i)}}
        for i in range(n)
    ]


def _produce_encrypted(url: str, topic: str, sent: list[dict], pair: KeyPair) -> None:
    """Batches of 20 (LZ4), then 30 single messages (ZSTD), with the official client."""
    reader = pair.reader()
    batched, single = sent[:-30], sent[-30:]
    produce(url, topic, batched, batching_max_messages=20, compression="LZ4",
            encryption_key="app", crypto_key_reader=reader)  # fmt: skip
    produce(url, topic, single, batching=False, compression="ZSTD",
            encryption_key="app", crypto_key_reader=reader)  # fmt: skip


def _check_rows(rows: list[dict], sent: list[dict]) -> None:
    assert [r["value"] for r in rows] == [m["value"] for m in sent]
    assert [r["key"] for r in rows] == [m["key"].encode() for m in sent]
    assert [dict(r["properties"]) for r in rows] == [m["properties"] for m in sent]
    assert len({r["messageId"] for r in rows}) == len(sent)


def _rows(client: PulsarClient, topic: str, **kwargs) -> list[dict]:
    return [r for batch in client.read_batches(topic, **kwargs) for r in batch.to_pylist()]


def test_an_encrypted_read_across_dropped_connections_loses_and_duplicates_nothing(
    pulsar_lite, fault_proxy, topic_name, pair
) -> None:
    sent = _sent(1230)  # 60 encrypted batches and 30 encrypted single messages
    _produce_encrypted(pulsar_lite.service_url, topic_name, sent, pair)
    proxy = fault_proxy(pulsar_lite.service_url, drop_every_frames=25)
    with PulsarClient(proxy.service_url, operation_timeout=60) as client:
        rows = _rows(client, topic_name, private_key=pair.priv_url, receiver_queue_size=20)
        drops = proxy.stats()["drops"]
        # Still encrypted on the broker: without the key the read fails, it never hands
        # out ciphertext.
        with pytest.raises(MissingPrivateKey, match="'app'"):
            _rows(client, topic_name)
    _check_rows(rows, sent)
    assert drops >= 3


def test_an_encrypted_read_across_a_broker_restart(fresh_pulsar_lite, topic_name, pair) -> None:
    broker = fresh_pulsar_lite()
    sent = _sent(2030)  # 100 batches, 30 single messages
    _produce_encrypted(broker.service_url, topic_name, sent, pair)
    rows: list[dict] = []
    with PulsarClient(broker.service_url, operation_timeout=60) as client:
        batches = client.read_batches(
            topic_name, batch_rows=200, receiver_queue_size=4, private_key=pair.priv_url
        )
        for i, batch in enumerate(batches):
            rows.extend(batch.to_pylist())
            if i == 1:  # 400 rows read, at most 4 more batches of 20 fetched
                broker.restart()
    _check_rows(rows, sent)


def _encrypting_producer_across_drops(service_url: str, topic: str, proxy, pair: KeyPair) -> None:
    n = 2000
    with (
        PulsarClient(proxy.service_url, operation_timeout=60) as client,
        client.create_producer(
            topic,
            batch_max_messages=50,
            send_timeout=60,
            compression="lz4",
            encryption_keys="app",
            public_key=pair.pub_url,
        ) as producer,  # fmt: skip
    ):
        for i in range(n):
            producer.send(f"m{i}".encode())
    assert proxy.stats()["drops"] >= 3
    assert proxy.stats()["connections_accepted"] >= 4
    with PulsarClient(service_url) as client:
        values = [r["value"] for r in _rows(client, topic, private_key=pair.priv_url)]
        # Every stored message is encrypted: a read that discards what it cannot decrypt
        # gets nothing.
        assert _rows(client, topic, crypto_failure_action="discard") == []
    # Without broker deduplication a batch whose receipt was lost is stored twice;
    # every message must be there, in order of first appearance.
    assert list(dict.fromkeys(values)) == [f"m{i}".encode() for i in range(n)]


def test_an_encrypting_producer_across_dropped_connections_stores_every_message(
    pulsar_lite, fault_proxy, topic_name, pair
) -> None:
    proxy = fault_proxy(pulsar_lite.service_url, drop_every_frames=12)
    _encrypting_producer_across_drops(pulsar_lite.service_url, topic_name, proxy, pair)


def test_a_reconnected_encrypting_producer_says_encrypted_where_encryption_is_required(
    apache_pulsar, fault_proxy, pair
) -> None:
    # The broker refuses a PRODUCER without encrypted=true ("Encryption is required") and a
    # message without encryption keys: every producer re-created after a drop must say it.
    topic = encryption_required_topic(apache_pulsar.admin, "enc-faults")
    proxy = fault_proxy(apache_pulsar.service_url, drop_every_frames=12)
    _encrypting_producer_across_drops(apache_pulsar.service_url, topic, proxy, pair)


def test_encrypted_chunked_messages_read_whole_across_dropped_connections(
    pulsar_lite, fault_proxy, topic_name, pair
) -> None:
    # Each chunk is encrypted on its own; a drop between chunks must cost neither the
    # message nor a duplicate: the read resumes at the message's first chunk.
    url = pulsar_lite.service_url
    sent = [v for i in range(8) for v in (f"small-{i}".encode(), os.urandom(6000 + i))]
    with PulsarClient(url) as client, client.create_producer(
        topic_name, batching=False, chunk_max_size=1024, compression="lz4",
        encryption_keys="app", public_key=pair.pub_url,
    ) as producer:  # fmt: skip
        for value in sent:
            producer.send(value)
    proxy = fault_proxy(url, drop_every_frames=25)
    with PulsarClient(proxy.service_url, operation_timeout=60) as client:
        rows = _rows(client, topic_name, private_key=pair.priv_url, receiver_queue_size=10)
    assert [r["value"] for r in rows] == sent
    assert len({r["messageId"] for r in rows}) == len(sent)
    assert proxy.stats()["drops"] >= 3
