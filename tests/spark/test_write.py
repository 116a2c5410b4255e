"""df.write.format("pulsar") against pulsar-lite: round trips, routing, errors."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from pyspark.sql import Row
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from tests.support.official import read_all
from tests.support.spark import assert_same_rows

WRITE_SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("properties", MapType(StringType(), StringType())),
        StructField("eventTime", TimestampType()),
    ]
)


def _rows(n: int) -> list[tuple]:
    return [
        (
            f"k{i % 7}" if i % 5 else None,
            None if i == 4 else f"payload-{i}".encode() if i != 3 else b"",  # a tombstone
            {"i": str(i), "even": str(i % 2 == 0)} if i % 3 else {},
            dt.datetime(2026, 1, 1) + dt.timedelta(milliseconds=i) if i % 2 else None,
        )
        for i in range(n)
    ]


def _write(df, url: str, **options: str) -> None:
    writer = df.write.format("pulsar").option("service.url", url).mode("append")
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def test_round_trip(spark, read_pulsar, broker, topic_name) -> None:
    url = broker.service_url
    df = spark.createDataFrame(_rows(500), WRITE_SCHEMA).repartition(3)
    _write(df, url, topic=topic_name, producerNamePrefix="rt")
    back = read_pulsar(url, topic=topic_name)
    assert back.count() == 500
    expected = df.selectExpr("cast(key as binary) as key", "value", "properties", "eventTime")
    assert_same_rows(back.select("key", "value", "properties", "eventTime"), expected)
    names = {r.producerName for r in back.select("producerName").distinct().collect()}
    assert len(names) == 3
    assert all(re.fullmatch(r"rt-\d+-[012]-0", n) for n in names), names  # stage-task-attempt
    # The official client reads the same messages.
    official = read_all(url, topic_name)
    assert sorted(m["value"] for m in official) == sorted(r[1] or b"" for r in _rows(500))
    assert sorted((m["key"] for m in official), key=str) == sorted(
        (r[0] for r in _rows(500)), key=str
    )


def test_string_values_binary_keys_and_producer_options(
    spark, read_pulsar, pulsar_lite, topic_name
) -> None:
    url = pulsar_lite.service_url
    rows = [(f"value-{i}", bytes([i % 256, 0, 255])) for i in range(300)]
    df = spark.createDataFrame(rows, "value string, key binary")
    for codec, batching in (("LZ4", "true"), ("ZSTD", "false")):
        _write(
            df,
            url,
            topic=topic_name,
            compressionType=codec,
            **{
                "pulsar.producer.batchingEnabled": batching,
                "pulsar.producer.maxPendingMessages": "50",
                "sendTimeoutMs": "20000",
                "batchingMaxMessages": "64",
                "batchingMaxPublishDelayMicros": "2000",
            },
        )
    back = read_pulsar(url, topic=topic_name).selectExpr("cast(value as string) value", "key")
    assert_same_rows(back, df.union(df))


def test_topic_column_routes_rows(spark, read_pulsar, broker, partitioned_url, topic_name) -> None:
    url = broker.service_url
    a, b = f"{topic_name}-a", f"{topic_name}-b"
    rows = [Row(topic=a if i % 3 else b, value=f"v{i}", key=f"k{i}") for i in range(90)]
    df = spark.createDataFrame(rows)
    _write(df, url)
    got = read_pulsar(url, topics=f"{a},{b}").selectExpr(
        "topic", "cast(value as string) value", "cast(key as string) key"
    )
    assert_same_rows(got, df.select("topic", "value", "key"))
    # The topic option wins over the column.
    c = f"{topic_name}-c"
    _write(df, url, topic=c)
    assert read_pulsar(url, topic=c).count() == 90
    # A partitioned topic: keys spread over the partitions, every row arrives once.
    _write(df.drop("topic"), partitioned_url, topic=topic_name)
    back = read_pulsar(partitioned_url, topic=topic_name)
    assert_same_rows(back.selectExpr("cast(value as string) value"), df.select("value"))
    assert back.select("partition").distinct().count() > 1


def test_columns_it_cannot_write_are_listed(spark, pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    df = spark.createDataFrame([("a", 1)], "value string, n int")
    with pytest.raises(Exception, match=r"cannot write column\(s\) \['n'\].*accepts value"):
        _write(df, url, topic=topic_name)
    with pytest.raises(Exception, match="needs a 'value' column"):
        _write(spark.createDataFrame([("a",)], "key string"), url, topic=topic_name)
    bad_type = spark.createDataFrame([(1,)], StructType([StructField("value", IntegerType())]))
    with pytest.raises(Exception, match="'value' has type int"):  # typed writes take it
        _write(bad_type, url, topic=topic_name, schemaMode="raw")
    with pytest.raises(Exception, match=r"(?s)pulsar option 'topic'.*a 'topic' column"):
        _write(spark.createDataFrame([("a",)], "value string"), url)


def test_only_append(spark, pulsar_lite, topic_name) -> None:
    df = spark.createDataFrame([("a",)], "value string")

    def writer():
        return (
            df.write.format("pulsar")
            .option("service.url", pulsar_lite.service_url)
            .option("topic", topic_name)
        )

    with pytest.raises(Exception, match=r"only appends.*mode\(\"append\"\)"):
        writer().mode("overwrite").save()
    with pytest.raises(Exception, match="ErrorIfExists"):  # Spark's own check
        writer().save()


def test_a_broker_error_fails_the_write(spark, fresh_pulsar_lite, topic_name) -> None:
    broker = fresh_pulsar_lite(max_message_size_bytes=1024)
    df = spark.createDataFrame([("small",), ("x" * 5000,)], "value string")
    with pytest.raises(Exception, match=r"NotAllowedError.*Exceed maximum message size"):
        _write(df.coalesce(1), broker.service_url, topic=topic_name, batchingEnabled="false")
