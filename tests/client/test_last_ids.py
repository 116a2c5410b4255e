"""LastIds: the last message ids of many partitions at once, through consumers kept
between calls, re-established after an unload and a broker restart, closed when done."""

from __future__ import annotations

import uuid

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.names import parse_topic
from pulsar_spark.client.read.last_ids import LastIds
from tests.support.official import produce


def _one_by_one(client: PulsarClient, names) -> dict:
    return {name: client.get_last_message_id(str(name)) for name in names}


def test_many_partitions_in_one_call_and_kept(fresh_pulsar_lite, topic_name) -> None:
    broker = fresh_pulsar_lite(default_partitions=40)
    url = broker.service_url
    produce(url, topic_name, [b"%d" % i for i in range(100)], batching_max_messages=3)
    with PulsarClient(url) as client, LastIds(client._lookup) as ids:
        names = [parse_topic(p) for p in client.get_partitions(topic_name)]
        assert len(names) == 40
        first = ids.get(names)
        assert first == _one_by_one(client, names)
        assert sum(mid is not None for mid in first.values()) > 1
        assert ids.attached == 40
        produce(url, topic_name, [b"more-%d" % i for i in range(100)], batching_max_messages=3)
        second = ids.get(names)
        assert ids.attached == 40  # nothing subscribed again
        assert second == _one_by_one(client, names)
        assert second != first
        # Partitions no longer asked about are closed; the others kept.
        assert set(ids.get(names[:5])) == set(names[:5])
        assert ids.attached == 40
        assert len(ids._probes) == 5
        # A broker restart: the consumers are gone, subscribed again on the next call.
        broker.restart()
        produce(url, topic_name, [b"after-%d" % i for i in range(20)], batching_max_messages=3)
        third = ids.get(names[:5])
        assert ids.attached == 45
        assert third == _one_by_one(client, names[:5])
    assert ids._probes == {}


def test_an_empty_partition_is_none(pulsar_lite, topic_name) -> None:
    with PulsarClient(pulsar_lite.service_url) as client, LastIds(client._lookup) as ids:
        producer = client.create_producer(topic_name)
        producer.close()  # the topic exists, with nothing in it
        assert ids.get([parse_topic(topic_name)]) == {parse_topic(topic_name): None}
        ids.get([parse_topic(topic_name)])
        assert ids.attached == 1


def test_an_unload_is_followed(apache_pulsar, topic_name) -> None:
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    produce(url, topic_name, [b"a", b"b"], batching=False)
    name = parse_topic(topic_name)
    with PulsarClient(url) as client, LastIds(client._lookup) as ids:
        before = ids.get([name])[name]
        assert before == client.get_last_message_id(topic_name)
        stats = admin.stats(topic_name)["subscriptions"]
        assert len(stats) == 1  # one non-durable subscription, kept
        admin.unload(topic_name)
        produce(url, topic_name, [b"c"], batching=False)
        after = ids.get([name])[name]
        assert after == client.get_last_message_id(topic_name)
        assert after is not None and before is not None and after != before
        assert ids.attached == 2
    assert admin.stats(topic_name)["subscriptions"] == {}


@pytest.mark.parametrize("made_again", [True, False], ids=["made-again", "refused"])
def test_a_deleted_partitioned_topic_is_answered_deleted_not_an_error(
    apache_pulsar, topic_name, made_again
) -> None:
    """A stream's durable subscription on the partitions of a partitioned topic that is
    then deleted: each partition is answered empty and deleted (where the stream reports the
    loss), whether the broker makes the partition again when subscribed to or refuses to (a
    namespace without automatic topic creation: TopicNotFound again), instead of failing the
    trigger with TopicNotFound."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    if not made_again:
        namespace = f"public/no-auto-{uuid.uuid4().hex[:8]}"
        admin.create_namespace(namespace)
        admin.request(
            "POST", f"namespaces/{namespace}/autoTopicCreation", {"allowAutoTopicCreation": False}
        )
        topic_name = f"persistent://{namespace}/{topic_name.rsplit('/', 1)[1]}"
    admin.create_partitioned_topic(topic_name, 2)
    produce(url, topic_name, [b"a", b"b", b"c", b"d"], batching=False)
    with PulsarClient(url) as client, LastIds(client._lookup, subscription="s") as ids:
        names = [parse_topic(p) for p in client.get_partitions(topic_name)]
        before = ids.ends(names)
        assert all(not end.deleted for end in before.values())
        assert sum(end.last is not None for end in before.values()) >= 1
        admin.delete_partitioned_topic(topic_name)
        after = ids.ends(names)
        assert {name: (end.last, end.deleted) for name, end in after.items()} == {
            name: (None, True) for name in names
        }
        ids.acknowledge({name: before[name].last for name in names if before[name].last})
