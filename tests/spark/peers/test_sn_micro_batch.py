"""StreamNative pulsar-spark's ``PulsarMicroBatchSourceSuite`` (with its ``PulsarSourceTTLSuite``;
release 3.4.1.3), translated to this connector: the same options; Apache Pulsar for topic
deletions and patterns. Their watermark test is in ``test_kafka_micro_batch.py`` (the same
scenario as Spark's).
"""

from __future__ import annotations

import pytest

from tests.spark.peers.support import (
    as_int,
    check,
    check_self_join,
    error_text,
    pattern_with_a_topic_replaced,
    send,
    start_between,
    wait_until,
)
from tests.support.official import read_all


def test_data_loss_with_topic_deletion_across_batches(
    spark, apache_pulsar, topic_name, tmp_path
) -> None:
    """StreamNative PulsarSourceTTLSuite: 'test data loss with topic deletion across
    batches': a Pulsar-to-Pulsar query with ``failOnDataLoss=false``; the input topic deleted
    and created again between micro-batches (as a TTL would leave it); the query goes on,
    reads the new topic from its first message, and stays active without an exception."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    admin.create_topic(source)
    admin.create_topic(target)
    query = (
        spark.readStream.format("pulsar")
        .option("startingOffsets", "earliest")
        .option("service.url", url)
        .option("failOnDataLoss", "false")
        .option("topic", source)
        .load()
        .selectExpr("CAST(value AS STRING) value")
        .writeStream.trigger(processingTime="200 milliseconds")
        .queryName("continuous_data_loss_test")
        .format("pulsar")
        .option("service.url", url)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "c"))
        .start()
    )

    def output() -> list[int]:
        assert query.exception() is None, query.exception()
        return sorted(int(m["value"]) for m in read_all(url, target))

    try:
        send(url, source, range(10))
        wait_until(lambda: output() == list(range(10)), 60, "the first ten")
        admin.delete(source)
        admin.create_topic(source)
        send(url, source, range(10, 20))
        wait_until(lambda: output() == list(range(20)), 60, "all twenty")
        assert query.isActive
        assert query.exception() is None
    finally:
        query.stop()


def test_input_row_metrics(pulsar_lite_partitioned, topic_name, streams) -> None:
    """StreamNative PulsarMicroBatchSourceSuite: 'input row metrics': the progress counts the
    rows read, 3 then 5, and 1 after a restart."""
    url = pulsar_lite_partitioned.service_url
    stream = start_between(streams, url, topic_name, topic=topic_name)
    check(stream, [2, 3, 4])
    assert stream.progress_rows() == 3
    send(url, topic_name, [4, 5])
    stream.process()
    check(stream, range(2, 7))
    assert stream.progress_rows() == 5
    stream.stop()
    stream.start()
    send(url, topic_name, [6])
    stream.process()
    check(stream, range(2, 8))
    assert stream.progress_rows() == 1
    stream.stop()


def test_subscribing_topic_by_pattern_with_topic_deletions(
    apache_pulsar, topic_name, streams
) -> None:
    """StreamNative PulsarMicroBatchSourceSuite: 'subscribing topic by pattern with topic
    deletions' (non-partitioned topics; Spark's Kafka suite's, with partitions, is in
    ``test_kafka_micro_batch.py``)."""
    admin = apache_pulsar.admin
    pattern_with_a_topic_replaced(
        streams, apache_pulsar.service_url, topic_name, admin.create_topic, admin.delete
    )


def test_subscribe_topic_by_pattern_with_topic_recreation_between_batches(
    apache_pulsar, topic_name, streams
) -> None:
    """StreamNative PulsarMicroBatchSourceSuite: 'subscribe topic by pattern with topic
    recreation between batches': with ``failOnDataLoss=true`` the restarted query fails,
    reporting the potential data loss."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    good, bad = f"{topic_name}-good", f"{topic_name}-bad"
    for topic, values in ((good, [1, 3]), (bad, [2, 4])):
        admin.create_topic(topic)
        send(url, topic, values)
    stream = streams(
        url,
        as_int,
        topicsPattern=f"{topic_name}-.*",
        failOnDataLoss="true",
        startingOffsets="earliest",
    )
    stream.start()
    stream.process()
    check(stream, [1, 2, 3, 4])
    stream.stop()
    admin.delete(bad)
    admin.create_topic(bad)
    send(url, bad, [6, 7, 8])
    stream.start()
    with pytest.raises(Exception) as failure:
        stream.process()
    text = error_text(failure.value)
    assert "DataLossError" in text and bad.rsplit("/", 1)[1] in text, text


def test_delete_a_topic_when_a_spark_job_is_running(apache_pulsar, topic_name, streams):
    """StreamNative PulsarMicroBatchSourceSuite: 'delete a topic when a Spark job is
    running': the topic is deleted before the micro-batch's tasks read it; with
    ``failOnDataLoss=false`` the query does not fail."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    send(url, topic_name, range(1, 11))
    stream = streams(
        url,
        as_int,
        topic=topic_name,
        startingOffsets="earliest",
        pollTimeoutMs="1000",
        failOnDataLoss="false",
    )
    stream.before = lambda frame, batch_id: admin.delete(topic_name)
    stream.start()
    stream.process()
    stream.stop()
    assert set(stream.ints()) <= set(range(1, 11))


def test_stream_stream_self_join(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarMicroBatchSourceSuite: 'ensure stream-stream self-join generates
    only one offset in log and correct metrics' (a non-partitioned topic)."""
    stream = check_self_join(streams, pulsar_lite.service_url, topic_name)
    # One scan runs (exchange reuse: 4 input rows, checked); the offset log holds two sources'
    # offsets (see the Kafka suite's test).
    stream.stop()
