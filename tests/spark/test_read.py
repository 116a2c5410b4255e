"""spark.read.format("pulsar") against pulsar-lite, the official client producing."""

from __future__ import annotations

import datetime as dt
import re
import socket
import threading
import time

import pytest
from pyspark.sql import Row

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol import MessageId
from pulsar_spark.spark import SPARK_SCHEMA
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.ranges import plan_ranges, read_range
from pulsar_spark.spark.splits import split_ranges
from tests.support.net import free_port
from tests.support.official import mixed_messages as _messages
from tests.support.official import produce, read_all
from tests.support.spark import assert_same_rows

UTC = dt.timezone.utc
#: The columns compared with the official client (it does not expose sequence ids).
COLUMNS = [
    "key",
    "value",
    "topic",
    "partition",
    "messageId",
    "publishTime",
    "eventTime",
    "properties",
    "producerName",
]


def _ms(ms: int | None) -> dt.datetime | None:
    if ms is None:
        return None
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)  # session zone is UTC


def _expected_rows(url: str, topic: str) -> list[Row]:
    """What the official client reads, as rows of the connector's schema (no sequenceId)."""
    base = topic.split("-partition-")[0]
    return [
        Row(
            key=m["key"].encode() if m["key"] is not None else None,
            value=m["value"],
            topic=base,
            partition=m["partition"],
            messageId=m["message_id"],
            publishTime=_ms(m["publish_time"]),
            eventTime=_ms(m["event_time"]),
            properties=m["properties"],
            producerName=m["producer_name"],
        )
        for m in read_all(url, topic)
    ]


def _ids(df) -> list[str]:
    rows = df.select("messageId").collect()
    return sorted((r.messageId for r in rows), key=lambda s: MessageId.parse(s).position)


def _in_bursts(url: str, topic: str, bursts: int, size: int, pause: float = 0.02) -> None:
    """``bursts`` batches (entries) of ``size`` messages, published at distinct times."""
    for b in range(bursts):
        produce(url, topic, _messages(size, start=b * size))
        time.sleep(pause)


def test_every_column_as_the_official_client_reads_it(
    spark, read_pulsar, broker, topic_name
) -> None:
    url = broker.service_url
    produce(url, topic_name, _messages(150), batching_max_messages=40)
    produce(url, topic_name, _messages(10, start=150), batching=False)
    df = read_pulsar(url, topic=topic_name)
    assert df.schema == SPARK_SCHEMA
    expected = spark.createDataFrame(_expected_rows(url, topic_name), _schema())
    assert_same_rows(df.select(COLUMNS), expected)
    sequence = [r.sequenceId for r in df.orderBy("sequenceId").select("sequenceId").collect()]
    assert sequence == sorted([*range(150), *range(10)])


def _schema(columns: list[str] = COLUMNS):
    from pyspark.sql.types import StructType

    return StructType([SPARK_SCHEMA[c] for c in columns])


def test_partitioned_topic_and_a_list_of_topics(
    spark, read_pulsar, partitioned_url, broker, topic_name
) -> None:
    # The official reader cannot read a partitioned topic on pulsar-lite (brokers.md, quirk
    # 3): compare with what was sent, by the ids the official producer got back.
    url = partitioned_url
    sent = _messages(120)
    ids = produce(url, topic_name, sent)
    df = read_pulsar(url, topic=topic_name)
    assert df.rdd.getNumPartitions() == 4
    expected = [
        (
            m.get("key", "").encode() or None,
            m["value"],
            topic_name,
            MessageId.parse(i).partition,
            i,
            _ms(m.get("event_time")),
            m.get("properties", {}),
        )
        for m, i in zip(sent, ids, strict=True)
    ]
    columns = ["key", "value", "topic", "partition", "messageId", "eventTime", "properties"]
    assert_same_rows(df.select(columns), spark.createDataFrame(expected, _schema(columns)))
    assert len({r.partition for r in df.select("partition").distinct().collect()}) > 1

    # topics: two non-partitioned topics read as one DataFrame.
    url = broker.service_url
    topic_name = f"{topic_name}-plain"
    other = f"{topic_name}-other"
    produce(url, topic_name, _messages(30))
    produce(url, other, _messages(20, start=30))
    both = read_pulsar(url, topics=f"{topic_name}, {other}")
    expected = _expected_rows(url, topic_name) + _expected_rows(url, other)
    assert_same_rows(both.select(COLUMNS), spark.createDataFrame(expected, _schema()))


