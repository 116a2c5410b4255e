"""The conformance set: what users do with the connector, on every Pulsar line they run.

Each test runs once per line of ``apache_line`` (:mod:`tests.support.plugin`): Apache
Pulsar 2.10.1, 3.3.6 and 4.0.8 from their official distributions and 4.2.4 assembled from
Maven Central, each one standalone of the ``line`` variant (transactions on; tokens
checked beside anonymous access; ledgers of 20 entries and a namespace with the stock
retention). The set covers batch writes and reads through Spark and through
:class:`PulsarClient` (keys, properties, event times), typed AVRO and PROTOBUF_NATIVE
topics (the latter from the line's own Java client), a stream restarted from its
checkpoint, a durable stream on the stock retention, a pushed-down publish-time window, a
partitioned topic that grows, compacted reads, chunked messages, end-to-end encryption
both ways with the line's Java client, token authentication and an exactly-once write.

Nothing is skipped per line: what a line does differently is asserted
(:data:`KEEPS_KEYLESS`), and what a line lacks fails with the error a user gets
(:data:`MARKER_IS_LAST_ID`: ``BrokerUnsupported`` naming the broker's release). Pulsar
4.2's compactor keeps every item of a partly compacted batch in its payload, the dropped
ones flagged ``compacted_out``; the compacted-reads test holds it to the same result as
the other lines.

The file is in :data:`tests.support.ordering.TOGETHER`: one xdist worker runs it, so each
line's broker starts once (pytest groups the tests by line and stops a line's broker
before it starts the next).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from cryptography.hazmat.primitives import serialization
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.errors import BrokerUnsupported
from pulsar_spark.spark import SPARK_SCHEMA
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.read_schema import plan_for
from pulsar_spark.spark.reader import PulsarFilteringReader
from tests.client.test_compacted_reads import compact
from tests.support.apache import STOCK_NAMESPACE, ApachePulsar, make_token
from tests.support.java_client import java_produce_protobuf_native
from tests.support.java_crypto import java_consume_decrypted, java_produce_encrypted_many
from tests.support.keys import KeyPair
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


# -- PROTOBUF_NATIVE from the line's Java client ---------------------------------------


def test_a_protobuf_native_topic_of_the_lines_java_client_reads_as_typed_columns(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    """The line's own Java client registers the descriptor (its layout of the SchemaInfo)
    and sends DynamicMessages; Spark reads typed columns."""
    assert apache_line.home is not None
    url = apache_line.service_url
    orders = [
        {"id": "1", "name": "one", "tags": [1, -2], "item": {"sku": "s", "qty": 3}},
        {"id": "-5", "name": "é", "status": "DONE", "ok": True},
    ]
    java_produce_protobuf_native(url, topic_name, orders, jars=apache_line.home / "lib")
    df = _read(spark, url, topic=topic_name)
    value = df.schema["value"].dataType
    assert isinstance(value, T.StructType), df.schema
    assert [f.name for f in value.fields][:5] == ["id", "name", "score", "tags", "item"]
    got = sorted(
        (r.id, r.name, list(r.tags), r.sku, r.status, r.ok)
        for r in df.select("value.*", "value.item.sku").collect()
    )
    assert got == [(-5, "é", [], None, "DONE", True), (1, "one", [1, -2], "s", "NEW", False)]


# -- end-to-end encryption with the line's Java client ---------------------------------


def test_encryption_interoperates_with_the_lines_java_client_both_ways(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str, tmp_path: Path
) -> None:
    """The line's Java client encrypts (RSA, batched and LZ4) and Spark decrypts; Spark
    encrypts and the line's Java consumer decrypts."""
    assert apache_line.home is not None
    jars = apache_line.home / "lib"
    url = apache_line.service_url
    # "RSA PRIVATE KEY" (PKCS#1): the Java client of 2.10 reads no PKCS#8 private key.
    pair = KeyPair(tmp_path, "line", private_format=serialization.PrivateFormat.TraditionalOpenSSL)
    sent = [{"value": f"java-{i}".encode(), "key": f"k{i % 3}"} for i in range(30)]
    java_produce_encrypted_many(
        url,
        [{"topic": topic_name, "values": sent, "public_keys": {"line.key": pair.pub_url},
          "compression": "LZ4"}],
        jars=jars,
    )  # fmt: skip
    private = json.dumps({"line.key": pair.priv_data})
    read = _read(spark, url, topic=topic_name, privateKey=private)
    assert sorted((bytes(r.key), bytes(r.value)) for r in read.collect()) == sorted(
        (m["key"].encode(), m["value"]) for m in sent
    )
    ours = f"{topic_name}-spark"
    values = [f"spark-{i}" for i in range(20)]
    (
        spark.createDataFrame([(v,) for v in values], "value string")
        .coalesce(1)
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", ours)
        .options(encryptionKeys="line.key", publicKey=pair.pub_url)
        .mode("append")
        .save()
    )
    decrypted = java_consume_decrypted(url, ours, len(values), pair.priv_url, jars=jars)
    assert sorted(v.decode() for v, _ in decrypted) == sorted(values)
    assert all(keys == ["line.key"] for _, keys in decrypted)


