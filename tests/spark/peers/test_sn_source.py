"""StreamNative pulsar-spark's ``PulsarSourceSuiteBase`` (release 3.4.1.3), translated to this
connector: the same options (``topic``, ``topics``, ``topicsPattern``, ``startingOffsets``,
``startingTime``, ``failOnDataLoss``), positions as readable message ids in the
``startingOffsets`` JSON (theirs: byte arrays, see the report), and ``key`` for their
``__key``. Typed topics read into a typed ``value`` column (their records' fields become
top-level columns: ``value.*`` here).
"""

from __future__ import annotations

import datetime as dt
import time

import pytest

from tests.spark.peers.support import (
    check,
    from_latest_across_restarts,
    pattern_from_the_fourth,
    plus_one,
    send,
)


def test_assign_from_latest_offsets(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarSourceSuiteBase: 'assign from latest offsets (failOnDataLoss:
    true)': only what is written after the start, across restarts."""
    url = pulsar_lite.service_url
    stream = from_latest_across_restarts(
        streams, url, topic_name, topic=topic_name, failOnDataLoss="true"
    )
    check(stream, range(2, 8))
    send(url, topic_name, [7, 8])
    stream.process()
    send(url, topic_name, range(9, 17))
    stream.process()
    check(stream, range(2, 18))
    stream.stop()


def test_subscribing_topic_by_name_from_earliest_offsets(pulsar_lite, topic_name, streams):
    """StreamNative PulsarSourceSuiteBase: 'subscribing topic by name from earliest offsets
    (failOnDataLoss: false)'."""
    url = pulsar_lite.service_url
    send(url, topic_name, [1, 2, 3])
    stream = streams(
        url, plus_one, topics=topic_name, startingOffsets="earliest", failOnDataLoss="false"
    )
    stream.start()
    send(url, topic_name, [4, 5, 6])
    stream.process()
    check(stream, range(2, 8))
    stream.send_while_stopped(topic_name, [7, 8])
    check(stream, range(2, 10))
    send(url, topic_name, range(9, 17))
    stream.process()
    check(stream, range(2, 18))
    stream.stop()


