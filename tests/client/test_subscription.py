"""Named durable subscriptions: moved forward by cumulative ack, deleted by unsubscribe.

The official client's consumer on the same subscription is the witness: it receives
from where our acknowledgement left the subscription.
"""

from __future__ import annotations

import pulsar
import pytest

from pulsar_spark.client import ClientError, PulsarClient
from tests.support.official import official_client, produce


def _first_received(url: str, topic: str, subscription: str) -> bytes:
    with official_client(url) as client:
        consumer = client.subscribe(
            topic,
            subscription,
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        try:
            return consumer.receive(10_000).data()
        finally:
            consumer.close()


def test_cumulative_ack_moves_a_durable_subscription(broker, topic_name) -> None:
    ids = produce(broker.service_url, topic_name, [b"%d" % i for i in range(100)], batching=False)
    with PulsarClient(broker.service_url) as client:
        client.acknowledge_cumulative(topic_name, "progress", ids[59])
        assert _first_received(broker.service_url, topic_name, "progress") == b"60"
        client.acknowledge_cumulative(topic_name, "progress", ids[89])
        if broker.kind == "apache":
            stats = broker.admin.stats(topic_name)["subscriptions"]["progress"]
            assert stats["msgBacklog"] == 10
            assert stats["consumers"] == []  # nothing stays attached
        assert _first_received(broker.service_url, topic_name, "progress") == b"90"
        assert len(client.unsubscribe(topic_name, "progress")) == 1
        if broker.kind == "apache":
            assert "progress" not in broker.admin.stats(topic_name)["subscriptions"]
        # Gone: a new subscription of that name starts at its initial position.
        assert _first_received(broker.service_url, topic_name, "progress") == b"0"


def test_acknowledging_needs_one_partition_and_a_message_id(partitioned_broker, topic_name) -> None:
    produce(partitioned_broker.service_url, topic_name, [b"x"] * 8)
    with PulsarClient(partitioned_broker.service_url) as client:
        with pytest.raises(ClientError, match="partitioned"):
            client.acknowledge_cumulative(topic_name, "progress", "1:2")
        with pytest.raises(ClientError, match="not a message id"):
            client.acknowledge_cumulative(f"{topic_name}-partition-0", "progress", "latest")
        with pytest.raises(ClientError, match="looks like a reader"):
            client.acknowledge_cumulative(f"{topic_name}-partition-0", "reader-x", "0:0")


def test_unsubscribing_from_a_topic_that_does_not_exist_creates_nothing(
    apache_pulsar, topic_name
) -> None:
    with PulsarClient(apache_pulsar.service_url) as client:
        assert client.unsubscribe(topic_name, "progress") == []
    assert topic_name not in apache_pulsar.admin.list_topics()
