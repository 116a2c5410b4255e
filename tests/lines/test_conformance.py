"""The conformance set: what users do with the connector, on every Pulsar line they run.

Each test runs once per line of ``apache_line`` (:mod:`tests.support.plugin`): Apache
Pulsar 2.10.1, 3.3.6 and 4.0.8 from their official distributions and 4.2.4 assembled from
Maven Central, each a plain standalone. The set covers batch writes and reads through
Spark and through :class:`PulsarClient` (keys, properties, event times), a typed AVRO
topic, a stream restarted from its checkpoint, a pushed-down publish-time window, a
partitioned topic that grows, compacted reads, chunked messages and, on each line's broker
with transactions on (``apache_line_txn``), an exactly-once write. Nothing is skipped per
line: what a line does differently is asserted (:data:`KEEPS_KEYLESS`), and what fails on
a line is a strict xfail naming the error (:data:`MARKER_IS_LAST_ID`), so a fix shows as
XPASS and fails the run until it is removed. (Pulsar 4.2's compactor keeps every item of a
partly compacted batch in its payload, the dropped ones flagged ``compacted_out``; the
compacted-reads test holds it to the same result as the other lines.)

The file is in :data:`tests.support.ordering.TOGETHER`: one xdist worker runs it, so each
line's broker starts once (pytest groups the tests by line and stops a line's broker
before it starts the next).
"""

from __future__ import annotations

import datetime as dt
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.errors import OperationTimeout
from pulsar_spark.spark import SPARK_SCHEMA
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.read_schema import plan_for
from pulsar_spark.spark.reader import PulsarFilteringReader
from tests.client.test_compacted_reads import compact
from tests.support.apache import ApachePulsar
from tests.support.official import official_client, produce, read_all
from tests.support.spark import assert_same_rows, available_now_values

UTC = dt.timezone.utc
PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
MIB = 1024 * 1024

WRITE_SCHEMA = T.StructType([
    T.StructField("key", T.StringType()),
    T.StructField("value", T.BinaryType()),
    T.StructField("properties", T.MapType(T.StringType(), T.StringType())),
    T.StructField("eventTime", T.TimestampType()),
])  # fmt: skip


def _rows(n: int) -> list[tuple[Any, ...]]:
    """Rows that vary what they carry: a key on 4 of 5, properties on 2 of 3 (one
    non-ASCII), an event time on every other one."""
    return [
        (
            f"k{i % 7}" if i % 5 else None,
            f"payload-{i}".encode(),
            {"i": str(i), "ü": "ñ"} if i % 3 else {},
            dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=i) if i % 2 else None,
        )
        for i in range(n)
    ]


def _read(spark: SparkSession, url: str, **options: str) -> Any:
    return spark.read.format("pulsar").option("service.url", url).options(**options).load()


def _values(df: Any) -> list[str]:
    return sorted(r.value for r in df.selectExpr("cast(value as string) value").collect())


def test_the_broker_is_the_line_it_says(apache_line: ApachePulsar) -> None:
    assert apache_line.version in (apache_line.server_version or ""), apache_line.server_version


# -- batch write and read --------------------------------------------------------------