def test_assign_from_time(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarSourceSuiteBase: 'assign from time (failOnDataLoss: true)': a
    ``startingTime`` ten seconds ago reads what was written since, then what comes."""
    url = pulsar_lite.service_url
    time0 = int(time.time() * 1000) - 10_000
    send(url, topic_name, [1, 2, 3])
    stream = streams(
        url, plus_one, topic=topic_name, startingTime=str(time0), failOnDataLoss="true"
    )
    stream.start()
    send(url, topic_name, [7, 8, 9])
    stream.process()
    check(stream, [2, 3, 4, 8, 9, 10])
    stream.stop()


def test_subscribing_topic_by_pattern_from_specific_offsets(
    apache_pulsar, topic_name, streams
) -> None:
    """StreamNative PulsarSourceSuiteBase: 'subscribing topic by pattern from specific
    offsets (failOnDataLoss: true)': from the fourth message on (its id in the JSON), across
    a restart."""
    url = apache_pulsar.service_url
    stream, topic = pattern_from_the_fourth(streams, url, topic_name)
    stream.start()
    send(url, topic, [7])
    stream.process()
    expected = [1, 2, 3, 10, 11, 12, 7]
    check(stream, expected)
    stream.restart()
    check(stream, expected)
    send(url, topic, range(30, 35))
    stream.process()
    check(stream, [*expected, *range(30, 35)])
    stream.stop()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topics": "t", "topic": "a"}, "topic"),
        ({"topic": ""}, "topic"),
        ({"topics": ""}, "topics"),
        ({"topicsPattern": ""}, "topicsPattern"),
    ],
    ids=["topics-and-topic", "empty-topic", "empty-topics", "empty-pattern"],
)
def test_bad_source_options(spark, pulsar_lite, options, message) -> None:
    """StreamNative PulsarSourceSuiteBase: 'bad source options' (the others, an ending offset,
    no topic option and a topic list with a pattern, are in the Kafka suite's test)."""
    with pytest.raises(Exception, match=message):
        spark.readStream.format("pulsar").option("service.url", pulsar_lite.service_url).options(
            **options
        ).load()


def test_batched_non_batched_and_mixed_messages(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarSourceSuiteBase: 'test with batched messages', 'test with
    non-batched messages', 'test with batched and non-batched messages': rounds of 10
    messages, each read before the next, the answer cumulative."""
    url = pulsar_lite.service_url
    send(url, topic_name, ["bootstrap"], batching=False)
    stream = streams(url, topic=topic_name, startingOffsets="earliest", failOnDataLoss="true")
    stream.start()
    expected = ["bootstrap"]
    for round_, kind in enumerate(["batched", "non-batched", "mixed", "batched"]):
        values = [str(i) for i in range(round_ * 10, round_ * 10 + 10)]
        if kind == "mixed":  # two in a batch, then one alone, and so on
            for i in range(0, 10, 3):
                send(url, topic_name, values[i : i + 2])
                send(url, topic_name, values[i + 2 : i + 3], batching=False)
        else:
            send(url, topic_name, values, batching=kind == "batched")
        stream.process()
        expected += values
        assert sorted(stream.values()) == sorted(expected), kind
    stream.stop()


TYPED = [
    ("boolean", [True, False, True]),
    ("int", [1, -2, 2**31 - 1]),
    ("double", [1.5, -2.25, 0.0]),
    ("date", [dt.date(2026, 1, 1), dt.date(1970, 1, 1)]),
    ("timestamp", [dt.datetime(2026, 1, 1, 12, 30, 45, 123000)]),
    ("binary", [b"\x00\x01", b"abc"]),
]


@pytest.mark.parametrize(("spark_type", "values"), TYPED, ids=[t for t, _ in TYPED])
def test_typed_stream(spark, apache_pulsar, topic_name, streams, spark_type, values) -> None:
    """StreamNative PulsarSourceSuiteBase: 'test boolean stream', 'test int stream', 'test
    double stream', 'test date stream', 'test timestamp stream', 'test byte array stream': a
    topic with that schema (written by this connector's typed sink) streams into a ``value``
    of the matching Spark type."""
    url = apache_pulsar.service_url
    df = spark.createDataFrame([(v,) for v in values], f"value {spark_type}")
    df.coalesce(1).write.format("pulsar").option("service.url", url).option(
        "topic", topic_name
    ).mode("append").save()
    stream = streams(url, lambda d: d.select("value"), topic=topic_name, startingOffsets="earliest")
    stream.run()
    assert sorted(stream.values()) == sorted(values)


def test_struct_types_in_avro(spark, apache_pulsar, topic_name, streams) -> None:
    """StreamNative PulsarSourceSuiteBase: 'test struct types in avro': an AVRO record topic
    streams into a struct ``value`` (their fields as top-level columns: ``value.*``)."""
    import pulsar
    from pulsar.schema import AvroSchema, Boolean, Float, Integer, Record, String

    class Bar(Record):
        b = Boolean()
        s = String()

    class Foo(Record):
        i = Integer()
        f = Float()
        bar = Bar()

    url = apache_pulsar.service_url
    foos = [Foo(i=i, f=i + 0.5, bar=Bar(b=i % 2 == 0, s=f"s{i}")) for i in range(3)]
    client = pulsar.Client(url)
    try:
        producer = client.create_producer(topic_name, schema=AvroSchema(Foo))
        for foo in foos:
            producer.send(foo)
        producer.close()
    finally:
        client.close()
    stream = streams(
        url,
        lambda d: d.selectExpr("value.i", "value.f", "value.bar.b", "value.bar.s"),
        topic=topic_name,
        startingOffsets="earliest",
    )
    stream.run()
    assert sorted(stream.rows()) == [(i, i + 0.5, i % 2 == 0, f"s{i}") for i in range(3)]
