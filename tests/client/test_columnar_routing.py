"""A partitioned producer's ``send_batch`` routed column by column
(:mod:`pulsar_spark.client.write.partition_hash`): the vectorized partitions equal the scalar
routing (Hypothesis), and on both brokers every row lands once, on the partition the Java
client's ``JavaStringHash`` picks (checked against the Java client too), keyless rows
in runs of a batch per partition, sequence ids and order kept, bad rows refused whole."""

from __future__ import annotations

import base64
import types
import uuid

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_spark.client import ClientError, PulsarClient
from pulsar_spark.client.write.partition_hash import (
    java_string_hash,
    java_string_hashes,
    row_partitions,
)
from pulsar_spark.client.write.routing import PartitionedProducer
from pulsar_spark.columnar.rows.encode import partition_key_text
from tests.client.conftest import PARTITIONS
from tests.support.java_client import java_produce

# Text Arrow can hold (no lone surrogates), astral characters (surrogate pairs) included.
_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


def _scalar(keys: list, partitions: int, switch_every: int, first: int) -> list[int]:
    """Each key's partition from PartitionedProducer.partition_for, one call per row."""
    fake = [types.SimpleNamespace(batch_max_messages=switch_every)] * partitions
    producer = PartitionedProducer(fake)  # type: ignore[arg-type]
    producer._sent_keyless = first
    return [producer.partition_for(k) for k in keys]


@settings(max_examples=200, deadline=None)
@given(st.lists(_TEXT, max_size=60))
def test_text_hashes_equal_the_scalar_hash(keys: list[str]) -> None:
    got = java_string_hashes(pa.array(keys, pa.string())).tolist()
    assert got == [java_string_hash(k) for k in keys]
    large = java_string_hashes(pa.array(keys, pa.large_string())).tolist()
    assert large == got


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=60))
def test_binary_hashes_are_those_of_the_base64_text(keys: list[bytes]) -> None:
    got = java_string_hashes(pa.array(keys, pa.binary())).tolist()
    assert got == [java_string_hash(partition_key_text(k)) for k in keys]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from(["a", "Aa", "BB", "ü", "😀", ""]), _TEXT)),
    st.integers(1, 9),
    st.integers(1, 7),
    st.integers(0, 50),
    st.booleans(),
)
def test_row_partitions_equal_the_scalar_routing(
    keys: list[str | None], partitions: int, switch_every: int, first: int, binary: bool
) -> None:
    column = pa.array(
        [None if k is None else k.encode() for k in keys] if binary else keys,
        pa.binary() if binary else pa.string(),
    )
    table = pa.table({"value": pa.array([b"v"] * len(keys)), "key": column})
    parts, keyless = row_partitions(table, partitions, first, switch_every)
    assert parts.tolist() == _scalar(column.to_pylist(), partitions, switch_every, first)
    assert keyless == sum(k is None for k in keys)
    # Sliced and chunked columns route the same.
    if len(keys) > 2:
        chunked = pa.table({"key": pa.chunked_array([column[:1], column[1:]])})
        assert row_partitions(chunked, partitions, first, switch_every)[0].tolist() == (
            parts.tolist()
        )
        sliced = table.slice(1)
        assert row_partitions(sliced, partitions, first, switch_every)[0].tolist() == (
            _scalar(column.to_pylist()[1:], partitions, switch_every, first)
        )


def test_tables_without_keys_go_round_robin_a_batch_at_a_time() -> None:
    table = pa.table({"value": pa.array([b"v"] * 25)})
    parts, keyless = row_partitions(table, 3, 7, 10)
    assert keyless == 25
    assert parts.tolist() == [0] * 3 + [1] * 10 + [2] * 10 + [0] * 2


# -- on the brokers ----------------------------------------------------------------


def _rows(client: PulsarClient, topic: str) -> list[dict]:
    return [r for b in client.read_batches(topic) for r in b.to_pylist()]


def _keyed_table(n: int, offset: int = 0) -> pa.Table:
    keys = [
        None if i % 3 == 0 else f"user-{i % 97}-ü" if i % 7 == 0 else f"u{i % 41}" for i in range(n)
    ]
    return pa.table(
        {
            "value": pa.array([f"row-{offset + i}".encode() for i in range(n)], pa.binary()),
            "key": pa.array(keys, pa.string()),
            "eventTime": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
        }
    )