# -- token authentication --------------------------------------------------------------


def test_a_token_the_broker_checks_reads_and_writes_and_a_forged_one_is_refused(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    """The line's broker checks every token it is given (clients without one come in
    anonymously): a token signed with its key writes and reads; one signed with another
    key fails at once with the broker's AuthenticationError, its text nowhere in it."""
    url = apache_line.service_url
    auth = {
        "pulsar.client.authPluginClassName": (
            "org.apache.pulsar.client.impl.auth.AuthenticationToken"
        ),
        "pulsar.client.authParams": f"token:{apache_line.signed_token('writer')}",
    }
    values = [f"t{i}" for i in range(25)]
    (
        spark.createDataFrame([(v,) for v in values], "value string")
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .options(**auth)
        .mode("append")
        .save()
    )
    assert _values(_read(spark, url, topic=topic_name, **auth)) == sorted(values)
    forged = make_token(b"not the broker's key" * 2, "writer")
    with pytest.raises(Exception, match="AuthenticationError") as failed:
        _read(
            spark, url, topic=topic_name,
            **{**auth, "pulsar.client.authParams": f"token:{forged}"},
        ).count()  # fmt: skip
    assert forged not in str(failed.value)
    assert forged.rsplit(".", 1)[1] not in str(failed.value)


# -- a stream on the stock retention ---------------------------------------------------


def _ledger_ids(broker: ApachePulsar, partition: str) -> list[int]:
    return [int(x["ledgerId"]) for x in broker.admin.internal_stats(partition)["ledgers"]]


def test_a_durable_stream_on_the_stock_retention_finds_everything_after_a_stop(
    spark: SparkSession, apache_line: ApachePulsar, tmp_path: Path
) -> None:
    """In the namespace with the stock retention (none), ledgers of 20 entries, checked
    every second: the stream (a durable subscription) reads 100 messages; stopped, 200 more
    are written and left for several retention checks; restarted from its checkpoint, it
    reads exactly those 200. Then the broker deletes the ledgers the subscription no longer
    needs: nothing but the subscription kept them."""
    topic = f"persistent://{STOCK_NAMESPACE}/conformance-{random.randrange(1 << 40):x}"
    apache_line.admin.create_partitioned_topic(topic, 2)
    partitions = [f"{topic}-partition-{i}" for i in range(2)]
    url = apache_line.service_url
    options = {
        "service.url": url, "topic": topic, "startingOffsets": "earliest",
        "subscriptionMode": "durable",
    }  # fmt: skip
    checkpoint = tmp_path / "checkpoint"
    assert available_now_values(spark, options, checkpoint) == []  # planned before the data
    first = [f"a{i:03d}" for i in range(100)]
    produce(url, topic, first, batching=False)
    got_first = available_now_values(spark, options, checkpoint)
    first_ledgers = {p: _ledger_ids(apache_line, p)[0] for p in partitions}
    later = [f"b{i:03d}" for i in range(200)]
    produce(url, topic, later, batching=False)
    time.sleep(3)  # three retention checks
    got_later = available_now_values(spark, options, checkpoint)
    assert sorted(v for b in got_first for v in b) == first
    assert sorted(v for b in got_later for v in b) == later

    def trimmed() -> bool:
        return all(_ledger_ids(apache_line, p)[0] > first_ledgers[p] for p in partitions)

    deadline = time.monotonic() + 60
    while not trimmed():
        assert time.monotonic() < deadline, "the stock retention deleted no ledger in 60 s"
        time.sleep(0.5)


# -- exactly-once writes through transactions ------------------------------------------


#: Lines whose GetLastMessageId answers the position of a transaction's commit marker
#: when that is a topic's last entry: the marker is never dispatched, so no read up to the
#: latest message sees its end (the official Python client's ``has_message_available()``
#: stays true). Ours knows the releases (``Capabilities.last_id_may_be_marker``) and fails
#: with ``BrokerUnsupported`` naming the broker's release and the marker.
MARKER_IS_LAST_ID = frozenset({"2.10"})


def _write_exactly_once(spark: SparkSession, url: str, topic: str, rows: list[str]) -> None:
    df = spark.createDataFrame(
        [(f"k{i % 7}", v) for i, v in enumerate(rows)], "key string, value string"
    )
    (
        df.repartition(2)
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", topic)
        .options(deliveryGuarantee="exactly-once", transactionTimeout="5m")
        .mode("append")
        .save()
    )


def _read_values(url: str, topic: str) -> list[str]:
    with PulsarClient(url, operation_timeout=10) as client:
        return sorted(bytes(v).decode() for b in client.read_batches(topic)
                      for v in b.column("value").to_pylist())  # fmt: skip


def test_an_exactly_once_write_commits_every_row_once(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    """``deliveryGuarantee=exactly-once`` on a broker with transactions on (and no
    deduplication): a 2-partition topic gets each row once, committed, as the official
    client and ours read it (on a :data:`MARKER_IS_LAST_ID` line, ours reads it whole or
    says the broker answered a marker: which one depends on where the ledgers rolled)."""
    url = apache_line.service_url
    apache_line.admin.create_partitioned_topic(topic_name, 2)
    sent = [f"row-{i:04d}" for i in range(300)]
    _write_exactly_once(spark, url, topic_name, sent)
    official = read_all(url, topic_name, at_least=len(sent))
    assert sorted(m["value"].decode() for m in official) == sent
    try:
        assert _read_values(url, topic_name) == sent
    except BrokerUnsupported:
        if apache_line.line not in MARKER_IS_LAST_ID:
            raise


def test_a_topic_ending_in_a_commit_marker_reads_whole_or_names_the_broker(
    spark: SparkSession, apache_line: ApachePulsar, topic_name: str
) -> None:
    """A topic of one partition whose last entry is a transaction's commit marker: read up
    to its latest message, it gives every row; on a :data:`MARKER_IS_LAST_ID` line it
    fails with ``BrokerUnsupported`` naming the broker's release and the marker."""
    url = apache_line.service_url
    sent = [f"row-{i}" for i in range(5)]
    _write_exactly_once(spark, url, topic_name, sent)
    if apache_line.line in MARKER_IS_LAST_ID:
        pattern = re.escape(f"{apache_line.version}) answers") + ".*marker"
        with pytest.raises(BrokerUnsupported, match=pattern):
            _read_values(url, topic_name)
    else:
        assert _read_values(url, topic_name) == sent
