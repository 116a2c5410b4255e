"""StreamNative pulsar-spark's ``PulsarSinkSuite`` (release 3.4.1.3), translated: the write
columns are ``key``, ``value``, ``topic``, ``properties``, ``eventTime`` (theirs ``__key``,
``__topic``, ``__eventTime``: see the report); a typed ``value`` is written with its schema (a
struct as AVRO). Two things their tests do cannot be done by a Python data source, and the
documented recipe is tested instead: ``.save()`` without a mode (Spark's default
``ErrorIfExists`` is refused for Python sinks: write ``.mode("append")``) and
``outputMode("update")`` into the sink (Spark takes only append for Python stream sinks: use
``foreachBatch`` with a batch write).
"""

from __future__ import annotations

import datetime as dt

import pytest

from tests.spark.peers.support import send
from tests.support.official import read_all


def _writer(df, url: str, **options: str):
    return df.write.format("pulsar").option("service.url", url).options(**options)


def _strings(read_pulsar, url: str, topic: str) -> list[str]:
    df = read_pulsar(url, topic=topic).selectExpr("CAST(value AS STRING) v")
    return sorted(r.v for r in df.collect())


def test_batch_write_to_pulsar_needs_append_mode(spark, pulsar_lite, topic_name, read_pulsar):
    """StreamNative PulsarSinkSuite: 'batch - write to pulsar' (their ``.save()`` takes
    Spark's default mode, which Spark refuses for a Python sink: the recipe is
    ``.mode("append")``)."""
    url = pulsar_lite.service_url
    df = spark.createDataFrame([(v, v) for v in "12345"], "key string, value string")
    with pytest.raises(Exception, match="ErrorIfExists"):
        _writer(df, url, topic=topic_name).save()
    _writer(df, url, topic=topic_name).mode("append").save()
    assert _strings(read_pulsar, url, topic_name) == list("12345")


TYPED = [
    ("boolean", [True, False]),
    ("tinyint", [1, -2, 127]),
    ("float", [1.5, -0.25]),
    ("date", [dt.date(2026, 2, 28), dt.date(1999, 12, 31)]),
    ("timestamp", [dt.datetime(2026, 1, 1, 8, 0, 1)]),
]


@pytest.mark.parametrize(("spark_type", "values"), TYPED, ids=[t for t, _ in TYPED])
def test_batch_typed_values(spark, apache_pulsar, topic_name, read_pulsar, spark_type, values):
    """StreamNative PulsarSinkSuite: 'batch - boolean', 'batch - byte', 'batch - float',
    'batch - date', 'batch - timestamp': the value is written with its schema and read back
    as the same type (theirs compare the values as text)."""
    url = apache_pulsar.service_url
    df = spark.createDataFrame([(v,) for v in values], f"value {spark_type}")
    _writer(df, url, topic=topic_name).mode("append").save()
    back = read_pulsar(url, topic=topic_name).select("value")
    assert back.schema["value"].dataType == df.schema["value"].dataType
    assert sorted(r.value for r in back.collect()) == sorted(values)


def test_batch_struct_types(spark, apache_pulsar, topic_name, read_pulsar) -> None:
    """StreamNative PulsarSinkSuite: 'batch - struct types': a struct value is written as an
    AVRO record and read back field by field (theirs: every column into the record; here
    ``struct(...)`` names the value)."""
    url = apache_pulsar.service_url
    rows = [(1, 1.5, (True, "a")), (2, -0.5, (False, "b"))]
    df = spark.createDataFrame(rows, "i int, f float, bar struct<b: boolean, s: string>")
    value = df.selectExpr("struct(i, f, bar) AS value")
    _writer(value, url, topic=topic_name).mode("append").save()
    back = read_pulsar(url, topic=topic_name).select("value.*")
    assert sorted(tuple(r) for r in back.collect()) == sorted(
        (i, f, (b, s)) for i, f, (b, s) in rows
    )


def test_batch_producer_conf_keys_are_taken(spark, pulsar_lite, topic_name, read_pulsar):
    """StreamNative PulsarSinkSuite: 'batch - write to pulsar with producer conf case
    sensitive': the Java producer's keys are taken (those with no effect here with a
    warning)."""
    url = pulsar_lite.service_url
    df = spark.createDataFrame([(v, v) for v in "12345"], "key string, value string")
    _writer(
        df,
        url,
        topic=topic_name,
        **{
            "pulsar.producer.blockIfQueueFull": "true",
            "pulsar.producer.maxPendingMessages": "100000",
            "pulsar.producer.maxPendingMessagesAcrossPartitions": "5000000",
            "pulsar.producer.sendTimeoutMs": "30000",
        },
    ).mode("append").save()
    assert _strings(read_pulsar, url, topic_name) == list("12345")


