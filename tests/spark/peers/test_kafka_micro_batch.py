"""Spark's ``KafkaMicroBatchSourceSuite`` (with its ``KafkaSourceSuiteBase``), translated to
Pulsar: Kafka partitions are topic partitions, offsets are message ids (``startingOffsets``
JSON with readable ids), ``subscribe``/``subscribePattern`` are ``topics``/``topicsPattern``;
``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay``, ``failOnDataLoss``
and ``startingTimestamp`` are taken as Kafka users write them.

Spark's ``CheckAnswer`` is a multiset check of what the sink holds, a micro-batch replayed
after a restart counting once: :class:`~tests.spark.peers.support.Stream` keeps rows by batch
id. pulsar-lite serves what it can; Apache Pulsar the deletions, partition changes and patterns
(pulsar-lite does not list a namespace's topics).
"""

from __future__ import annotations

import datetime as dt
import itertools
import time

import pytest
from pyspark.sql import functions as F

from tests.spark.peers.support import (
    as_int,
    check,
    check_self_join,
    error_text,
    first_micro_batch,
    from_latest_across_restarts,
    pattern_with_a_topic_replaced,
    plus_one,
    send,
    send_to_partitions,
    start_between,
    wait_until,
)

# -- starting positions, restarts, new partitions ---------------------------------------------


def test_subscribing_by_name_from_latest_across_restarts_and_added_partitions(
    apache_pulsar, topic_name, streams
) -> None:
    """Spark KafkaSourceSuiteBase: 'subscribing topic by name from latest offsets
    (failOnDataLoss: false)' (also 'cannot stop Kafka stream', '(de)serialization of
    initial offsets': a stop and a start with nothing read)."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 2)
    stream = from_latest_across_restarts(
        streams, url, topic_name, topics=topic_name, failOnDataLoss="false"
    )
    check(stream, [2, 3, 4, 5, 6, 7])
    send(url, topic_name, [7, 8])
    stream.process()
    check(stream, range(2, 10))
    admin.update_partitions(topic_name, 4)
    send(url, topic_name, range(9, 17), batching=False)  # round robin: every partition
    stream.process()
    check(stream, range(2, 18))
    stream.stop()


def test_subscribing_by_pattern_from_earliest_across_restarts_and_added_partitions(
    apache_pulsar, topic_name, streams
) -> None:
    """Spark KafkaSourceSuiteBase: 'subscribing topic by pattern from earliest offsets
    (failOnDataLoss: true)'."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    topic = f"{topic_name}-suffix"
    admin.create_partitioned_topic(topic, 2)
    send(url, topic, [1, 2, 3])
    stream = streams(
        url,
        plus_one,
        topicsPattern=f"{topic_name}-.*",
        startingOffsets="earliest",
        failOnDataLoss="true",
    )
    stream.start()
    send(url, topic, [4, 5, 6])
    stream.process()
    check(stream, range(2, 8))
    stream.restart()
    check(stream, range(2, 8))
    stream.send_while_stopped(topic, [7, 8])
    check(stream, range(2, 10))
    admin.update_partitions(topic, 4)
    send(url, topic, range(9, 17), batching=False)
    stream.process()
    check(stream, range(2, 18))
    stream.stop()