def test_spark_writes_and_reads_keys_properties_and_event_times(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    url = apache_line.service_url
    df = spark.createDataFrame(_rows(60), WRITE_SCHEMA).repartition(2)
    df.write.format("pulsar").option("service.url", url).option("topic", topic_name).mode(
        "append"
    ).save()
    back = _read(spark, url, topic=topic_name)
    expected = df.selectExpr("cast(key as binary) key", "value", "properties", "eventTime")
    assert_same_rows(back.select("key", "value", "properties", "eventTime"), expected)
    # The official client reads the same keys, properties and event times.
    official = read_all(url, topic_name, at_least=60)
    got = sorted((m["value"], m["key"], m["properties"], m["event_time"]) for m in official)
    want = sorted(
        (
            value,
            key,
            props,
            None if when is None else int(when.timestamp() * 1000),
        )
        for key, value, props, when in _rows(60)
    )
    assert got == want


def test_the_client_writes_and_reads_keys_properties_and_event_times(
    apache_line: ApachePulsar, topic_name: str
) -> None:
    url = apache_line.service_url
    sent = [
        (f"v{i}".encode(), f"k{i % 3}" if i % 4 else None, {"n": str(i)} if i % 2 else None,
         1_700_000_000_000 + i if i % 3 else None)
        for i in range(40)
    ]  # fmt: skip
    with PulsarClient(url) as client:
        with client.create_producer(topic_name, batch_max_messages=8) as producer:
            for value, key, props, when in sent:
                producer.send(value, key=key, properties=props, event_time=when)
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    got = [
        (
            r["value"],
            None if r["key"] is None else bytes(r["key"]).decode(),
            dict(r["properties"]) or None,
            None if r["eventTime"] is None else int(r["eventTime"].timestamp() * 1000),
        )
        for r in rows
    ]
    assert got == sent
    official = read_all(url, topic_name, at_least=40)
    assert [(m["value"], m["key"], m["event_time"]) for m in official] == [
        (v, k, t) for v, k, _, t in sent
    ]


# -- a typed topic ---------------------------------------------------------------------


def test_an_avro_topic_reads_as_typed_columns(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    from pulsar.schema import AvroSchema, Integer, Record, String

    class Order(Record):
        id = Integer()
        note = String()

    url = apache_line.service_url
    with official_client(url) as client:
        producer = client.create_producer(topic_name, schema=AvroSchema(Order))
        for i in range(5):
            producer.send(Order(id=i, note=None if i == 2 else f"n{i}"))
        producer.close()
    df = _read(spark, url, topic=topic_name)
    value = df.schema["value"].dataType
    assert isinstance(value, T.StructType), df.schema
    assert value["id"].dataType == T.IntegerType()
    assert value["note"].dataType == T.StringType()
    got = sorted(tuple(r) for r in df.select("value.id", "value.note").collect())
    assert got == [(i, None if i == 2 else f"n{i}") for i in range(5)]


# -- streaming -------------------------------------------------------------------------


def test_a_stream_restarted_from_its_checkpoint_reads_each_message_once(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str, tmp_path: Path
) -> None:
    url = apache_line.service_url
    options = {"service.url": url, "topic": topic_name, "startingOffsets": "earliest"}
    produce(url, topic_name, [f"a{i}" for i in range(10)])
    first = available_now_values(spark, options, tmp_path / "checkpoint")
    produce(url, topic_name, [f"b{i}" for i in range(7)], batching=False)
    second = available_now_values(spark, options, tmp_path / "checkpoint")
    third = available_now_values(spark, options, tmp_path / "checkpoint")
    assert sorted(v for b in first for v in b) == sorted(f"a{i}" for i in range(10))
    assert sorted(v for b in second for v in b) == sorted(f"b{i}" for i in range(7))
    assert third == []


# -- pushdown of a publish-time window -------------------------------------------------


def _micros(when: dt.datetime) -> int:
    return (when - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)


def test_a_publish_time_window_is_pushed_down_and_reads_only_the_window(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    """Three rounds a few ms apart, one producer at a time: the window's bounds are the
    second round's first and the third round's first publish time. The planned ranges (the
    broker's seek by time) hold exactly the second round; Spark's result is the same."""
    from pyspark.sql.datasource import GreaterThanOrEqual, LessThan

    url = apache_line.service_url
    for r in range(3):
        produce(url, topic_name, [f"r{r}-{i}" for i in range(5)], batching=False)
        time.sleep(0.02)
    with PulsarClient(url) as client:
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    times = [r["publishTime"] for r in rows]
    assert times == sorted(times)
    low, high = times[5], times[10]
    expected = sorted(bytes(r["value"]).decode() for r in rows[5:10])
    # The reader Spark plans with: the filters narrow what it reads.
    options = parse_options({"service.url": url, "topic": topic_name})
    reader = PulsarFilteringReader(options, plan_for(options), SPARK_SCHEMA)
    rest = list(reader.pushFilters([
        GreaterThanOrEqual(("publishTime",), low), LessThan(("publishTime",), high),
    ]))  # fmt: skip
    assert len(rest) == 2  # publish times are still checked by Spark
    narrow = reader.narrowing
    assert narrow is not None
    assert (narrow.from_ms, narrow.until_ms) == (
        _micros(low) // 1000,
        _micros(high) // 1000,
    )
    read: list[str] = []
    for part in reader.partitions():
        batches = list(reader.read(part))
        if batches:
            values = pa.Table.from_batches(batches).column("value").to_pylist()
            read += [bytes(v).decode() for v in values]
    assert sorted(read) == expected
    # Through Spark, with the setting on and pushFilters=true (Spark 4.1 to 4.3).
    spark.conf.set(PUSHDOWN, "true")
    try:
        df = _read(spark, url, topic=topic_name, pushFilters="true")
        window = df.where((F.col("publishTime") >= F.lit(low)) & (F.col("publishTime") < high))
        assert _values(window) == expected
    finally:
        spark.conf.unset(PUSHDOWN)


# -- a partitioned topic that grows ----------------------------------------------------


def test_a_partitioned_topic_that_grows_is_read_whole_by_batch_and_stream(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str, tmp_path: Path
) -> None:
    url, admin = apache_line.service_url, apache_line.admin
    admin.create_partitioned_topic(topic_name, 2)
    options = {"service.url": url, "topic": topic_name, "startingOffsets": "earliest"}
    before = [{"key": f"k{i}", "value": f"before-{i}"} for i in range(12)]
    produce(url, topic_name, before, batching=False)
    first = available_now_values(spark, options, tmp_path / "checkpoint")
    admin.update_partitions(topic_name, 4)
    assert admin.partitions(topic_name) == 4
    after = [f"after-{p}" for p in (2, 3)]
    for p, value in zip((2, 3), after, strict=True):
        produce(url, f"{topic_name}-partition-{p}", [value], batching=False)
    produce(url, topic_name, [{"key": f"k{i}", "value": f"more-{i}"} for i in range(8)])
    more = [f"more-{i}" for i in range(8)]
    second = available_now_values(spark, options, tmp_path / "checkpoint")
    assert sorted(v for b in first for v in b) == sorted(m["value"] for m in before)
    assert sorted(v for b in second for v in b) == sorted(after + more)
    batch = _read(spark, url, topic=topic_name)
    assert _values(batch) == sorted([m["value"] for m in before] + after + more)
    assert {r.partition for r in batch.select("partition").distinct().collect()} == {0, 1, 2, 3}


# -- compacted reads -------------------------------------------------------------------

#: Lines whose compaction keeps messages without a key in the compacted view. Pulsar 3.1
#: made compaction drop them (``topicCompactionRetainNullKey``, default false); 2.10's
#: ``ServiceConfiguration`` has no such key and its compactor keeps them.
KEEPS_KEYLESS = frozenset({"2.10"})


def test_compacted_reads_give_the_latest_value_per_key(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str, request: Any
) -> None:
    url = apache_line.service_url
    history: list[Any] = [
        {"key": f"k{k}", "value": f"k{k}-v{r}"} for r in range(3) for k in range(4)
    ]
    produce(url, topic_name, [*history, b"no-key"], batching=True, batching_max_messages=5)
    compact(apache_line.admin, topic_name)
    produce(url, topic_name, [{"key": "k0", "value": "k0-after"}], batching=False)
    keyless = apache_line.line in KEEPS_KEYLESS
    with PulsarClient(url, read_compacted=True) as client:
        keys = [None if k is None else bytes(k).decode() for b in client.read_batches(topic_name)
                for k in b.column("key").to_pylist()]  # fmt: skip
    assert keys == ["k0", "k1", "k2", "k3", *([None] if keyless else []), "k0"]
    compacted = _read(spark, url, topic=topic_name, readCompacted="true")
    latest = [*(f"k{k}-v2" for k in range(4)), *(["no-key"] if keyless else []), "k0-after"]
    assert _values(compacted) == sorted(latest)
    assert len(_values(_read(spark, url, topic=topic_name))) == len(history) + 2


# -- chunked messages ------------------------------------------------------------------


def test_chunked_messages_are_read_whole(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    """Above the broker's 5 MiB maxMessageSize the official producer must chunk; our
    producer chunks too. Both are read whole, by the client and through Spark."""
    url = apache_line.service_url
    big = random.Random(1).randbytes(6 * MIB + 12345)
    produce(url, topic_name, [b"before", big], batching=False, chunking_enabled=True)
    ours = random.Random(2).randbytes(5 * MIB + 777)
    with PulsarClient(url) as client:
        with client.create_producer(topic_name, batching=False) as producer:
            producer.send(ours, key="ours")
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == [b"before", big, ours]
    assert apache_line.admin.internal_stats(topic_name)["numberOfEntries"] >= 3 + 2
    sizes = _read(spark, url, topic=topic_name).select(F.length("value").alias("n")).collect()
    assert sorted(r.n for r in sizes) == sorted([6, len(big), len(ours)])


# -- exactly-once writes through transactions ------------------------------------------


#: Lines whose GetLastMessageId answers the position of a transaction's commit marker
#: when that is a topic's last entry: the marker is never dispatched, so a read to the
#: latest message waits for it and fails (ours: ``OperationTimeout: reader on ... made no
#: progress ...; last failure: nothing dispatched for 10 s although the broker has messages
#: up to L:E``; the official Python client's ``has_message_available()`` stays true).
MARKER_IS_LAST_ID = frozenset({"2.10"})


def test_an_exactly_once_write_commits_every_row_once(
    spark: SparkSession, apache_line_txn: ApachePulsar, topic_name: str, request: Any
) -> None:
    """``deliveryGuarantee=exactly-once`` on a broker with transactions on (and no
    deduplication): a 2-partition topic gets each row once, committed."""
    if apache_line_txn.line in MARKER_IS_LAST_ID:
        request.applymarker(pytest.mark.xfail(
            raises=OperationTimeout, strict=True,
            reason=f"Pulsar {apache_line_txn.version} answers a commit marker as the last "
            "message id (MARKER_IS_LAST_ID)",
        ))  # fmt: skip
    url = apache_line_txn.service_url
    apache_line_txn.admin.create_partitioned_topic(topic_name, 2)
    sent = [f"row-{i:04d}" for i in range(300)]
    df = spark.createDataFrame(
        [(f"k{i % 7}", v) for i, v in enumerate(sent)], "key string, value string"
    )
    (
        df.repartition(2)
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .options(deliveryGuarantee="exactly-once", transactionTimeout="5m")
        .mode("append")
        .save()
    )
    with PulsarClient(url, operation_timeout=10) as client:
        got = [bytes(v).decode() for b in client.read_batches(topic_name)
               for v in b.column("value").to_pylist()]  # fmt: skip
    assert sorted(got) == sent
    official = read_all(url, topic_name, at_least=len(sent))
    assert sorted(m["value"].decode() for m in official) == sent
