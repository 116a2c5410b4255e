"""Spark's ``KafkaDontFailOnDataLossSuite`` (with ``KafkaSourceStressForDontFailOnDataLossSuite``),
translated to Pulsar: Kafka's retention ageing records out is a truncation of the topic's
closed ledgers (Apache Pulsar), and its topic churn the same churn of Pulsar topics under a
``topicsPattern`` stream. With ``failOnDataLoss=false`` a read starting where data is gone goes
on with what is left, and never returns a record twice.
"""

from __future__ import annotations

import os
import random
import time

import pytest

from tests.spark.peers.support import send, wait_until

SEED = int(os.environ.get("PULSAR_SPARK_PEERS_SEED", "23"))


@pytest.fixture
def truncated(apache_pulsar, topic_name) -> tuple[str, str]:
    """A topic whose first 25 of 50 messages are gone (its first ledger truncated away);
    (topic, the first message's id)."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    first = send(url, topic_name, range(25), batching=False)[0]
    admin.unload(topic_name)  # the next write opens a new ledger
    send(url, topic_name, range(25, 50), batching=False)
    admin.request("DELETE", f"{topic_name.replace('://', '/')}/truncate")
    return topic_name, first


def _options(topic: str, first: str) -> dict[str, str]:
    return {
        "topic": topic,
        "startingOffsets": f'{{"{topic}": "{first}"}}',  # where the data is gone
        "failOnDataLoss": "false",
    }


def _check(values: list[str]) -> None:
    assert len(set(values)) == len(values), f"{values} holds duplicates"
    assert 0 < len(values) < 50  # some were removed, so the test means something
    assert sorted(map(int, values)) == list(range(25, 50))


def test_fail_on_data_loss_false_stream_returns_no_duplicates(
    apache_pulsar, truncated, streams
) -> None:
    """Spark KafkaDontFailOnDataLossSuite: 'failOnDataLoss=false should not return duplicated
    records: microbatch v2'."""
    stream = streams(apache_pulsar.service_url, **_options(*truncated))
    stream.start()
    stream.process()
    stream.stop()
    _check(stream.values())


def test_fail_on_data_loss_false_batch_returns_no_duplicates(
    apache_pulsar, truncated, read_pulsar
) -> None:
    """Spark KafkaDontFailOnDataLossSuite: 'failOnDataLoss=false should not return duplicated
    records: batch v2'."""
    df = read_pulsar(apache_pulsar.service_url, **_options(*truncated))
    _check([r.value for r in df.selectExpr("CAST(value AS STRING) value").collect()])


def test_stress_for_fail_on_data_loss_false(apache_pulsar, topic_name, spark, tmp_path) -> None:
    """Spark KafkaSourceStressForDontFailOnDataLossSuite: 'stress test for
    failOnDataLoss=false': topics matching the pattern are created, deleted, created again and
    written at random (a fixed number of steps, seeded) under a running query, which must not
    fail; what it read is only what was written."""
    rng = random.Random(SEED)
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    written: set[str] = set()
    got: list[str] = []

    def sink(frame, _batch_id: int) -> None:
        got.extend(r.value for r in frame.selectExpr("CAST(value AS STRING) value").collect())

    df = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topicsPattern", f"{topic_name}-.*")
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false")
        .load()
    )
    live: list[str] = []
    deleted: list[str] = []
    admin.create_topic(f"{topic_name}-0")
    live.append(f"{topic_name}-0")
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        for step in range(24):
            action = rng.randrange(10)
            if action == 0:
                topic = f"{topic_name}-{step + 1}"
                admin.create_topic(topic)
                live.append(topic)
            elif action == 1 and len(live) > 1:
                topic = live.pop(rng.randrange(len(live)))
                admin.delete(topic)
                deleted.append(topic)
            elif action == 2 and deleted:
                topic = deleted.pop(rng.randrange(len(deleted)))
                admin.create_topic(topic)
                live.append(topic)
            elif action == 3:
                time.sleep(0.1)
            else:
                for topic in live:
                    values = [f"{step}/{topic[-2:]}/{i}" for i in range(rng.randrange(10))]
                    if values:
                        send(url, topic, values, batching=False)
                        written.update(values)
            assert query.exception() is None, query.exception()
        wait_until(lambda: bool(got) or query.exception() is not None, 30, "rows")
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    assert set(got) <= written
