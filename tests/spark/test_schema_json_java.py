"""Spark's dates, times and timestamps written as JSON into a Java POJO's JSON topic, on
Apache Pulsar 4.0: the POJO's consumer (``Schema.JSON(Times.class)``: Instant, LocalDate,
LocalDateTime, LocalTime) reads the same values, and Spark reads them back typed."""

from __future__ import annotations

import datetime as dt

from tests.support.java_client import java_consume, java_produce

TIMES = {"type": "JSON", "pojo": "Times"}


def test_spark_time_types_into_a_pojo_json_topic_read_by_java(
    spark, read_pulsar, apache_pulsar, topic_name
) -> None:
    url = apache_pulsar.service_url
    # The Java service's producer registers the POJO's schema first.
    java_produce(url, topic_name, TIMES, [{"name": "java", "time": "01:02:03.004"}])
    rows = [
        (
            (
                dt.datetime(2024, 2, 29, 12, 34, 56, 123456),
                dt.date(2024, 2, 29),
                dt.datetime(2024, 1, 2, 3, 4, 5, 678000),
                "a",
                dt.time(23, 59, 59, 999000),
            ),
        ),
        (
            (
                dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
                dt.date(1, 1, 1),
                dt.datetime(1969, 12, 31, 23, 59, 59),
                "b",
                dt.time(0, 0),
            ),
        ),
        ((None, None, None, "c", None),),
    ]
    schema = (
        "value struct<at: timestamp, day: date, local: timestamp_ntz, name: string, time: time>"
    )
    df = spark.createDataFrame(rows, schema)
    df.coalesce(1).write.format("pulsar").option("service.url", url).option(
        "topic", topic_name
    ).mode("append").save()
    got = java_consume(url, topic_name, TIMES, 4)
    assert [m["value"] for m in got] == [
        {"at": None, "day": None, "local": None, "name": "java", "time": "01:02:03.004"},
        {
            "at": "2024-02-29T12:34:56.123456Z",
            "day": "2024-02-29",
            "local": "2024-01-02T03:04:05.678",
            "name": "a",
            "time": "23:59:59.999",
        },
        {
            "at": "1969-12-31T23:59:59.999999Z",
            "day": "0001-01-01",
            "local": "1969-12-31T23:59:59",
            "name": "b",
            "time": "00:00:00",
        },
        {"at": None, "day": None, "local": None, "name": "c", "time": None},
    ]
    assert {m["schemaVersion"] for m in got} == {0}  # the POJO's schema, not a new one
    back = read_pulsar(url, topic=topic_name).orderBy("messageId").select("value.*").collect()
    assert [tuple(r) for r in back[1:]] == [row for (row,) in rows]
