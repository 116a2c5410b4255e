"""Spark tasks reuse their Python worker's client (spark/worker_clients.py): a read of
eight partitions costs the broker a connection per worker, not one per task, and a
broker restart between two queries leaves the pooled clients usable.

pulsar-lite with eight partitions per topic, behind a fault proxy that counts the
connections (it rewrites lookups to itself, so every connection passes through it).
"""

from __future__ import annotations

from pulsar_spark.client import PulsarClient

PARTITIONS = 8
PER_PARTITION = 25


def _fill(url: str, topic: str, rounds: int) -> None:
    with PulsarClient(url) as client, client.create_producer(topic) as producer:
        for i in range(PARTITIONS * PER_PARTITION * rounds):
            producer.send(b"v%d" % i)
        producer.flush()


def test_tasks_of_a_worker_share_a_connection_across_a_restart(
    spark, fresh_pulsar_lite, fault_proxy, topic_name: str
) -> None:
    broker = fresh_pulsar_lite(default_partitions=PARTITIONS)
    proxy = fault_proxy(broker)
    url = proxy.service_url
    _fill(broker.service_url, topic_name, 1)

    def read() -> list:
        frame = spark.read.format("pulsar").option("service.url", url).option("topic", topic_name)
        return frame.load().select("value", "topic").collect()

    before = proxy.connections_accepted
    rows = read()
    assert len(rows) == PARTITIONS * PER_PARTITION
    tasks_connections = proxy.connections_accepted - before
    # Planning opens its own clients (schema, partitions, ends: a few connections on the
    # driver's Python side); the 8 tasks run in at most 2 Python workers at once (local[2]),
    # each lending its pooled client to its next task. One client per task would be >= 8
    # connections for the tasks alone.
    assert tasks_connections <= 6, proxy.stats()
    print(f"connections for a read of {PARTITIONS} partitions: {tasks_connections}")

    # A broker restart closes every pooled connection; the next query reconnects.
    broker.restart()
    _fill(broker.service_url, topic_name, 1)
    rows = read()
    assert len(rows) == 2 * PARTITIONS * PER_PARTITION
    assert sorted(row.value for row in rows) == sorted(
        b"v%d" % i for _ in range(2) for i in range(PARTITIONS * PER_PARTITION)
    )
