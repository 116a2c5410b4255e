"""Streaming queries under faults (Apache Pulsar): the broker killed and restarted under a
running query, the driver killed between the offset log and the commit log, a Python
worker killed mid-read, partitions grown 2 -> 6 while the query runs.

Pulsar-to-Pulsar queries write to a broker with deduplication (the stream sink's producer
names and sequence ids are fixed per query, partition and micro-batch), so a replayed
micro-batch or a retried task is dropped by the broker: each test counts lost and
duplicated rows against what was produced and prints them (``FIGURE`` lines). Queries that
must survive a kill run in a driver of their own (:mod:`tests.support.spark_faults`,
``local[2,4]``: Spark retries failed tasks as on a cluster).
"""

from __future__ import annotations

import time

import pytest

from pulsar_spark.spark.compat import spark_version
from tests.support.admin import AdminError
from tests.support.official import produce, read_all
from tests.support.spark_faults import (
    Driver,
    copy_job,
    figure,
    multiset_gaps,
    rerun_copy,
    wait_for,
)

pytestmark = pytest.mark.skipif(
    spark_version() < (4, 2), reason="Pulsar stream sinks and maxRecordsPerTrigger: Spark 4.2+"
)

EXACT = {"lost": 0, "duplicated": 0, "unexpected": 0}


def _values(url: str, topic: str, at_least: int) -> list[bytes]:
    return [m["value"] for m in read_all(url, topic, at_least=at_least)]


def _written(admin, topic: str) -> int:
    try:
        return int(admin.stats(topic)["msgInCounter"])
    except AdminError:  # not created yet
        return 0


def test_a_broker_restart_under_a_running_query_loses_and_duplicates_nothing(
    fresh_apache_pulsar, topic_name, tmp_path, record_property
) -> None:
    """Two SIGKILL + start cycles of the broker (with its bookie and ZooKeeper) under one
    running query: first while it is caught up (the driver plans micro-batches against a
    dead broker), then while it works through a backlog (tasks read and write through
    the restart)."""
    broker = fresh_apache_pulsar(variant="dedup")
    url, admin = broker.service_url, broker.admin
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    admin.create_partitioned_topic(source, 2)
    sent = [b"b%05d" % i for i in range(2000)]
    produce(url, source, sent[:600], batching_max_messages=20)
    job = copy_job(url, source, target, tmp_path / "checkpoint", timeout=400)
    t0 = time.monotonic()
    restarts = []
    with Driver(job, tmp_path / "control") as driver:
        driver.wait_until(lambda: _written(admin, target) >= 600, 180, "catching up")
        for phase, (first, last) in enumerate(((600, 1400), (1400, 2000))):
            broker.kill()  # SIGKILL: broker, bookie and ZooKeeper at once
            time.sleep(3)  # several triggers' worth of planning against a dead broker
            restarts.append(round(broker.start(), 1))
            produce(url, source, sent[first:last], batching_max_messages=20)
            if phase == 0:  # the second kill lands in the middle of the backlog (the
                # broker's counters start again at 0 after a restart)
                driver.wait_until(lambda: _written(admin, target) >= 200, 180, "the backlog")
        driver.stop_when_caught_up()
        result = driver.wait(300)
    assert result.get("error") is None, f"{result['error']}\n{driver.tail()}"
    got = _values(url, target, len(sent))
    gaps = multiset_gaps(sent, got)
    figure(
        record_property,
        "stream_broker_restart",
        produced=len(sent),
        sink_rows=len(got),
        **gaps,
        broker_kills=len(restarts),
        tasks_failed_and_retried=driver.count("Lost task"),
        restart_seconds="+".join(map(str, restarts)),
        test_seconds=round(time.monotonic() - t0, 1),
    )
    assert gaps == EXACT


