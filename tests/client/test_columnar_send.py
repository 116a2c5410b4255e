"""send_batch's columnar path (:mod:`pulsar_spark.client.write.batcher`): where batches are
cut, rows too large to share one, tables that continue an open batch, senders on two
threads; what was written read back from the broker."""

from __future__ import annotations

import base64
import threading

import numpy as np
import pyarrow as pa
import pytest

from pulsar_spark.client import ClientError, PulsarClient
from pulsar_spark.columnar.rows.send_items import item_block
from tests.support.official import read_all

PROPS = pa.map_(pa.string(), pa.string())


def _spy(producer) -> list[tuple[int, int, int, bool]]:
    """(first id, last id, messages, batched) of every SEND the producer seals."""
    seen: list[tuple[int, int, int, bool]] = []
    dispatch = producer._dispatch

    def record(items, count, *, batched):
        if isinstance(items, tuple):
            seen.append((items[2], items[3], count, batched))
        else:
            seen.append((items[0][0], items[-1][0], count, batched))
        dispatch(items, count, batched=batched)

    producer._dispatch = record
    return seen


def _rows(client: PulsarClient, topic: str) -> list[dict]:
    return [r for b in client.read_batches(topic) for r in b.to_pylist()]


def test_batches_close_at_the_count_the_bytes_and_around_large_rows(broker, topic_name) -> None:
    n = 700
    values = [b"%05d" % i * (1 + i % 9) for i in range(n)]
    values[300] = b"L" * 9000  # over batch_max_bytes: alone, in its place
    values[301] = None  # a tombstone
    values[650] = b"C" * 70_000  # over chunk_max_size too: alone, in chunks
    table = pa.table(
        {
            "value": pa.array(values, pa.binary()),
            "key": pa.array([None if i % 4 == 0 else f"k{i % 13}" for i in range(n)]),
            "properties": pa.array([[("i", str(i))] if i % 3 else None for i in range(n)], PROPS),
            "eventTime": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        }
    )
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(
            topic_name,
            compression="lz4",
            batch_max_messages=100,
            batch_max_bytes=4096,
            batch_max_delay=60,
            chunk_max_size=32 * 1024,
        ) as producer:
            seen = _spy(producer)
            assert producer.send_batch(table) == n
            producer.flush()
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == values  # the tombstone reads as None
    assert [r["sequenceId"] for r in rows] == list(range(n))
    assert [r["key"] for r in rows] == [
        None if i % 4 == 0 else f"k{i % 13}".encode() for i in range(n)
    ]
    assert [dict(r["properties"]) for r in rows] == [
        {"i": str(i)} if i % 3 else {} for i in range(n)
    ]
    assert [int(r["eventTime"].timestamp() * 1000) for r in rows] == [
        1_700_000_000_000 + i for i in range(n)
    ]
    alone = [(first, batched) for first, _, _, batched in seen if not batched]
    assert alone == [(300, False), (650, False)]
    # Batches in id order, none above the count, each closed by the count or the bytes
    # (the one before a row sent alone and the last one excepted).
    assert [s[0] for s in seen] == sorted(s[0] for s in seen)
    assert sum(s[2] for s in seen) == n
    # A row's share of a batch is its item's bytes (metadata size, metadata, payload).
    block = item_block(table, np.arange(n, dtype=np.int64))
    share = np.diff(block.starts)
    for first, last, count, batched in seen:
        if not batched:
            continue
        assert count == last - first + 1 <= 100
        held = int(share[first : last + 1].sum())
        assert held - int(share[last]) < 4096  # open until its last row came
        if last + 1 not in (300, 650, n) and count < 100:
            assert held >= 4096, (first, last, held)  # closed by the bytes


def test_a_table_continues_the_open_batch(broker, topic_name) -> None:
    table = pa.table({"value": pa.array([b"x" * 10] * 150, pa.binary())})
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(
            topic_name, batch_max_messages=100, batch_max_delay=60
        ) as producer:
            seen = _spy(producer)
            producer.send_batch(table)
            producer.send(b"one")
            producer.send_batch(table)
            producer.flush()
        rows = _rows(client, topic_name)
    assert [(s[0], s[2]) for s in seen] == [(0, 100), (100, 100), (200, 100), (300, 1)]
    assert [r["sequenceId"] for r in rows] == list(range(301))
    assert rows[150]["value"] == b"one"