def test_topics_pattern_on_pulsar_lite_names_the_option(read_pulsar, pulsar_lite) -> None:
    # pulsar-lite does not answer GetTopicsOfNamespace: the pattern path must fail with an
    # error naming topicsPattern, within the operation timeout. The positive test (listing
    # and matching topics) needs Apache Pulsar: see test_apache_read.py when that fixture
    # lands (tests/support/apache.py).
    started = time.monotonic()
    df = read_pulsar(
        pulsar_lite.service_url,
        topicsPattern="public/default/pat-.*",
        **{"pulsar.client.operationTimeoutMs": "1000"},
    )
    with pytest.raises(Exception, match=r"topicsPattern.*GetTopicsOfNamespace"):
        df.count()
    assert time.monotonic() - started < 30


def test_offset_bounds_inside_batches(read_pulsar, broker, topic_name) -> None:
    url = broker.service_url
    _in_bursts(url, topic_name, bursts=4, size=10, pause=0)
    every = _ids(read_pulsar(url, topic=topic_name))
    assert len(every) == 40
    start, end = every[13], every[27]  # inside the second and the third batch
    assert MessageId.parse(start).batch_index == 3
    df = read_pulsar(
        url,
        topic=topic_name,
        startingOffsets=f'{{"{topic_name}": "{start}"}}',
        endingOffsets=f'{{"{topic_name}": "{end}"}}',
    )
    assert _ids(df) == every[13:27]  # start inclusive, end exclusive
    # Kafka-style -2 / -1, and the short topic name.
    short = topic_name.rsplit("/", 1)[1]
    df = read_pulsar(
        url,
        topic=topic_name,
        startingOffsets=f'{{"{short}": -2}}',
        endingOffsets=f'{{"{short}": -1}}',
    )
    assert _ids(df) == every
    assert read_pulsar(url, topic=topic_name, startingOffsets="latest").count() == 0
    # A whole-entry id (batch -1) starts at the entry's first message.
    entry = MessageId.parse(every[20])
    whole = str(MessageId(entry.ledger, entry.entry))
    df = read_pulsar(url, topic=topic_name, startingOffsets=f'{{"{topic_name}": "{whole}"}}')
    assert _ids(df) == every[20:]


def test_offsets_per_partition(read_pulsar, partitioned_url, topic_name) -> None:
    url = partitioned_url
    produce(url, topic_name, _messages(80))
    df = read_pulsar(url, topic=topic_name)
    counts = {r.partition: r["count"] for r in df.groupBy("partition").count().collect()}
    skipped = read_pulsar(
        url, topic=topic_name, startingOffsets=f'{{"{topic_name}": {{"0": -1, "1": -2}}}}'
    )
    got = {r.partition: r["count"] for r in skipped.groupBy("partition").count().collect()}
    assert got == {p: c for p, c in counts.items() if p != 0}
    # A partition's own name works as a key too.
    first_of_2 = min(_ids(df.where("partition = 2")), key=lambda s: MessageId.parse(s).position)
    second = _ids(df.where("partition = 2"))[1]
    one = read_pulsar(
        url, topic=topic_name, startingOffsets=f'{{"{topic_name}-partition-2": "{second}"}}'
    )
    assert sorted(_ids(one.where("partition = 2"))) == sorted(
        i for i in _ids(df.where("partition = 2")) if i != first_of_2
    )


def test_time_bounds(read_pulsar, broker, topic_name) -> None:
    url = broker.service_url
    _in_bursts(url, topic_name, bursts=5, size=6)
    df = read_pulsar(url, topic=topic_name).orderBy("publishTime", "sequenceId")
    rows = df.select("messageId", "publishTime").collect()
    times = sorted({r.publishTime for r in rows})
    assert len(times) == 5
    t1, t3 = times[1], times[3]
    ms1 = int(t1.replace(tzinfo=UTC).timestamp() * 1000)
    iso3 = t3.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")
    bounded = read_pulsar(url, topic=topic_name, startingTime=str(ms1), endingTime=iso3)
    want = [r.messageId for r in rows if t1 <= r.publishTime < t3]
    assert _ids(bounded) == sorted(want, key=lambda s: MessageId.parse(s).position)
    assert len(want) == 12
    later = (times[-1] + dt.timedelta(seconds=5)).isoformat()  # no zone: UTC
    assert read_pulsar(url, topic=topic_name, startingTime=later).count() == 0


