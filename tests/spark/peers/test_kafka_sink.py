"""Spark's ``KafkaSinkSuite``, translated to Pulsar: ``df.write`` / ``df.writeStream`` with
``format("pulsar")``; Kafka's ``headers`` are the ``properties`` map; the stream's input,
Spark's ``MemoryStream`` there, is a Pulsar topic here (pyspark has no memory stream), run with
``Trigger.AvailableNow``. Where the sink differs on purpose (no ``partition`` column; typed
values; topics created on first write), the test asserts ours and says so.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.spark.peers.support import error_text, send
from tests.support.official import read_all


def _write(df, url: str, **options: str) -> None:
    df.write.format("pulsar").option("service.url", url).options(**options).mode("append").save()


def _values(url: str, topic: str, at_least: int = 0) -> list[str]:
    return sorted(m["value"].decode() for m in read_all(url, topic, at_least=at_least))


def test_batch_write_with_properties(spark, pulsar_lite, topic_name, read_pulsar) -> None:
    """Spark KafkaSinkSuite: 'batch - write to kafka' (headers: properties, a null map is no
    property)."""
    url = pulsar_lite.service_url
    rows = [
        (topic_name, "1", {"a": "b"}),
        (topic_name, "2", {"c": "d", "e": "f"}),
        (topic_name, "3", {"g": "h"}),
        (topic_name, "4", None),
        (topic_name, "5", {"j": "k", "m": "n"}),
    ]
    df = spark.createDataFrame(rows, "topic string, value string, properties map<string,string>")
    _write(df.coalesce(1), url, topic=topic_name)
    got = read_pulsar(url, topic=topic_name).selectExpr("CAST(value AS STRING) v", "properties")
    assert {r.v: r.properties for r in got.collect()} == {
        "1": {"a": "b"},
        "2": {"c": "d", "e": "f"},
        "3": {"g": "h"},
        "4": {},
        "5": {"j": "k", "m": "n"},
    }


def test_batch_a_partition_column_is_refused(spark, pulsar_lite, topic_name) -> None:
    """Spark KafkaSinkSuite: 'batch - partition column and partitioner priorities': Pulsar
    routes by key (the Java client's hash) or round robin; a ``partition`` column is refused,
    naming the columns the sink takes."""
    df = spark.createDataFrame([("k", "v", 2)], "key string, value string, partition int")
    with pytest.raises(Exception, match=r"cannot write column\(s\) \['partition'\]"):
        _write(df, pulsar_lite.service_url, topic=topic_name)


def test_batch_null_topic_field_and_no_topic_option(spark, pulsar_lite) -> None:
    """Spark KafkaSinkSuite: 'batch - null topic field value, and no topic option'."""
    df = spark.createDataFrame([(None, "1")], "topic string, value string")
    with pytest.raises(Exception, match="topic") as failure:
        _write(df, pulsar_lite.service_url)
    assert "null" in error_text(failure.value).lower(), error_text(failure.value)


@pytest.mark.parametrize("mode", ["ignore", "overwrite"])
def test_batch_unsupported_save_modes(spark, pulsar_lite, topic_name, mode) -> None:
    """Spark KafkaSinkSuite: 'batch - unsupported save modes'."""
    df = spark.createDataFrame([(topic_name, "1")], "topic string, value string")
    writer = df.write.format("pulsar").option("service.url", pulsar_lite.service_url)
    with pytest.raises(Exception, match=r"(?i)append|ignore"):
        writer.mode(mode).save()


def test_batch_enforce_analyzed_plans(spark, pulsar_lite, topic_name) -> None:
    """Spark KafkaSinkSuite: 'SPARK-20496: batch - enforce analyzed plans'."""
    url = pulsar_lite.service_url
    events = spark.range(1, 1000).select(F.to_json(F.struct("*")).alias("value"))
    _write(events, url, topic=topic_name)
    assert len(_values(url, topic_name, 999)) == 999


# -- streaming ----------------------------------------------------------------------------------


def _copy(spark, url: str, source: str, tmp_path, select: list[str], **sink: str):
    """Stream ``source`` (from earliest, AvailableNow) through ``select`` into the pulsar
    sink with ``sink`` options; the query, ended."""
    query = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr(*select)
        .writeStream.format("pulsar")
        .option("service.url", url)
        .options(**sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    return query


def test_streaming_write_with_topic_field(spark, pulsar_lite, topic_name, tmp_path) -> None:
    """Spark KafkaSinkSuite: 'streaming - write to kafka with topic field' (two rounds of
    input on one checkpoint), and 'streaming - sink progress is produced'."""
    url = pulsar_lite.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    select = [f"'{target}' AS topic", "CAST(value AS STRING) value"]
    send(url, source, range(1, 6))
    query = _copy(spark, url, source, tmp_path, select)
    assert query.exception() is None, query.exception()
    assert _values(url, target, 5) == sorted(map(str, range(1, 6)))
    assert sum(p.sink.numOutputRows for p in query.recentProgress) in (
        5,
        -len(query.recentProgress),
    )
    send(url, source, range(6, 11))
    query = _copy(spark, url, source, tmp_path, select)
    assert query.exception() is None, query.exception()
    assert _values(url, target, 10) == sorted(map(str, range(1, 11)))


def test_streaming_write_with_topic_option(spark, pulsar_lite, topic_name, tmp_path) -> None:
    """Spark KafkaSinkSuite: 'streaming - write w/o topic field, with topic option' and
    'streaming - topic field and topic option' (the option wins)."""
    url = pulsar_lite.service_url
    source, target, other = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-foo"
    send(url, source, range(1, 6))
    select = [f"'{other}' AS topic", "CAST(value AS STRING) value"]
    query = _copy(spark, url, source, tmp_path, select, topic=target)
    assert query.exception() is None, query.exception()
    assert _values(url, target, 5) == sorted(map(str, range(1, 6)))
    assert _values(url, other) == []


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (["CAST(value AS STRING) AS key", "value"], "topic"),
        (["'t' AS topic", "CAST(value AS STRING) AS key"], "needs a 'value' column"),
        (["CAST(1 AS INT) AS topic", "value"], "'topic'"),
        (["'t' AS topic", "CAST(1 AS INT) AS key", "value"], "'key'"),
        (["'t' AS topic", "value", "1 AS partition"], r"cannot write column\(s\) \['partition'\]"),
    ],
    ids=["no-topic", "no-value", "int-topic", "int-key", "partition"],
)
def test_streaming_write_with_bad_schema(
    spark, pulsar_lite, topic_name, tmp_path, select, message
) -> None:
    """Spark KafkaSinkSuite: 'streaming - write data with bad schema' and 'streaming - write
    data with valid schema but wrong types' (a typed ``value`` is no error here: it is written
    with its schema)."""
    url = pulsar_lite.service_url
    send(url, topic_name, [1])
    with pytest.raises(Exception, match=message):
        query = _copy(spark, url, topic_name, tmp_path, select)
        msg = f"the query ran: {query.exception()}"
        raise AssertionError(msg)


def test_streaming_write_to_a_new_topic_creates_it(spark, pulsar_lite, topic_name, tmp_path):
    """Spark KafkaSinkSuite: 'streaming - write to non-existing topic': Kafka's job aborts;
    Pulsar brokers create a topic on first write (auto-creation, the default)."""
    url = pulsar_lite.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-new"
    send(url, source, range(3))
    query = _copy(spark, url, source, tmp_path, ["value"], topic=target)
    assert query.exception() is None, query.exception()
    assert _values(url, target, 3) == ["0", "1", "2"]


def test_kafka_options_are_refused_naming_ours(spark, pulsar_lite, topic_name, tmp_path) -> None:
    """Spark KafkaSinkSuite: 'streaming - exception on config serializer': Kafka's own
    options are errors here, naming what to write instead."""
    url = pulsar_lite.service_url
    send(url, topic_name, [1])
    with pytest.raises(Exception, match=r"service\.url"):
        query = _copy(
            spark, url, topic_name, tmp_path, ["value"], topic=f"{topic_name}-out",
            **{"kafka.bootstrap.servers": "localhost:9092"},
        )  # fmt: skip
        msg = f"the query ran: {query.exception()}"
        raise AssertionError(msg)
