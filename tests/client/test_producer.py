"""Our producer against pulsar-lite; the official client reads what we wrote."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pulsar_spark.client import ClientError, PulsarClient
from pulsar_spark.client.write.partition_hash import java_string_hash
from tests.support.official import CODECS, read_all


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
    broker, topic_name, codec: str, batching: bool
) -> None:
    sent = _messages(150)
    compression = None if codec == "NONE" else codec.lower()
    with (
        PulsarClient(broker.service_url) as client,
        client.create_producer(
            topic_name, compression=compression, batching=batching, batch_max_messages=40
        ) as producer,
    ):
        for m in sent:
            producer.send(m["value"], m.get("key"), m.get("properties"), m.get("event_time"))
    got = read_all(broker.service_url, topic_name, at_least=len(sent))
    assert [g["value"] for g in got] == [m["value"] for m in sent]
    assert [g["key"] for g in got] == [m.get("key") for m in sent]
    assert [g["properties"] for g in got] == [m.get("properties", {}) for m in sent]
    assert [g["event_time"] for g in got] == [m.get("event_time") for m in sent]
    assert len({g["producer_name"] for g in got}) == 1


def test_flush_waits_for_every_receipt_and_we_read_it_back(broker, topic_name) -> None:
    n = 5000
    with PulsarClient(broker.service_url) as client:
        producer = client.create_producer(topic_name, compression="lz4", max_pending_messages=500)
        for i in range(n):
            producer.send(f"m{i}".encode())
        producer.flush()
        assert producer._pending_messages == 0
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
        producer.close()
    assert values == [f"m{i}".encode() for i in range(n)]


def test_send_batch_from_arrow(broker, topic_name) -> None:
    table = pa.table(
        {
            "value": pa.array([b"a", b"b", b"c"]),
            "key": pa.array(["k1", None, "k3"]),
            "properties": pa.array([[("x", "1")], [], None], pa.map_(pa.string(), pa.string())),
        }
    )
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name) as producer:
            producer.send_batch(table)
            with pytest.raises(ClientError, match="accepts only"):
                producer.send_batch(pa.table({"value": [b"x"], "oops": [1]}))
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == [b"a", b"b", b"c"]
    assert [r["key"] for r in rows] == [b"k1", None, b"k3"]
    assert [dict(r["properties"]) for r in rows] == [{"x": "1"}, {}, {}]


def test_named_producer_sequence_ids_follow_the_broker(broker, topic_name) -> None:
    # Sequence ids start at the broker's last_sequence_id + 1. pulsar-lite has no
    # deduplication and always answers -1, so a re-created named producer starts at 0
    # again there. Continuation on Apache Pulsar with deduplication is for issue 4's tests.
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name, producer_name="named-p") as producer:
            for i in range(10):
                producer.send(b"%d" % i)
        with client.create_producer(topic_name, producer_name="named-p") as producer:
            producer.send(b"10")
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["sequenceId"] for r in rows] == [*range(10), 0]
    assert {r["producerName"] for r in rows} == {"named-p"}


def test_dropped_connections_resend_pending_batches(broker, fault_proxy, topic_name) -> None:
    proxy = fault_proxy(broker.service_url, drop_every_frames=12)
    n = 3000
    with (
        PulsarClient(proxy.service_url) as client,
        client.create_producer(topic_name, batch_max_messages=50, send_timeout=60) as producer,
    ):
        for i in range(n):
            producer.send(f"m{i}".encode())
    assert proxy.stats()["drops"] > 0
    with PulsarClient(broker.service_url) as client:
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
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


def test_partitioned_topic_routes_keys_like_the_java_client(partitioned_broker, topic_name) -> None:
    url = partitioned_broker.service_url
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


def test_one_partition_by_name(partitioned_broker, topic_name) -> None:
    with PulsarClient(partitioned_broker.service_url) as client:
        with client.create_producer(f"{topic_name}-partition-2") as producer:
            producer.send(b"x")
        rows = [r for b in client.read_batches(f"{topic_name}-partition-2") for r in b.to_pylist()]
    assert [(r["value"], r["partition"]) for r in rows] == [(b"x", 2)]


# -- chunking --------------------------------------------------------------------


def _big(n: int, seed: int) -> bytes:
    """``n`` incompressible bytes."""
    import random

    return random.Random(seed).randbytes(n)


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
@pytest.mark.parametrize("compression", [None, "lz4", "zstd"])
def test_large_messages_go_in_chunks_and_both_readers_reassemble_them(
    broker, topic_name, compression: str | None, batching: bool
) -> None:
    sent = [b"small-0", _big(300_000, 1), b"small-1", b"x" * 200_000, _big(70_000, 2), b""]
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(
            topic_name, compression=compression, batching=batching, chunk_max_size=64 * 1024
        ) as producer:
            for i, value in enumerate(sent):
                producer.send(value, key=f"k{i}", properties={"i": str(i)})
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == sent
    assert [r["key"] for r in rows] == [f"k{i}".encode() for i in range(len(sent))]
    assert [dict(r["properties"]) for r in rows] == [{"i": str(i)} for i in range(len(sent))]
    assert len({r["messageId"] for r in rows}) == len(sent)
    got = read_all(broker.service_url, topic_name, at_least=len(sent))
    assert [g["value"] for g in got] == sent
    assert [g["key"] for g in got] == [f"k{i}" for i in range(len(sent))]


def test_a_message_over_the_default_limit_is_chunked(broker, topic_name) -> None:
    # pulsar-lite announces no max_message_size: the default 5 MiB applies.
    value = _big(12 * 1024 * 1024, 3)
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name, compression="lz4") as producer:
            producer.send(value)
            producer.send(b"after")
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == [value, b"after"]


def test_chunking_off_refuses_the_message_and_keeps_the_producer(broker, topic_name) -> None:
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(
            topic_name, batching=False, chunking=False, chunk_max_size=4096
        ) as producer:
            producer.send(b"before")
            with pytest.raises(ClientError, match=r"message \d+ is \d+ bytes.*chunking is off"):
                producer.send(b"y" * 10_000)
            producer.send(b"after")
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == [b"before", b"after"]


def test_chunked_messages_survive_dropped_connections(broker, fault_proxy, topic_name) -> None:
    proxy = fault_proxy(broker.service_url, drop_every_frames=7)
    sent = [_big(40_000 + i, i) for i in range(12)]
    with (
        PulsarClient(proxy.service_url) as client,
        client.create_producer(
            topic_name, batching=False, chunk_max_size=8 * 1024, send_timeout=60
        ) as producer,
    ):
        for value in sent:
            producer.send(value)
    assert proxy.stats()["drops"] > 0
    with PulsarClient(broker.service_url) as client:
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
    # Without deduplication a message whose last receipt was lost is stored again;
    # every message is whole, in order of first appearance.
    assert list(dict.fromkeys(values)) == sent


# -- SEND_ERROR ------------------------------------------------------------------


def _send_error_hook(code: int, message: str, times: int):
    """A proxy frame hook that turns the first ``times`` SEND_RECEIPTs into SEND_ERRORs."""
    from pulsar_spark.protocol import pb
    from pulsar_spark.protocol.framing import encode_command

    left = [times]

    def hook(frame, raw: bytes) -> bytes:
        if frame.command.type != pb.BaseCommand.SEND_RECEIPT or left[0] <= 0:
            return raw
        left[0] -= 1
        receipt = frame.command.send_receipt
        error = pb.CommandSendError(
            producer_id=receipt.producer_id,
            sequence_id=receipt.sequence_id,
            error=code,
            message=message,
        )
        return encode_command(pb.BaseCommand(type=pb.BaseCommand.SEND_ERROR, send_error=error))

    return hook


def test_a_fatal_send_error_fails_the_producer_with_the_brokers_message(
    broker, fault_proxy, topic_name
) -> None:
    from pulsar_spark.protocol import pb
    from pulsar_spark.protocol.errors import ServerError

    hook = _send_error_hook(pb.TopicTerminatedError, "Topic was already terminated", 1)
    proxy = fault_proxy(broker.service_url, frame_hook=hook)
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(topic_name, batching=False)
        producer.send(b"m0")
        with pytest.raises(
            ServerError, match="TopicTerminatedError: Topic was already terminated"
        ) as caught:
            producer.flush(timeout=10)
        assert not caught.value.retriable
        assert topic_name in str(caught.value)
        with pytest.raises(ServerError, match="TopicTerminatedError"):
            producer.send(b"m1")  # the producer stays failed
        with pytest.raises(ServerError):
            producer.close()


def test_a_transient_send_error_re_creates_the_producer_and_resends(
    broker, fault_proxy, topic_name
) -> None:
    from pulsar_spark.protocol import pb

    hook = _send_error_hook(pb.PersistenceError, "bookie write failed", 2)
    proxy = fault_proxy(broker.service_url, frame_hook=hook)
    with (
        PulsarClient(proxy.service_url) as client,
        client.create_producer(topic_name, batch_max_messages=10) as producer,
    ):
        for i in range(100):
            producer.send(b"%d" % i)
    assert proxy.stats()["connections_accepted"] == 1  # the connection stays (issue 14)
    with PulsarClient(broker.service_url) as client:
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
    assert list(dict.fromkeys(values)) == [b"%d" % i for i in range(100)]


# -- explicit sequence ids and deduplication ------------------------------------------


def test_explicit_sequence_ids_must_increase(broker, topic_name) -> None:
    table = pa.table({"value": [b"a", b"b", b"c"]})
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name, producer_name="explicit") as producer:
            assert producer.send_batch(table, first_sequence_id=10) == 3
            assert producer.send(b"d", sequence_id=20)
            assert producer.send(b"e")  # the next one: 21
            with pytest.raises(ClientError, match="sequence id 5 is below the next one, 22"):
                producer.send(b"x", sequence_id=5)
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [(r["value"], r["sequenceId"]) for r in rows] == [
        (b"a", 10),
        (b"b", 11),
        (b"c", 12),
        (b"d", 20),
        (b"e", 21),
    ]


def test_replays_are_skipped_here_or_dropped_by_the_broker(apache_pulsar_dedup, topic_name) -> None:
    url = apache_pulsar_dedup.service_url
    table = pa.table({"value": [b"%d" % i for i in range(10)]})
    with PulsarClient(url) as client:
        with client.create_producer(topic_name, producer_name="sink-0") as producer:
            assert producer.last_sequence_id == -1
            assert producer.send_batch(table, first_sequence_id=100) == 10
        with client.create_producer(topic_name, producer_name="sink-0") as producer:
            assert producer.last_sequence_id == 109  # the broker remembers
            assert producer.send_batch(table, first_sequence_id=100) == 0  # a replay
            assert producer.send_batch(table, first_sequence_id=105) == 5  # half of one
        with client.create_producer(topic_name, producer_name="sink-0", batching=False) as producer:
            # A producer that forgot what the broker has (as a task without the
            # broker's answer would): sent anyway, dropped by the broker, confirmed
            # as duplicates.
            producer.last_sequence_id, producer._batcher.next_seq = -1, 0
            assert producer.send_batch(table, first_sequence_id=100) == 10
            producer.flush()
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["sequenceId"] for r in rows] == list(range(100, 115))
    assert [r["value"] for r in rows] == [b"%d" % i for i in [*range(10), *range(5, 10)]]


def test_the_producer_keeps_fewer_than_30_instance_attributes(broker, topic_name) -> None:
    # CPython 3.11 looks attributes up more slowly on instances with 30 or more of them;
    # the producer reads about ten per queued message, so crossing that line cost ~7% of
    # the client's write speed once (bench/client_write.py). Keep state in fewer fields.
    with PulsarClient(broker.service_url) as client, client.create_producer(topic_name) as p:
        assert len(vars(p)) < 30, sorted(vars(p))