def test_rows_land_once_where_the_java_hash_says_keyless_in_batches(
    partitioned_broker, topic_name
) -> None:
    n = 3000
    tables = [_keyed_table(n), _keyed_table(n, n)]
    with PulsarClient(partitioned_broker.service_url) as client:
        with client.create_producer(topic_name, batch_max_messages=100) as producer:
            assert isinstance(producer, PartitionedProducer)
            sent = [producer.send_batch(t, first_sequence_id=i * n) for i, t in enumerate(tables)]
        rows = _rows(client, topic_name)
    assert sent == [n, n]
    table = pa.concat_tables(tables)
    assert sorted(r["value"] for r in rows) == sorted(table.column("value").to_pylist())
    keys = table.column("key").to_pylist()
    by_value = {r["value"]: r for r in rows}
    keyless = 0
    for i, (value, key) in enumerate(zip(table.column("value").to_pylist(), keys, strict=True)):
        row = by_value[value]
        assert row["sequenceId"] == i
        if key is None:  # keyless message m goes to partition (m // 100) % 4
            assert row["partition"] == (keyless // 100) % PARTITIONS, i
            keyless += 1
        else:
            assert row["key"] == key.encode()
            assert row["partition"] == java_string_hash(key) % PARTITIONS
    for partition in range(PARTITIONS):  # order and ids kept per partition
        ids = [r["sequenceId"] for r in rows if r["partition"] == partition]
        assert ids == sorted(ids) and ids


def test_binary_keys_route_by_their_base64_text(partitioned_broker, topic_name) -> None:
    keys = [bytes([i % 256, i // 7 % 256, 0xFF]) * (1 + i % 3) for i in range(500)]
    table = pa.table({"value": [f"b{i}".encode() for i in range(500)], "key": keys})
    with PulsarClient(partitioned_broker.service_url) as client:
        with client.create_producer(topic_name) as producer:
            assert producer.send_batch(table) == 500
        rows = _rows(client, topic_name)
    assert len(rows) == 500
    by_value = {r["value"]: r for r in rows}
    for i, key in enumerate(keys):
        row = by_value[f"b{i}".encode()]
        assert row["key"] == key
        text = base64.b64encode(key).decode()
        assert row["partition"] == java_string_hash(text) % PARTITIONS


def test_keys_go_where_the_java_client_puts_them(partitioned_broker, topic_name) -> None:
    # The Java client's default routing (JavaStringHash); the official Python client
    # (C++) hashes keys with BoostHash by default and offers no other scheme.
    theirs = f"{topic_name}-java-{uuid.uuid4().hex[:6]}"
    if partitioned_broker.kind == "apache":
        partitioned_broker.admin.create_partitioned_topic(theirs, PARTITIONS)
    keys = [f"key-{i}" for i in range(200)] + ["", "ü", "😀", "Aa", "BB", "polygenelubricants"]
    values = [f"o{i}" for i in range(len(keys))]
    java_produce(partitioned_broker.service_url, theirs, "STRING", values, message_keys=keys)
    table = pa.table({"value": [v.encode() for v in values], "key": keys})
    with PulsarClient(partitioned_broker.service_url) as client:
        with client.create_producer(topic_name) as producer:
            assert producer.send_batch(table) == len(keys)
        ours = {_text(r["value"]): r["partition"] for r in _rows(client, topic_name)}
        java = {_text(r["value"]): r["partition"] for r in _rows(client, theirs)}
    assert len(ours) == len(java) == len(keys)
    assert ours == java
    assert len(set(ours.values())) == PARTITIONS


def _text(value: bytes | str) -> str:
    return value if isinstance(value, str) else value.decode()


def test_a_bad_row_fails_the_whole_table_naming_row_and_partition(
    partitioned_broker, topic_name
) -> None:
    table = _keyed_table(50)
    times = table.column("eventTime").to_pylist()
    times[37] = -5
    bad = table.set_column(2, "eventTime", pa.array(times, pa.int64()))
    part = java_string_hash(table.column("key")[37].as_py()) % PARTITIONS
    with PulsarClient(partitioned_broker.service_url) as client:
        with client.create_producer(topic_name, producer_name=f"p-{topic_name}") as producer:
            with pytest.raises(ClientError, match=r"row 37: event time -5 is negative"):
                producer.send_batch(bad)
            with pytest.raises(ClientError, match=rf"partition {part}: .*-partition-{part}"):
                producer.send_batch(bad)
            producer.send_batch(table, first_sequence_id=10)
            with pytest.raises(ClientError, match="ids must increase"):
                producer.send_batch(table, first_sequence_id=10)
        rows = _rows(client, topic_name)
    assert sorted(r["sequenceId"] for r in rows) == list(range(10, 60))


def test_tables_the_columnar_path_refuses_still_route_row_by_row(
    partitioned_broker, topic_name
) -> None:
    keys = [None if i % 4 == 0 else f"d{i % 9}" for i in range(200)]
    table = pa.table(
        {
            "value": [f"d{i}".encode() for i in range(200)],
            "key": pa.array(keys).dictionary_encode(),  # not a plain string column
        }
    )
    with PulsarClient(partitioned_broker.service_url) as client:
        with client.create_producer(topic_name, batch_max_messages=10) as producer:
            assert producer.send_batch(table) == 200
        rows = _rows(client, topic_name)
    expected = _scalar(keys, PARTITIONS, 10, 0)
    by_value = {r["value"]: r["partition"] for r in rows}
    assert len(rows) == 200
    assert [by_value[f"d{i}".encode()] for i in range(200)] == expected
    assert np.unique(expected).size == PARTITIONS