def test_assign_from_specific_offsets_per_partition(apache_pulsar, topic_name, streams) -> None:
    """Spark KafkaSourceSuiteBase: 'assign from specific offsets (failOnDataLoss: true)':
    partition 0 from earliest (-2), 1 from latest (-1), 2, 3 and 4 from their first, second
    and third message (message ids from the ``messageId`` column's form)."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 5)
    ids = send_to_partitions(
        url,
        topic_name,
        {
            0: [-20, -21, -22],  # from earliest: all seen
            1: [-10, -11, -12],  # from latest: all skipped
            2: [0, 1, 2],  # from its first: all seen
            3: [10, 11, 12],  # from its second
            4: [20, 21, 22],  # from its third
        },
    )
    starting = (
        f'{{"{topic_name}": {{"0": -2, "1": -1, "2": "{ids[2][0]}", '
        f'"3": "{ids[3][1]}", "4": "{ids[4][2]}"}}}}'
    )
    stream = streams(url, as_int, topic=topic_name, startingOffsets=starting, failOnDataLoss="true")
    expected = [-20, -21, -22, 0, 1, 2, 11, 12, 22]
    stream.start()
    stream.process()
    check(stream, expected)
    stream.stop()
    stream.start()
    stream.process()
    check(stream, expected)  # the data back on recovery
    send(url, topic_name, range(30, 35), batching=False)  # in several partitions
    stream.process()
    check(stream, [*expected, *range(30, 35)])
    stream.stop()


def test_subscribing_by_name_from_a_global_timestamp(
    pulsar_lite_partitioned, topic_name, streams
) -> None:
    """Spark KafkaSourceSuiteBase: 'subscribing topic by name from global timestamp per
    topic' (``startingTimestamp``: the publish time here), and 'subscribing topic by name from
    global timestamp per topic with non-matching starting offset': partitions with nothing
    published at or after the time start at their end and read what comes next."""
    url = pulsar_lite_partitioned.service_url
    send(url, topic_name, [-20, -10, 0, 10, 20, 21, 22], batching=False)
    time.sleep(0.05)
    start = int(time.time() * 1000)
    time.sleep(0.05)
    send(url, topic_name, [-21, -22, 2])  # one batch: one partition
    stream = streams(url, as_int, topics=topic_name, startingTimestamp=str(start))
    stream.start()
    stream.process()
    check(stream, [-21, -22, 2])
    stream.stop()
    stream.start()
    stream.process()
    check(stream, [-21, -22, 2])
    stream.stop()
    send(url, topic_name, [30, 31, 32], batching=False)  # while stopped, every partition
    stream.start()
    stream.process()
    check(stream, [-21, -22, 2, 30, 31, 32])
    stream.stop()


def test_subscribing_topics_from_topic_level_offsets(pulsar_lite, topic_name, streams) -> None:
    """Spark KafkaSourceSuiteBase: 'subscribing topics from topic-level offsets': one topic
    from earliest, the other from latest, without naming partitions."""
    url = pulsar_lite.service_url
    first, second = f"{topic_name}-1", f"{topic_name}-2"
    send(url, first, [1, 2, 3])
    send(url, second, [11])
    stream = streams(
        url,
        as_int,
        topics=f"{first},{second}",
        startingOffsets=f'{{"{first}": "earliest", "{second}": "latest"}}',
    )
    stream.start()
    stream.process()
    send(url, second, [12])
    send(url, first, [4])
    stream.process()
    check(stream, [1, 2, 3, 12, 4])
    stream.stop()
    stream.start()
    stream.process()
    check(stream, [1, 2, 3, 12, 4])
    stream.stop()


# -- admission control -------------------------------------------------------------------------


def test_max_offsets_per_trigger_and_trigger_once(apache_pulsar, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'maxOffsetsPerTrigger': partitions of 51, 11 and 1
    messages read 10 at a time, the smallest partitions first served (an equal share here,
    Kafka's is by lag), across a restart; then Trigger.Once ignores the limit."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 3)
    send_to_partitions(url, topic_name, {0: range(100, 151), 1: range(10, 21), 2: [1]})
    every = [1, *range(10, 21), *range(100, 151)]
    options = {"topic": topic_name, "startingOffsets": "earliest", "maxOffsetsPerTrigger": "10"}
    stream = streams(url, as_int, **options)
    stream.start(processingTime="100 milliseconds")
    wait_until(lambda: len(stream.batch_sizes()) >= 2, 120, "two micro-batches")
    stream.stop()
    first = sorted(v for v in next(iter(stream.batches.values())))
    assert first[:3] == [(1,), (10,), (11,)] or first[:2] == [(1,), (10,)], first
    stream.start()
    stream.process()
    stream.stop()
    assert all(size <= 10 for size in stream.batch_sizes()), stream.batch_sizes()
    assert stream.batch_sizes() == [10] * 6 + [3]  # 63 messages, 10 a trigger
    check(stream, every)
    # Trigger.Once: everything in one micro-batch, then what was added, again in one.
    once = streams(url, as_int, **options)
    once.run(once=True)
    assert once.batch_sizes() == [63]
    send(url, topic_name, range(1000, 1011), batching=False)
    once.run(once=True)
    assert once.batch_sizes() == [63, 11]
    check(once, [*every, *range(1000, 1011)])


def _trigger_times(stream) -> dict[int, float]:
    """When each micro-batch's trigger started (epoch seconds), from the query's progress."""
    assert stream.query is not None
    return {
        p.batchId: dt.datetime.fromisoformat(p.timestamp.replace("Z", "+00:00")).timestamp()
        for p in stream.query.recentProgress
        if p.numInputRows
    }


def _held_for_the_delay(stream, minimum: int, delay: float) -> None:
    """Every micro-batch after the first with fewer than ``minimum`` rows started at least
    ``delay`` seconds after the one before it."""
    ids = sorted(b for b, rows in stream.batches.items() if rows)
    wait_until(lambda: set(ids) <= set(_trigger_times(stream)), 30, "every progress")
    times = _trigger_times(stream)
    for before, batch in itertools.pairwise(ids):
        if len(stream.batches[batch]) < minimum:
            gap = times[batch] - times[before]
            assert gap >= delay - 0.3, (batch, gap, stream.batch_sizes())


def test_min_offsets_per_trigger_with_max_trigger_delay(
    pulsar_lite_partitioned, topic_name, streams
) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'minOffsetsPerTrigger': the first micro-batch is
    not held; 15 or more messages waiting go at once; fewer wait until ``maxTriggerDelay``
    has passed since the last micro-batch. (Each write after the first is one Pulsar batch,
    so a trigger sees all of it or none.)"""
    url = pulsar_lite_partitioned.service_url
    send(url, topic_name, [*range(100, 110), *range(10, 15), 1], batching=False)
    stream = first_micro_batch(
        streams, url, topic=topic_name, minOffsetsPerTrigger="15", maxTriggerDelay="4s"
    )
    assert stream.batch_sizes() == [16]
    send(url, topic_name, [*range(15, 21), *range(110, 121), 2])  # 18: let through
    wait_until(lambda: len(stream.batch_sizes()) == 2, 30, "a micro-batch of 18")
    assert stream.batch_sizes() == [16, 18]
    send(url, topic_name, [*range(121, 126), *range(21, 26)])  # 10 < 15: held
    wait_until(lambda: len(stream.batch_sizes()) == 3, 30, "the delay's micro-batch")
    _held_for_the_delay(stream, 15, 4)
    stream.stop()
    assert stream.batch_sizes() == [16, 18, 10]
    check(stream, [1, 2, *range(10, 26), *range(100, 126)])


