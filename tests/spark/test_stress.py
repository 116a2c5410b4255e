"""A random stress run of a pattern stream (Apache Pulsar), after Spark's
``KafkaSourceStressSuite``: 30 seeded iterations of add data, add a topic matching the
pattern (non-partitioned or with 1-3 partitions), grow a topic's partitions, stop and
start the query from its checkpoint, unload a topic. After every iteration the query
processes what is available and the sink (rows kept by micro-batch id, so a batch
replayed after a restart replaces itself) must equal the expected multiset.

``PULSAR_SPARK_STRESS_SEED`` and ``PULSAR_SPARK_STRESS_ITERATIONS`` change the run.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter

from tests.support.faults import unload
from tests.support.official import produce
from tests.support.spark_faults import figure, multiset_gaps

SEED = int(os.environ.get("PULSAR_SPARK_STRESS_SEED", "14"))
ITERATIONS = int(os.environ.get("PULSAR_SPARK_STRESS_ITERATIONS", "30"))
ACTIONS = ("add data", "add topic", "grow partitions", "stop/start", "unload")
WEIGHTS = (4, 2, 2, 2, 2)


def test_random_stress_of_a_pattern_stream(
    spark, apache_pulsar, topic_name, tmp_path, record_property
) -> None:
    rng = random.Random(SEED)
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    base = topic_name.rsplit("/", 1)[1]
    topics: dict[str, int] = {}  # name -> partitions (0: not partitioned)
    expected: list[bytes] = []
    batches: dict[int, list[bytes]] = {}

    def add_topic(partitions: int) -> str:
        name = f"{topic_name}-t{len(topics)}"
        if partitions:
            admin.create_partitioned_topic(name, partitions)
        else:
            admin.create_topic(name)
        topics[name] = partitions
        return name

    def add_data(topic: str) -> None:
        values = [b"%s/%d" % (topic[-3:].encode(), len(expected) + i) for i in range(40)]
        values = values[: rng.randint(1, 40)]
        produce(url, topic, values, batching_max_messages=rng.choice([2, 5, 50]))
        expected.extend(values)

    def sink(frame, batch_id: int) -> None:
        batches[batch_id] = [bytes(r.value) for r in frame.select("value").collect()]

    def start():
        df = (
            spark.readStream.format("pulsar")
            .option("service.url", url)
            .option("topicsPattern", f"public/default/{base}-t.*")
            .option("startingOffsets", "earliest")
            .load()
        )
        return (
            df.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="300 milliseconds")
            .start()
        )

    add_data(add_topic(2))
    done: Counter[str] = Counter()
    t0 = time.monotonic()
    query = start()
    try:
        # Each action at least once, then at random.
        plan = rng.sample(ACTIONS, len(ACTIONS))
        plan += rng.choices(ACTIONS, WEIGHTS, k=max(0, ITERATIONS - len(plan)))
        for iteration, action in enumerate(plan[:ITERATIONS]):
            partitioned = [t for t, n in topics.items() if 0 < n < 6]
            if action == "grow partitions" and not partitioned:
                action = "add topic"
            if action == "add data":
                add_data(rng.choice(sorted(topics)))
            elif action == "add topic":
                add_data(add_topic(rng.choice([0, 1, 2, 3])))
            elif action == "grow partitions":
                topic = rng.choice(sorted(partitioned))
                topics[topic] = min(6, topics[topic] + rng.randint(1, 2))
                admin.update_partitions(topic, topics[topic])
                add_data(topic)
            elif action == "stop/start":
                query.stop()
                assert query.exception() is None, query.exception()
                add_data(rng.choice(sorted(topics)))
                query = start()
            else:
                topic = rng.choice(sorted(topics))
                unload(admin, topic)
                add_data(topic)
            done[action] += 1
            query.processAllAvailable()
            got = [v for _, rows in sorted(batches.items()) for v in rows]
            gaps = multiset_gaps(expected, got)
            assert gaps == {"lost": 0, "duplicated": 0, "unexpected": 0}, (
                f"iteration {iteration} ({action}, seed {SEED}): {gaps}"
            )
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    figure(
        record_property,
        "stress",
        seed=SEED,
        iterations_passed=f"{ITERATIONS}/{ITERATIONS}",
        rows=len(expected),
        topics=len(topics),
        partitions=sum(max(n, 1) for n in topics.values()),
        micro_batches=len(batches),
        **{a.replace(" ", "_").replace("/", "_"): done[a] for a in ACTIONS},
        seconds=round(time.monotonic() - t0, 1),
    )
