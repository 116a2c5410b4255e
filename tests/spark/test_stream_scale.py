"""The stream reader's triggers at scale, driven as Spark drives it (no Spark session):
the consumers that answer GET_LAST_MESSAGE_ID are subscribed at the first trigger,
kept for the next ones, and closed by ``stop()``; partitions count once per topic."""

from __future__ import annotations

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.read_schema import ReadSchema
from pulsar_spark.spark.spark_types import spark_schema
from pulsar_spark.spark.stream.offsets import after_entry, parse_offsets
from pulsar_spark.spark.stream.reader import PulsarStreamReader
from tests.support.official import produce


def _stream(url: str, **options: str) -> PulsarStreamReader:
    parsed = parse_options({"service.url": url, **options})
    read = ReadSchema(None, "raw", None, dead_letter=False, arrow=ROW_SCHEMA)
    return PulsarStreamReader(parsed.for_stream_read(), read, spark_schema(ROW_SCHEMA))


@pytest.mark.parametrize("mode", ["durable", "nonDurable"])
def test_triggers_keep_their_consumers_and_stop_closes_them(
    apache_pulsar, topic_name, mode
) -> None:
    admin, url = apache_pulsar.admin, apache_pulsar.service_url
    admin.create_partitioned_topic(topic_name, 3)
    produce(url, topic_name, [b"a%d" % i for i in range(30)], batching_max_messages=4)
    reader = _stream(url, topic=topic_name, startingOffsets="latest", subscriptionMode=mode)
    partitions = [f"{topic_name}-partition-{i}" for i in range(3)]
    try:
        start = reader.initialOffset()  # "latest": the last ids, asked at once
        with PulsarClient(url) as client:
            ends = {p: client.get_last_message_id(p) for p in partitions}
        assert parse_offsets(start) == {p: after_entry(ends[p]) for p in partitions}
        latest = start
        for round_ in range(3):
            produce(url, topic_name, [b"r%d-%d" % (round_, i) for i in range(9)])
            latest = reader._latest_offset(parse_offsets(latest), None)
            with PulsarClient(url) as client:
                for p in partitions:
                    last = client.get_last_message_id(p)
                    assert parse_offsets(latest)[p] == after_entry(last)
        assert reader.consumers_attached == 3  # subscribed once per partition
        for p in partitions:  # one subscription each, kept between triggers
            subscriptions = admin.stats(p)["subscriptions"]
            assert len(subscriptions) == 1
            if mode == "durable":
                assert list(subscriptions) == [reader.subscription_name]
    finally:
        reader.stop()
    assert reader.consumers_attached == 0
    for p in partitions:
        subscriptions = admin.stats(p)["subscriptions"]
        if mode == "durable":  # the durable subscription stays, with no consumer
            assert list(subscriptions) == [reader.subscription_name]
            assert subscriptions[reader.subscription_name]["consumers"] == []
        else:
            assert subscriptions == {}
