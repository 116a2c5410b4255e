"""StreamNative pulsar-spark's ``PulsarMicroBatchSourceTriggerAvailableNowSuite`` (release
3.4.1.3): the source suite's starting positions, each query run with ``Trigger.AvailableNow``
to its end and started again from its checkpoint after data is added."""

from __future__ import annotations

import time

from tests.spark.peers.support import check, pattern_from_the_fourth, plus_one, send


def test_assign_from_latest_offsets_available_now(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarMicroBatchSourceTriggerAvailableNowSuite: 'assign from latest
    offsets: available now'."""
    url = pulsar_lite.service_url
    send(url, topic_name, [-1, 0, 1])
    stream = streams(
        url, plus_one, topic=topic_name, startingOffsets="latest", failOnDataLoss="true"
    )
    stream.run()  # the start resolved: what came before is not read
    check(stream, [])
    send(url, topic_name, [2, 3])
    stream.run()
    check(stream, [3, 4])
    send(url, topic_name, [4, 5, 6])
    stream.run()
    check(stream, range(3, 8))
    send(url, topic_name, [7, 8])
    stream.run()
    check(stream, range(3, 10))


def test_subscribing_topic_by_name_from_earliest_offsets_available_now(
    pulsar_lite, topic_name, streams
) -> None:
    """StreamNative PulsarMicroBatchSourceTriggerAvailableNowSuite: 'subscribing topic by
    name from earliest offsets: available now'."""
    url = pulsar_lite.service_url
    send(url, topic_name, [1, 2, 3])
    stream = streams(
        url, plus_one, topics=topic_name, startingOffsets="earliest", failOnDataLoss="true"
    )
    stream.run()
    check(stream, [2, 3, 4])
    send(url, topic_name, [4, 5, 6])
    stream.run()
    check(stream, range(2, 8))
    send(url, topic_name, range(7, 17))
    stream.run()
    check(stream, range(2, 18))


def test_assign_from_time_available_now(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarMicroBatchSourceTriggerAvailableNowSuite: 'assign from time:
    available now'."""
    url = pulsar_lite.service_url
    time0 = int(time.time() * 1000) - 10_000
    send(url, topic_name, [1, 2, 3])
    stream = streams(url, plus_one, topic=topic_name, startingTime=str(time0))
    stream.run()
    send(url, topic_name, [7, 8, 9])
    stream.run()
    check(stream, [2, 3, 4, 8, 9, 10])


def test_subscribing_topic_by_pattern_from_specific_offsets_available_now(
    apache_pulsar, topic_name, streams
) -> None:
    """StreamNative PulsarMicroBatchSourceTriggerAvailableNowSuite: 'subscribing topic by
    pattern from specific offsets: available now' (the position as a readable message id)."""
    url = apache_pulsar.service_url
    stream, topic = pattern_from_the_fourth(streams, url, topic_name)
    send(url, topic, [7])
    stream.run()
    expected = [1, 2, 3, 10, 11, 12, 7]
    check(stream, expected)
    send(url, topic, range(30, 35))
    stream.run()
    check(stream, [*expected, *range(30, 35)])
