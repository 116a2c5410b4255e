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


def test_a_held_subscription_is_a_lock_the_broker_frees_with_its_holder(
    apache_pulsar, topic_name
) -> None:
    # One client holds the subscription: another's hold fails at once (ConsumerBusy),
    # until it is released; a holder whose process dies frees it with its connection.
    # (Apache Pulsar only: pulsar-lite closes the connection of a second Exclusive
    # consumer instead of answering ConsumerBusy; the lock serves transactions, which it
    # does not have.)
    import subprocess
    import sys
    import time

    from pulsar_spark.protocol import PulsarApi_pb2 as pb
    from pulsar_spark.protocol.errors import ServerError

    url = apache_pulsar.service_url
    produce(url, topic_name, [b"a", b"b"])
    with PulsarClient(url) as first, PulsarClient(url) as second:
        with first.hold_subscription(topic_name, "lock") as hold:
            assert hold.held
            t0 = time.monotonic()
            with pytest.raises(ServerError) as busy:
                second.hold_subscription(topic_name, "lock")
            assert busy.value.code == pb.ConsumerBusy
            assert time.monotonic() - t0 < 5  # at once, not retried
        assert not hold.held
        with second.hold_subscription(topic_name, "lock") as again:
            again.delete()  # through the hold
        assert not again.held
        assert "lock" not in apache_pulsar.admin.stats(topic_name)["subscriptions"]

    code = (
        "import sys, time\n"
        "from pulsar_spark.client import PulsarClient\n"
        f"hold = PulsarClient({url!r}).hold_subscription({topic_name!r}, 'lock')\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with PulsarClient(url) as client:
            with pytest.raises(ServerError):
                client.hold_subscription(topic_name, "lock")
            holder.kill()
            holder.wait()
            deadline = time.monotonic() + 10
            while True:  # the broker drops the dead holder's consumer with its connection
                try:
                    client.hold_subscription(topic_name, "lock").release()
                    break
                except ServerError:
                    assert time.monotonic() < deadline, "the dead holder's lock was not freed"
                    time.sleep(0.1)
    finally:
        holder.kill()