def test_a_driver_killed_between_offset_and_commit_logs_replays_into_a_dedup_sink(
    spark, apache_pulsar_dedup, topic_name, tmp_path, record_property
) -> None:
    url, admin = apache_pulsar_dedup.service_url, apache_pulsar_dedup.admin
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"d%04d" % i for i in range(400)]
    produce(url, source, sent[:300], batching_max_messages=20)
    checkpoint, control = tmp_path / "checkpoint", tmp_path / "control"
    job = copy_job(url, source, target, checkpoint)
    job["sink_format"] = "pulsar_hanging"
    t0 = time.monotonic()
    with Driver(job, control, PULSAR_FAULT_HANG_BATCH="1") as driver:
        driver.wait_until(lambda: (control / "committing-1").exists(), 180, "batch 1's commit")
        # Batch 1: in the offset log, its rows at the broker, not in the commit log.
        assert (checkpoint / "offsets" / "1").exists()
        assert not (checkpoint / "commits" / "1").exists()
        killed = driver.kill()
    at_kill = _written(admin, target)
    produce(url, source, sent[300:], batching_max_messages=20)
    # The restart: this process's Spark (a new driver; the checkpoint is all it shares).
    rerun_copy(spark, copy_job(url, source, target, checkpoint))
    assert (checkpoint / "commits" / "1").exists()  # the replayed batch committed
    got = _values(url, target, len(sent))
    gaps = multiset_gaps(sent, got)
    figure(
        record_property,
        "stream_driver_killed",
        produced=len(sent),
        sink_rows=len(got),
        **gaps,
        rows_at_broker_when_killed=at_kill,
        replayed_batch=1,
        processes_killed=killed,
        test_seconds=round(time.monotonic() - t0, 1),
    )
    assert at_kill == 200  # batches 0 and 1 were written before the kill
    assert gaps == EXACT


def test_a_killed_python_worker_in_a_stream_is_retried_with_exact_rows(
    apache_pulsar_dedup, topic_name, tmp_path, record_property
) -> None:
    url = apache_pulsar_dedup.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    apache_pulsar_dedup.admin.create_partitioned_topic(source, 2)
    sent = [b"s%04d" % i for i in range(1200)]
    produce(url, source, sent, batching_max_messages=20)
    job = copy_job(url, source, target, tmp_path / "checkpoint", trigger={"availableNow": True})
    job["source_format"] = "pulsar_killing"
    job["source_options"]["maxRecordsPerTrigger"] = "600"
    t0 = time.monotonic()
    with Driver(job, tmp_path / "control") as driver:
        result = driver.wait(300)
    assert result.get("error") is None, f"{result['error']}\n{driver.tail()}"
    assert (tmp_path / "control" / "killed-stream-worker").exists()
    assert "Python worker exited unexpectedly" in driver.tail(500_000), driver.tail()
    got = _values(url, target, len(sent))
    gaps = multiset_gaps(sent, got)
    figure(
        record_property,
        "stream_worker_killed",
        produced=len(sent),
        sink_rows=len(got),
        **gaps,
        workers_killed=1,
        test_seconds=round(time.monotonic() - t0, 1),
    )
    assert gaps == EXACT


def test_partitions_grown_while_a_query_runs_are_read_once(
    spark, apache_pulsar, topic_name, tmp_path, record_property
) -> None:
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 2)
    sent = [b"g%04d" % i for i in range(900)]
    produce(url, topic_name, sent[:300], batching_max_messages=10)
    batches: dict[int, list[tuple[bytes, int]]] = {}

    def sink(frame, batch_id: int) -> None:  # keyed by batch: a replay overwrites
        rows = frame.select("value", "partition").collect()
        batches[batch_id] = [(bytes(r.value), r.partition) for r in rows]

    def rows() -> list[tuple[bytes, int]]:
        if not query.isActive:  # failed: say why at once
            msg = f"the query ended: {query.exception()}"
            raise AssertionError(msg)
        return [row for _, got in sorted(batches.items()) for row in got]

    df = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .option("startingOffsets", "earliest")
        .load()
    )
    t0 = time.monotonic()
    query = (
        df.writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        wait_for(lambda: len(rows()) >= 300, 120, "the first 300 rows")
        admin.update_partitions(topic_name, 6)
        grown = time.monotonic()
        produce(url, topic_name, sent[300:], batching_max_messages=10)
        wait_for(lambda: any(p >= 2 for _, p in rows()), 120, "rows of the new partitions")
        seen_new = time.monotonic() - grown
        wait_for(lambda: len(rows()) >= len(sent), 120, "every row")
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None, query.exception()
    got = [row for _, found in sorted(batches.items()) for row in found]
    gaps = multiset_gaps(sent, [v for v, _ in got])
    figure(
        record_property,
        "stream_partitions_grown",
        produced=len(sent),
        sink_rows=len(got),
        **gaps,
        partitions_read=len({p for _, p in got}),
        new_partitions_read_after_s=round(seen_new, 1),
        test_seconds=round(time.monotonic() - t0, 1),
    )
    assert {p for _, p in got} == set(range(6))
    assert gaps == EXACT