# -- streaming ----------------------------------------------------------------------------------


def _source(spark, url: str, topic: str):
    return (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )


def _ended(query):
    query.awaitTermination(120)
    assert not query.isActive
    return query


def test_streaming_aggregation_in_update_mode_through_foreach_batch(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    """StreamNative PulsarSinkSuite: 'streaming - write aggregation w/o topic field, with
    topic option' and 'streaming - aggregation with topic field and topic option' (the option
    wins): ``outputMode("update")`` into the sink is refused by Spark for a Python sink; the
    recipe, ``foreachBatch`` writing each micro-batch's updated counts, gives their answer."""
    url = pulsar_lite.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    counts = (
        _source(spark, url, source)
        .selectExpr("CAST(value AS STRING) value")
        .groupBy("value")
        .count()
        .selectExpr("'foo' AS topic", "value AS key", "CAST(count AS STRING) AS value")
    )
    with pytest.raises(Exception, match=r"(?i)update|append"):
        refused = (
            counts.writeStream.format("pulsar")
            .outputMode("update")
            .option("service.url", url)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / "refused"))
            .start()
        )
        _ended(refused)
        msg = f"the query ran: {refused.exception()}"
        raise AssertionError(msg)

    def write(frame, _batch_id: int) -> None:
        frame.write.format("pulsar").option("service.url", url).option("topic", target).mode(
            "append"
        ).save()

    def run() -> None:
        query = (
            counts.writeStream.outputMode("update")
            .foreachBatch(write)
            .option("checkpointLocation", str(tmp_path / "c"))
            .trigger(availableNow=True)
            .start()
        )
        assert _ended(query).exception() is None, query.exception()

    send(url, source, [1, 2, 2, 3, 3, 3])
    run()
    send(url, source, [1, 2, 3])
    run()
    got = sorted((m["key"], m["value"].decode()) for m in read_all(url, target, at_least=6))
    assert got == sorted([("1", "1"), ("2", "2"), ("3", "3"), ("1", "2"), ("2", "3"), ("3", "4")])


def test_streaming_write_struct_and_producer_conf(
    spark, apache_pulsar, topic_name, tmp_path, read_pulsar
) -> None:
    """StreamNative PulsarSinkSuite: 'streaming - write struct type' and 'streaming - write
    to pulsar with producer case sensitive conf': a struct value streamed as AVRO, with the
    Java producer's keys."""
    url = apache_pulsar.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    send(url, source, range(3))
    query = (
        _source(spark, url, source)
        .selectExpr(
            "struct(CAST(CAST(value AS STRING) AS INT) AS i, "
            "CAST(CAST(value AS STRING) AS FLOAT) + 0.5 AS f) AS value"
        )
        .writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", target)
        .option("pulsar.producer.blockIfQueueFull", "true")
        .option("pulsar.producer.maxPendingMessagesAcrossPartitions", "5000000")
        .option("pulsar.producer.sendTimeoutMs", "30000")
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    assert _ended(query).exception() is None, query.exception()
    back = read_pulsar(url, topic=target).select("value.*")
    assert sorted(tuple(r) for r in back.collect()) == [(i, i + 0.5) for i in range(3)]


@pytest.mark.parametrize(
    ("select", "message"),
    [
        (["CAST(value AS STRING) AS key"], "needs a 'value' column"),
        (["CAST(1 AS INT) AS key", "value"], "'key'"),
        (["value", "CAST(value AS STRING) AS eventTime"], "'eventTime'"),
    ],
    ids=["no-value", "int-key", "string-event-time"],
)
def test_streaming_write_with_bad_schema_or_wrong_types(
    spark, pulsar_lite, topic_name, tmp_path, select, message
) -> None:
    """StreamNative PulsarSinkSuite: 'streaming - write data with bad schema' (no value) and
    'streaming - write data with valid schema but wrong types' (a key that is not text or
    bytes, an event time that is not a timestamp)."""
    url = pulsar_lite.service_url
    send(url, topic_name, [1])
    with pytest.raises(Exception, match=message):
        query = (
            _source(spark, url, topic_name)
            .selectExpr(*select)
            .writeStream.format("pulsar")
            .option("service.url", url)
            .option("topic", f"{topic_name}-out")
            .option("checkpointLocation", str(tmp_path / "c"))
            .trigger(availableNow=True)
            .start()
        )
        _ended(query)
        msg = f"the query ran: {query.exception()}"
        raise AssertionError(msg)
