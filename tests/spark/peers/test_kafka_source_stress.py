"""Spark's ``KafkaSourceStressSuite`` (in ``KafkaMicroBatchSourceSuite.scala``), translated to
Pulsar and bounded: a ``topicsPattern`` stream from latest, with ``failOnDataLoss=false``,
under a short random sequence (Hypothesis draws it; a different one each run, never shrunk) of
add data, add a topic matching the pattern, add partitions, stop and start the query, delete a
topic while the query runs. After each step the query processes what is there and what it
read must equal, as a multiset, what was written since it started.

The longer seeded run of the same kind is ``tests/spark/test_stress.py``.
"""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.spark.peers.support import send

ACTIONS = ("add data", "add topic", "add partitions", "stop/start", "delete topic")


@settings(
    max_examples=1,
    deadline=None,
    database=None,
    phases=[Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(st.sampled_from(ACTIONS), min_size=6, max_size=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_stress_with_multiple_topics_and_partitions(
    apache_pulsar, topic_name, streams, steps, seed
) -> None:
    """Spark KafkaSourceStressSuite: 'stress test with multiple topics and partitions'."""
    rnd = random.Random(seed)  # drawn up front: a replayed example draws the same
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    topics: dict[str, int] = {}  # name -> partitions

    def add_topic() -> str:
        name = f"{topic_name}-s{len(topics)}"
        topics[name] = rnd.randint(1, 3)
        admin.create_partitioned_topic(name, topics[name])
        return name

    for _ in range(3):
        send(url, add_topic(), range(101, 106))  # before the start: not read
    stream = streams(url, topicsPattern=f"{topic_name}-s.*", failOnDataLoss="false")
    stream.start()
    stream.process()
    expected: list[str] = []
    for step, action in enumerate(steps):
        if action == "add topic":
            target = add_topic()
        elif action == "add partitions":
            target = rnd.choice(sorted(topics))
            topics[target] += rnd.randint(1, 2)
            admin.update_partitions(target, topics[target])
        elif action == "stop/start":
            stream.stop()
            target = rnd.choice(sorted(topics))
        elif action == "delete topic" and len(topics) > 1:
            deleted = rnd.choice(sorted(topics)[1:])  # never the first
            del topics[deleted]
            admin.delete_partitioned_topic(deleted)
            target = rnd.choice(sorted(topics))
        else:
            target = rnd.choice(sorted(topics))
        values = [f"{step}-{i}" for i in range(rnd.randint(1, 12))]
        send(url, target, values, batching=rnd.random() < 0.5)
        expected += values
        if action == "stop/start":
            stream.start()
        stream.process()
        assert Counter(stream.values()) == Counter(expected), (step, action, steps)
    stream.stop()