def test_composite_read_limit(pulsar_lite_partitioned, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'compositeReadLimit': ``minOffsetsPerTrigger`` 15,
    ``maxOffsetsPerTrigger`` 20, ``maxTriggerDelay`` 3s: the first micro-batch takes 20 of
    33; no micro-batch takes more than 20, and one of fewer than 15 only after the delay."""
    url = pulsar_lite_partitioned.service_url
    send(url, topic_name, range(33), batching=False)
    stream = first_micro_batch(
        streams,
        url,
        topic=topic_name,
        minOffsetsPerTrigger="15",
        maxOffsetsPerTrigger="20",
        maxTriggerDelay="3s",
    )
    assert stream.batch_sizes() == [20]
    send(url, topic_name, range(33, 52))
    wait_until(lambda: sum(stream.batch_sizes()) == 52, 30, "every message")
    _held_for_the_delay(stream, 15, 3)
    stream.stop()
    assert all(size <= 20 for size in stream.batch_sizes()), stream.batch_sizes()
    check(stream, range(52))


def test_trigger_available_now_reads_what_was_there_in_batches(
    pulsar_lite_partitioned, topic_name, streams
) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'Trigger.AvailableNow': 15 messages at 5 a
    micro-batch are 3 micro-batches; messages written during the run wait for the next."""
    url = pulsar_lite_partitioned.service_url
    send(url, topic_name, range(15), batching=False)
    written: list[str] = []
    stream = streams(
        url, as_int, topic=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="5"
    )

    def late(frame, batch_id: int) -> None:
        if not written:  # the run's target is fixed: these wait for the next run
            written.extend(send(url, topic_name, range(100, 105), batching=False))

    stream.before = late
    stream.run()
    assert written and stream.batch_sizes() == [5, 5, 5]
    check(stream, range(15))
    stream.run()
    check(stream, [*range(15), *range(100, 105)])


def test_input_row_metrics(pulsar_lite_partitioned, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'input row metrics': the progress counts the 3 rows
    read."""
    url = pulsar_lite_partitioned.service_url
    stream = start_between(streams, url, topic_name, topic=topic_name)
    check(stream, [2, 3, 4])
    assert stream.progress_rows() == 3
    stream.stop()


# -- patterns, deletions, recreations --------------------------------------------------------


def test_subscribing_by_pattern_with_topic_deletions(apache_pulsar, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'subscribing topic by pattern with topic deletions':
    with ``failOnDataLoss=false`` a deleted topic is dropped and a new one matching the pattern
    read."""
    admin = apache_pulsar.admin
    pattern_with_a_topic_replaced(
        streams,
        apache_pulsar.service_url,
        topic_name,
        lambda topic: admin.create_partitioned_topic(topic, 2),
        admin.delete_partitioned_topic,
    )


def test_subscribe_by_pattern_with_topic_recreation_between_batches_fails(
    apache_pulsar, topic_name, streams
) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'subscribe topic by pattern with topic recreation
    between batches': a topic deleted and created again while the query is stopped is data
    loss; ``failOnDataLoss`` is true by default, so the restarted query fails naming it."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    good, bad = f"{topic_name}-good", f"{topic_name}-bad"
    for topic, values in ((good, [1, 3]), (bad, [2, 4])):
        admin.create_partitioned_topic(topic, 1)
        send(url, topic, values)
    stream = streams(url, as_int, topicsPattern=f"{topic_name}-.*", startingOffsets="earliest")
    stream.start()
    stream.process()
    check(stream, [1, 2, 3, 4])
    stream.stop()
    admin.delete_partitioned_topic(bad)
    admin.create_partitioned_topic(bad, 1)
    send(url, bad, [6])
    stream.start()
    with pytest.raises(Exception) as failure:
        stream.process()
    text = error_text(failure.value)
    assert "DataLossError" in text and f"{bad.rsplit('/', 1)[1]}-partition-0" in text, text
    check(stream, [1, 2, 3, 4])


def test_topic_level_offsets_tolerate_a_new_topic_matching_the_pattern(
    apache_pulsar, topic_name, streams
) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'topic-level offsets tolerate a new topic matching
    subscribePattern after the start': the new topic is read from its earliest message."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    admin.create_topic(first)
    send(url, first, [1])
    stream = streams(
        url,
        as_int,
        topicsPattern=f"{topic_name}-.*",
        startingOffsets=f'{{"{first}": "earliest"}}',
    )
    stream.start()
    stream.process()
    check(stream, [1])
    admin.create_topic(second)
    send(url, second, [2])
    stream.process()
    check(stream, [1, 2])
    stream.stop()


def test_delete_a_topic_when_a_spark_job_is_running(apache_pulsar, topic_name, spark, tmp_path):
    """Spark KafkaMicroBatchSourceSuite: 'delete a topic when a Spark job is running': the
    topic is deleted and created again before the micro-batch's tasks read it; with
    ``failOnDataLoss=false`` the query does not fail."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_topic(topic_name)
    send(url, topic_name, range(1, 11))
    got: list[int] = []

    def sink(frame, batch_id: int) -> None:
        admin.delete(topic_name)
        admin.create_topic(topic_name)
        got.extend(r.value for r in as_int(frame).collect())

    df = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .load()
    )
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert set(got) <= set(range(1, 11))


def test_available_now_fails_when_planned_partitions_are_lost(
    apache_pulsar, topic_name, streams
) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'Query with Trigger.AvailableNow should throw error
    when topic partitions got unavailable during subsequent batches': the topic is deleted and
    created with fewer partitions during the run; the query fails (whatever
    ``failOnDataLoss``), naming the loss."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 5)
    send(url, topic_name, range(15), batching=False)
    stream = streams(
        url, as_int, topic=topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="5"
    )

    def shrink(frame, batch_id: int) -> None:
        if batch_id == 0:
            admin.delete_partitioned_topic(topic_name)
            admin.create_partitioned_topic(topic_name, 3)
            send(url, topic_name, range(15), batching=False)

    stream.before = shrink
    with pytest.raises(Exception) as failure:
        stream.run()
    assert "DataLossError" in error_text(failure.value), error_text(failure.value)


def test_positions_are_kept_for_a_source_without_new_data(pulsar_lite, topic_name, streams):
    """Spark KafkaMicroBatchSourceSuite: 'SPARK-22956: currentPartitionOffsets should be set
    when no new data comes in': a union of two streams, 5 rows a micro-batch each; once the
    smaller is read through, each micro-batch takes the next 5 of the larger, across a
    restart."""
    url = pulsar_lite.service_url
    small, big = f"{topic_name}-small", f"{topic_name}-big"
    send(url, small, range(10))
    send(url, big, range(100, 120))

    def union(df):
        other = (
            df.sparkSession.readStream.format("pulsar")
            .option("service.url", url)
            .option("topic", big)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "5")
            .load()
        )
        return as_int(df).union(as_int(other))

    stream = streams(url, union, topic=small, startingOffsets="earliest", maxOffsetsPerTrigger="5")
    stream.start(processingTime="100 milliseconds")
    wait_until(lambda: len(stream.batch_sizes()) >= 3, 120, "three micro-batches")
    stream.stop()
    stream.start()
    stream.process()
    stream.stop()
    batches = [sorted(v for (v,) in rows) for _, rows in sorted(stream.batches.items()) if rows]
    small_left, big_left = list(range(10)), list(range(100, 120))
    for batch in batches:  # each: the next 5 of each stream that has any left
        expected = sorted(small_left[:5] + big_left[:5])
        assert batch == expected, batches
        small_left, big_left = small_left[5:], big_left[5:]
    assert not small_left and not big_left


def test_stream_stream_self_join(pulsar_lite_partitioned, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'ensure stream-stream self-join generates only one
    offset in log and correct metrics': the answer and the input rows are Kafka's; the offset
    log holds two offsets (see below)."""
    stream = check_self_join(streams, pulsar_lite_partitioned.service_url, topic_name)
    # The scan runs once (exchange reuse, Spark's default): 4 input rows, as Kafka's (checked
    # above). But Spark plans the two sides of a self-join of a Python data source as two
    # sources: two offsets in the log (Kafka's has one), each source with its own subscription.
    logs = sorted(stream.checkpoint.glob("offsets/[0-9]*"), key=lambda p: int(p.name))
    lines = [line[:160] for line in logs[-1].read_text().splitlines()]
    assert len(lines) == 2 + 2, lines  # the version, the metadata, two sources' offsets
    stream.stop()


# -- rows and options ------------------------------------------------------------------------


def test_records_with_null_keys_and_values(spark, pulsar_lite, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'SPARK-27494: read kafka record containing null
    key/values': a null value is a tombstone (``null_value``), a null key no key."""
    url = pulsar_lite.service_url
    rows = [(None, None)] * 5 + [(str(i), None) for i in range(1, 6)]
    rows += [(None, str(i)) for i in range(6, 11)]
    (
        spark.createDataFrame(rows, "key string, value string")
        .coalesce(1)
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .mode("append")
        .save()
    )
    stream = streams(
        url,
        lambda df: df.selectExpr("CAST(key AS STRING) key", "CAST(value AS STRING) value"),
        topic=topic_name,
        startingOffsets="earliest",
    )
    stream.run()
    assert sorted(stream.rows(), key=str) == sorted(rows, key=str)


def test_min_partitions(pulsar_lite_partitioned, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'SPARK-30656: minPartitions': a micro-batch of 21
    messages in 4 partitions runs as at least 6 tasks, with every message once."""
    url = pulsar_lite_partitioned.service_url
    send(url, topic_name, range(21), batching=False)
    tasks: list[int] = []
    stream = streams(url, as_int, topic=topic_name, startingOffsets="earliest", minPartitions="6")
    stream.before = lambda frame, _: tasks.append(frame.rdd.getNumPartitions())
    stream.run()
    assert tasks == [tasks[0]] and tasks[0] >= 6, tasks
    check(stream, range(21))


def test_rate_limit_of_long_max_does_not_overflow(pulsar_lite, topic_name, streams) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'SPARK-26718 Rate limit set to Long.Max should not
    overflow integer during end offset calculation'."""
    url = pulsar_lite.service_url
    send(url, topic_name, range(5))
    stream = streams(
        url,
        as_int,
        topic=topic_name,
        startingOffsets=f'{{"{topic_name}": -1}}',
        maxOffsetsPerTrigger=str(2**63 - 1),
    )
    stream.start()
    stream.process()
    send(url, topic_name, range(30, 35))
    stream.process()
    check(stream, range(30, 35))
    stream.stop()


def test_watermark_on_the_publish_time(spark, pulsar_lite, topic_name) -> None:
    """Spark KafkaMicroBatchSourceSuite: 'KafkaSource with watermark' (and StreamNative
    PulsarMicroBatchSourceSuite: 'PulsarSource with watermark'): a windowed count over the
    publish time with a watermark, into the memory sink."""
    url = pulsar_lite.service_url
    now = time.time()
    send(url, topic_name, [1])
    counts = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .option("startingOffsets", "earliest")
        .load()
        .withWatermark("publishTime", "10 seconds")
        .groupBy(F.window("publishTime", "5 seconds").alias("window"))
        .agg(F.count("*").alias("count"))
        .select(F.col("window.start").alias("window"), "count")
    )
    name = "pulsar_watermark_" + topic_name.rsplit("-", 1)[1]
    query = counts.writeStream.format("memory").outputMode("complete").queryName(name).start()
    try:
        query.processAllAvailable()
        rows = spark.table(name).collect()
    finally:
        query.stop()
    assert len(rows) == 1, rows
    assert rows[0]["count"] == 1
    assert rows[0]["window"].timestamp() >= now - 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t", "endingOffsets": "latest"}, "'endingOffsets'.*a stream has no end"),
        ({}, "one of topic, topics or topicsPattern"),
        ({"topics": "t", "topicsPattern": "t.*"}, "topicsPattern"),
        ({"subscribe": "t"}, "use topics"),
        ({"subscribePattern": "t.*"}, "use topicsPattern"),
        (
            {"topic": "t", "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
            r"minRecordsPerTrigger \(20\) is above maxRecordsPerTrigger \(15\)",
        ),
    ],
    ids=["ending", "none", "two", "subscribe", "subscribePattern", "min-above-max"],
)
def test_bad_source_options(spark, pulsar_lite, tmp_path, options, message) -> None:
    """Spark KafkaSourceSuiteBase: 'bad source options': each is refused, naming what to
    write instead (at ``load()`` or when the query starts)."""
    with pytest.raises(Exception, match=message):
        df = (
            spark.readStream.format("pulsar")
            .option("service.url", pulsar_lite.service_url)
            .options(**options)
            .load()
        )
        query = df.writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
        try:
            query.awaitTermination(60)
        finally:
            query.stop()