def test_min_partitions_split_returns_the_same_rows(
    read_pulsar, broker, partitioned_url, topic_name
) -> None:
    url = broker.service_url
    plain = f"{topic_name}-plain"
    _in_bursts(url, plain, bursts=12, size=25, pause=0)
    whole = read_pulsar(url, topic=plain)
    split = read_pulsar(url, topic=plain, minPartitions="5")
    assert split.rdd.getNumPartitions() == 5
    assert_same_rows(split, whole)
    # Bounds inside batches survive the split.
    ids = _ids(whole)
    bounded = dict(
        startingOffsets=f'{{"{plain}": "{ids[30]}"}}', endingOffsets=f'{{"{plain}": "{ids[260]}"}}'
    )
    assert_same_rows(
        read_pulsar(url, topic=plain, minPartitions="4", **bounded),
        read_pulsar(url, topic=plain, **bounded),
    )
    # A partitioned topic: 4 partitions become 10 tasks.
    url = partitioned_url
    for b in range(6):
        produce(url, topic_name, _messages(40, start=b * 40), batching_max_messages=10)
    whole = read_pulsar(url, topic=topic_name)
    split = read_pulsar(url, topic=topic_name, minPartitions="10")
    assert split.rdd.getNumPartitions() == 10
    assert_same_rows(split, whole)


def test_split_boundaries_inside_chunked_messages_lose_nothing(
    read_pulsar, broker, topic_name
) -> None:
    # Messages of 4-5 chunks among small ones, one entry each: entry-count splits
    # cut through chunked messages, each of which goes with its first chunk.
    import random

    rnd = random.Random(11)
    sent = []
    with (
        PulsarClient(broker.service_url) as client,
        client.create_producer(topic_name, batching=False, chunk_max_size=4096) as producer,
    ):
        for i in range(12):
            sent.append(rnd.randbytes(15_000 + 500 * i) if i % 2 else f"small-{i}".encode())
            producer.send(sent[-1])
    whole = read_pulsar(broker.service_url, topic=topic_name)
    assert [r.value for r in whole.orderBy("messageId").collect()] != []
    for pieces in ("3", "7", "16"):
        split = read_pulsar(broker.service_url, topic=topic_name, minPartitions=pieces)
        assert split.rdd.getNumPartitions() > 2
        assert_same_rows(split, whole)
    assert sorted(r.value for r in whole.collect()) == sorted(sent)


def test_split_by_publish_time_returns_the_same_rows(broker, topic_name) -> None:
    # The publish-time split is what ranges spanning ledgers use (Apache Pulsar); pulsar-lite
    # keeps a topic in one ledger, so it is forced here, without Spark (and across real
    # ledgers on Apache Pulsar in test_split_across_ledgers_on_apache_pulsar).
    url = broker.service_url
    _in_bursts(url, topic_name, bursts=8, size=5)
    options = parse_options({"service.url": url, "topic": topic_name})
    with PulsarClient(url) as client:
        (whole,) = plan_ranges(client, options)
        rows = [
            r for b in read_range(client, whole, options, batch_rows=100) for r in b.to_pylist()
        ]
        pieces = split_ranges(client, [whole], 4, by_time=True)
        assert len(pieces) == 4
        assert all(p.start.message_id is not None for p in pieces[1:])
        got = [
            r
            for p in pieces
            for b in read_range(client, p, options, batch_rows=100)
            for r in b.to_pylist()
        ]
    assert got == rows
    assert len(rows) == 40


def test_empty_topic_gives_an_empty_dataframe_with_the_schema(
    read_pulsar, broker, partitioned_url, topic_name
) -> None:
    plain = f"{topic_name}-plain"
    df = read_pulsar(broker.service_url, topic=plain)
    assert df.schema == SPARK_SCHEMA
    assert df.collect() == []
    assert read_pulsar(broker.service_url, topic=plain, minPartitions="3").count() == 0
    assert read_pulsar(partitioned_url, topic=topic_name).count() == 0