def test_two_threads_sending_keep_ids_in_order(broker, topic_name) -> None:
    table = pa.table({"value": pa.array([b"t" * 50] * 2000, pa.binary())})
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(
            topic_name, batch_max_messages=300, max_pending_messages=600
        ) as producer:
            seen = _spy(producer)

            def tables() -> None:
                for _ in range(5):
                    producer.send_batch(table)

            worker = threading.Thread(target=tables)
            worker.start()
            for i in range(3000):
                producer.send(b"s%d" % i)
            worker.join()
            producer.flush()
        rows = _rows(client, topic_name)
    ids = [r["sequenceId"] for r in rows]
    assert ids == list(range(13_000))
    firsts = [s[0] for s in seen]
    assert firsts == sorted(firsts)
    singles = [r["value"] for r in rows if r["value"].startswith(b"s")]
    assert singles == [b"s%d" % i for i in range(3000)]


def test_explicit_ids_and_replays_on_the_columnar_path(broker, topic_name) -> None:
    table = pa.table({"value": pa.array([b"%d" % i for i in range(10)], pa.binary())})
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name, producer_name="col-ids") as producer:
            producer.last_sequence_id = 104  # as if the broker had 100-104 already
            assert producer.send_batch(table, first_sequence_id=100) == 5
            assert producer.send_batch(table, first_sequence_id=95) == 0  # all replays
            with pytest.raises(ClientError, match="sequence id 105 is below the next one, 110"):
                producer.send_batch(table, first_sequence_id=100)
            assert producer.send_batch(table.slice(0, 2), first_sequence_id=200) == 2
        rows = _rows(client, topic_name)
    assert [(r["value"], r["sequenceId"]) for r in rows] == [
        *((b"%d" % i, 100 + i) for i in range(5, 10)),
        (b"0", 200),
        (b"1", 201),
    ]


def test_the_official_client_reads_columnar_batches(broker, topic_name) -> None:
    n = 300
    table = pa.table(
        {
            "value": pa.array([b"v%d" % i for i in range(n)], pa.binary()),
            "key": pa.array([bytes([i % 256, 0, 255]) for i in range(n)], pa.binary()),
            "properties": pa.array([[("ü", "ñ"), ("n", str(i))] for i in range(n)], PROPS),
        }
    )
    with (
        PulsarClient(broker.service_url) as client,
        client.create_producer(topic_name, compression="zstd") as producer,
    ):
        producer.send_batch(table)
    got = read_all(broker.service_url, topic_name, at_least=n)
    assert [g["value"] for g in got] == [b"v%d" % i for i in range(n)]
    assert [g["properties"] for g in got] == [{"ü": "ñ", "n": str(i)} for i in range(n)]
    # binary keys travel as base64 text with partition_key_b64_encoded
    assert [g["key"] for g in got] == [
        base64.b64encode(bytes([i % 256, 0, 255])).decode() for i in range(n)
    ]


@pytest.mark.parametrize("batching", [True, False], ids=["columnar", "row-by-row"])
def test_sequence_ids_with_gaps(broker, topic_name, batching: bool) -> None:
    """One partition's rows of a routed table: increasing ids with gaps."""
    table = pa.table({"value": pa.array([b"a", b"b", b"c", b"d"], pa.binary())})
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name, batching=batching) as producer:
            producer.last_sequence_id = 3  # the broker has up to 3: id 3 is a replay
            assert producer.send_batch(table, sequence_ids=[3, 7, 8, 20]) == 3
            with pytest.raises(ClientError, match="row 2 has 9 after 30"):
                producer.send_batch(table, sequence_ids=[25, 30, 9, 40])
            with pytest.raises(ClientError, match="4 ids for 3 rows"):
                producer.send_batch(table.slice(0, 3), sequence_ids=[50, 51, 52, 53])
            with pytest.raises(ClientError, match="not both"):
                producer.send_batch(table, 60, sequence_ids=[60, 61, 62, 63])
            with pytest.raises(ClientError, match="sequence id 15 is below the next one, 21"):
                producer.send_batch(table, sequence_ids=[15, 16, 17, 18])
            assert producer.send_batch(table.slice(0, 1), sequence_ids=[np.int64(100)]) == 1
        rows = _rows(client, topic_name)
    assert [(r["value"], r["sequenceId"]) for r in rows] == [
        (b"b", 7),
        (b"c", 8),
        (b"d", 20),
        (b"a", 100),
    ]
