"""Our producer against pulsar-lite; the official client reads what we wrote."""

from __future__ import annotations

import pyarrow as pa
import pytest
from brokers import CODECS, read_all

from pulsar_spark.client import ClientError, PulsarClient
from pulsar_spark.client.routing import java_string_hash


def _messages(n: int) -> list[dict]:
    out = []
    for i in range(n):
        message: dict = {"value": f"v{i}-".encode() * (1 + i % 4)}
        if i % 3:
            message["key"] = f"key-{i % 7}"
        if i % 2:
            message["properties"] = {"i": str(i), "ü": "ñ"}
            message["event_time"] = 1_700_000_000_000 + i
        out.append(message)
    return out


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
@pytest.mark.parametrize("codec", CODECS)
def test_official_client_reads_what_we_produce(
    pulsar_lite, topic_name, codec: str, batching: bool
) -> None:
    sent = _messages(150)
    compression = None if codec == "NONE" else codec.lower()
    with PulsarClient(pulsar_lite.service_url) as client, client.create_producer(
        topic_name, compression=compression, batching=batching, batch_max_messages=40
    ) as producer:
        for m in sent:
            producer.send(m["value"], m.get("key"), m.get("properties"), m.get("event_time"))
    got = read_all(pulsar_lite.service_url, topic_name, at_least=len(sent))
    assert [g["value"] for g in got] == [m["value"] for m in sent]
    assert [g["key"] for g in got] == [m.get("key") for m in sent]
    assert [g["properties"] for g in got] == [m.get("properties", {}) for m in sent]
    assert [g["event_time"] for g in got] == [m.get("event_time") for m in sent]
    assert len({g["producer_name"] for g in got}) == 1


def test_flush_waits_for_every_receipt_and_we_read_it_back(pulsar_lite, topic_name) -> None:
    n = 5000
    with PulsarClient(pulsar_lite.service_url) as client:
        producer = client.create_producer(topic_name, compression="lz4",
                                          max_pending_messages=500)
        for i in range(n):
            producer.send(f"m{i}".encode())
        producer.flush()
        assert producer._pending_messages == 0
        values = [v for b in client.read_batches(topic_name)
                  for v in b.column("value").to_pylist()]
        producer.close()
    assert values == [f"m{i}".encode() for i in range(n)]


def test_send_batch_from_arrow(pulsar_lite, topic_name) -> None:
    table = pa.table({
        "value": pa.array([b"a", b"b", b"c"]),
        "key": pa.array(["k1", None, "k3"]),
        "properties": pa.array([[("x", "1")], [], None], pa.map_(pa.string(), pa.string())),
    })
    with PulsarClient(pulsar_lite.service_url) as client:
        with client.create_producer(topic_name) as producer:
            producer.send_batch(table)
            with pytest.raises(ClientError, match="accepts only"):
                producer.send_batch(pa.table({"value": [b"x"], "oops": [1]}))
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == [b"a", b"b", b"c"]
    assert [r["key"] for r in rows] == [b"k1", None, b"k3"]
    assert [dict(r["properties"]) for r in rows] == [{"x": "1"}, {}, {}]


def test_named_producer_sequence_ids_follow_the_broker(pulsar_lite, topic_name) -> None:
    # Sequence ids start at the broker's last_sequence_id + 1. pulsar-lite has no
    # deduplication and always answers -1, so a re-created named producer starts at 0
    # again there. Continuation on Apache Pulsar with deduplication is for issue 4's tests.
    with PulsarClient(pulsar_lite.service_url) as client:
        with client.create_producer(topic_name, producer_name="named-p") as producer:
            for i in range(10):
                producer.send(b"%d" % i)
        with client.create_producer(topic_name, producer_name="named-p") as producer:
            producer.send(b"10")
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["sequenceId"] for r in rows] == [*range(10), 0]
    assert {r["producerName"] for r in rows} == {"named-p"}


def test_dropped_connections_resend_pending_batches(pulsar_lite, fault_proxy, topic_name) -> None:
    proxy = fault_proxy(pulsar_lite, drop_every_frames=12)
    n = 3000
    with PulsarClient(proxy.service_url) as client, client.create_producer(
        topic_name, batch_max_messages=50, send_timeout=60
    ) as producer:
        for i in range(n):
            producer.send(f"m{i}".encode())
    assert proxy.stats()["drops"] > 0
    with PulsarClient(pulsar_lite.service_url) as client:
        values = [v for b in client.read_batches(topic_name)
                  for v in b.column("value").to_pylist()]
    # Without broker deduplication a batch whose receipt was lost is stored twice;
    # every message must be there, in order of first appearance.
    assert set(values) == {f"m{i}".encode() for i in range(n)}
    first_seen = list(dict.fromkeys(values))
    assert first_seen == [f"m{i}".encode() for i in range(n)]


@pytest.mark.parametrize(
    ("key", "java_hash_code"),
    [
        ("", 0),
        ("hello", 99162322),  # "hello".hashCode() in Java
        ("Aa", 2112),
        ("BB", 2112),  # the classic collision
        ("ü", 252),
        ("\U0001f600", 1772899),  # a surrogate pair: 0xD83D * 31 + 0xDE00
        ("polygenelubricants", -2147483648),  # hashCode() is Integer.MIN_VALUE
    ],
)
def test_java_string_hash(key: str, java_hash_code: int) -> None:
    assert java_string_hash(key) == java_hash_code & 0x7FFF_FFFF


def test_partitioned_topic_routes_keys_like_the_java_client(
    pulsar_lite_partitioned, topic_name
) -> None:
    url = pulsar_lite_partitioned.service_url
    keys = [f"user-{i}" for i in range(40)]
    with PulsarClient(url) as client:
        with client.create_producer(topic_name, batch_max_messages=10) as producer:
            for i, key in enumerate(keys * 3):
                producer.send(f"{key}/{i}".encode(), key)
            for i in range(100):
                producer.send(f"keyless-{i}".encode())
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    keyed = [r for r in rows if r["key"] is not None]
    assert len(keyed) == 120 and len(rows) == 220
    for row in keyed:
        assert row["partition"] == java_string_hash(row["key"].decode()) % 4
    keyless = [r for r in rows if r["key"] is None]
    assert len({r["partition"] for r in keyless}) == 4  # spread round-robin, in whole batches
    for partition in range(4):  # per partition, order is kept
        values = [r["value"] for r in rows if r["partition"] == partition and r["key"] is None]
        assert values == sorted(values, key=lambda v: int(v.split(b"-")[1]))


def test_one_partition_by_name(pulsar_lite_partitioned, topic_name) -> None:
    with PulsarClient(pulsar_lite_partitioned.service_url) as client:
        with client.create_producer(f"{topic_name}-partition-2") as producer:
            producer.send(b"x")
        rows = [r for b in client.read_batches(f"{topic_name}-partition-2")
                for r in b.to_pylist()]
    assert [(r["value"], r["partition"]) for r in rows] == [(b"x", 2)]