def test_a_start_id_that_is_gone_is_data_loss(read_pulsar, broker, topic_name) -> None:
    url = broker.service_url
    produce(url, f"{topic_name}-before", [b"x"])  # ledger ids are numbered broker-wide
    produce(url, topic_name, _messages(5), batching=False)
    first = MessageId.parse(_ids(read_pulsar(url, topic=topic_name))[0])
    assert first.ledger > 0
    gone = str(MessageId(first.ledger - 1, 0))  # a ledger this topic does not have
    start = f'{{"{topic_name}": "{gone}"}}'
    with pytest.raises(Exception, match="failOnDataLoss"):
        read_pulsar(url, topic=topic_name, startingOffsets=start).count()
    lenient = read_pulsar(url, topic=topic_name, startingOffsets=start, failOnDataLoss="false")
    assert lenient.count() == 5


def test_unreachable_broker_fails_within_the_timeout(read_pulsar) -> None:
    # Nothing listens: connection refused.
    started = time.monotonic()
    df = read_pulsar(
        f"pulsar://127.0.0.1:{free_port()}",
        topic="t",
        **{"pulsar.client.connectionTimeoutMs": "2000"},
    )
    with pytest.raises(Exception, match=r"reachable|refused"):
        df.count()
    assert time.monotonic() - started < 30
    # Something accepts and never answers: the handshake times out.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:  # noqa: PERF203 - the accept timeout, to check stop
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        started = time.monotonic()
        df = read_pulsar(
            f"pulsar://127.0.0.1:{server.getsockname()[1]}",
            topic="t",
            connectionTimeoutMs="1500",
            operationTimeoutMs="1500",
        )
        with pytest.raises(Exception, match=r"(?i)no CONNECTED|timed out|timeout"):
            df.count()
        assert time.monotonic() - started < 30
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def test_topics_pattern_on_apache_pulsar(spark, read_pulsar, apache_pulsar, topic_name) -> None:
    # The positive path of topicsPattern: GetTopicsOfNamespace, which pulsar-lite lacks.
    url = apache_pulsar.service_url
    prefix = topic_name.rsplit("/", 1)[1]
    a, b, c = (f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-c")
    apache_pulsar.admin.create_partitioned_topic(c, 2)
    produce(url, a, _messages(10))
    produce(url, b, _messages(5, start=10))
    produce(url, c, _messages(8, start=15))
    produce(url, f"{topic_name}-other-ns-lookalike-x", [b"not matched"])
    df = read_pulsar(url, topicsPattern=f"public/default/{re.escape(prefix)}-[abc]")
    got = {r.topic: r["count"] for r in df.groupBy("topic").count().collect()}
    assert got == {a: 10, b: 5, c: 8}
    assert df.rdd.getNumPartitions() == 4  # a, b and the two partitions of c
    assert read_pulsar(url, topicsPattern=f"{re.escape(prefix)}-nothing-.*").count() == 0


def test_split_across_ledgers_on_apache_pulsar(read_pulsar, apache_pulsar, topic_name) -> None:
    # An unload closes the topic's ledger; the next producer writes to a new one. A split
    # range spanning both is cut at publish times (message_id_at_time).
    url = apache_pulsar.service_url
    _in_bursts(url, topic_name, bursts=4, size=10)
    apache_pulsar.admin.unload(topic_name)
    _in_bursts(url, topic_name, bursts=4, size=10)
    whole = read_pulsar(url, topic=topic_name)
    ledgers = {MessageId.parse(i).ledger for i in _ids(whole)}
    assert len(ledgers) == 2
    split = read_pulsar(url, topic=topic_name, minPartitions="4")
    assert split.rdd.getNumPartitions() > 1
    assert_same_rows(split, whole)
    assert split.count() == 80
    # Every read used non-durable subscriptions: none is left on the topic.
    assert apache_pulsar.admin.stats(topic_name)["subscriptions"] == {}


def test_a_limit_stops_reading_early(read_pulsar, pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, _messages(3000))
    started = time.monotonic()
    assert len(read_pulsar(url, topic=topic_name).limit(3).collect()) == 3
    assert time.monotonic() - started < 20
