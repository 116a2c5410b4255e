"""Exactly-once writes without broker deduplication (issue 26): ``deliveryGuarantee=
exactly-once`` on Apache Pulsar with transactions on and deduplication off
(``apache_pulsar_txn``).

Each test counts lost and duplicated rows against what was meant to be written, as our
reader and the Java client's consumer (default isolation: committed only) see them, and
prints them (``FIGURE`` lines). Queries that must survive a kill run in a driver of their
own (:mod:`tests.support.spark_faults`, ``local[2,4]``: Spark retries failed tasks).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.spark.compat import spark_version
from pulsar_spark.spark.stream.commit_log import CommitLog, log_topic
from tests.support.java_txn import java_consume_all
from tests.support.official import produce
from tests.support.spark_cluster import StandaloneCluster
from tests.support.spark_faults import (
    FAULT_DIR,
    REPO,
    Driver,
    copy_job,
    figure,
    multiset_gaps,
    rerun_copy,
)

EXACT = {"lost": 0, "duplicated": 0, "unexpected": 0}
T = TypeVar("T")
#: The error classes of a broker that stays unreachable or unresponsive.
RETRIABLE = ("OperationTimeout", "ConnectError", "ConnectionClosed")
EXACTLY_ONCE = {"deliveryGuarantee": "exactly-once", "transactionTimeout": "5m"}


def _values(url: str, topic: str) -> list[bytes]:
    with PulsarClient(url) as client:
        return [v for b in client.read_batches(topic) for v in b.column("value").to_pylist()]


def _read_back(
    url: str, topic: str, sent: list[bytes]
) -> tuple[list[bytes], dict[str, int], list[str], dict[str, int]]:
    """What our reader and the Java client's consumer (default isolation) find in
    ``topic``, each with its gaps against ``sent``."""
    got = _values(url, topic)
    java = java_consume_all(url, topic, idle=3)
    return got, multiset_gaps(sent, got), java, multiset_gaps([v.decode() for v in sent], java)


def _next_job(spark, url: str, topic: str) -> None:
    """A one-row exactly-once batch job to ``topic``: as it plans, it finishes the
    commits other jobs of the namespace left midway."""
    other = spark.createDataFrame([("x",)], "value string")
    other.write.format("pulsar").option("service.url", url).option("topic", topic).options(
        **EXACTLY_ONCE
    ).mode("append").save()


def test_the_sinks_bookkeeping_topics_live_beside_the_target() -> None:
    from pulsar_spark.spark.errors import PulsarWriteError
    from pulsar_spark.spark.txn_registry import registry_topic

    assert log_topic(None, "persistent://t/n/out", "q1") == (
        "persistent://t/n/__pulsar_spark_txn_log-q1"
    )
    assert log_topic(None, "out", "q1") == "persistent://public/default/__pulsar_spark_txn_log-q1"
    assert log_topic("persistent://a/b/log-{query}", None, "q1") == "persistent://a/b/log-q1"
    assert registry_topic(None, "t/n/out") == "persistent://t/n/__pulsar_spark_txns"
    assert (
        registry_topic("persistent://a/b/log", "t/n/out") == "persistent://a/b/__pulsar_spark_txns"
    )
    with pytest.raises(PulsarWriteError, match="transactionLogTopic"):
        registry_topic(None, None)


def test_a_batch_write_is_committed_once_and_whole(
    spark, apache_pulsar_txn, topic_name, record_property
) -> None:
    url = apache_pulsar_txn.service_url
    apache_pulsar_txn.admin.create_partitioned_topic(topic_name, 3)
    sent = [f"row-{i:05d}" for i in range(3000)]
    df = spark.createDataFrame(
        [(f"k{i % 11}", v) for i, v in enumerate(sent)], "key string, value string"
    )
    t0 = time.monotonic()
    (
        df.repartition(4)
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .options(**EXACTLY_ONCE)
        .mode("append")
        .save()
    )
    seconds = time.monotonic() - t0
    ours = [v.decode() for v in _values(url, topic_name)]
    java = java_consume_all(url, topic_name, idle=3)
    gaps, java_gaps = multiset_gaps(sent, ours), multiset_gaps(sent, java)
    figure(record_property, "exactly_once_batch_write", rows=len(sent), **gaps,
           java_rows=len(java), write_seconds=round(seconds, 2))  # fmt: skip
    assert gaps == EXACT and java_gaps == EXACT


def test_exactly_once_on_a_broker_without_transactions_fails_before_writing(
    spark, pulsar_lite, apache_pulsar, topic_name
) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    for url in (pulsar_lite.service_url, apache_pulsar.service_url):
        with pytest.raises(Exception, match="deliveryGuarantee") as failed:
            (
                df.write.format("pulsar")
                .option("service.url", url)
                .option("topic", topic_name)
                .options(**EXACTLY_ONCE)
                .mode("append")
                .save()
            )
        assert "transactionCoordinatorEnabled" in str(failed.value)
        assert _values(url, topic_name) == []


def _write_job(url: str, source: str, target: str, sink_format: str) -> dict:
    return {
        "mode": "write",
        "source_format": "pulsar",
        "source_options": {"service.url": url, "topic": source},
        "partitions": 3,
        "sink_format": sink_format,
        "sink_options": {"service.url": url, "topic": target, **EXACTLY_ONCE},
    }


def test_a_python_worker_killed_mid_write_leaves_nothing_twice(
    apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # The first attempt of a task sends a batch (acknowledged, in its transaction), then its
    # Python worker dies: Spark retries the task, whose new transaction holds the rows; the
    # dead attempt's never commits (it times out, or is aborted).
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"w%05d" % i for i in range(6000)]
    produce(url, source, sent, batching_max_messages=500)
    control = tmp_path / "control"
    t0 = time.monotonic()
    with Driver(_write_job(url, source, target, "pulsar_killing"), control) as driver:
        result = driver.wait(300)
    assert result.get("error") is None, result
    assert (control / "killed-write-worker").exists()
    got, gaps, java, java_gaps = _read_back(url, target, sent)
    figure(record_property, "exactly_once_worker_killed", rows=len(sent), sink_rows=len(got),
           **gaps, java_rows=len(java), test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert gaps == EXACT
    assert java_gaps == EXACT


def test_a_speculative_copy_wins_and_the_stragglers_rows_never_show(
    apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # Real speculation, on a standalone cluster whose two workers are two hosts to Spark.
    # Partition 0's first attempt sends a batch in its transaction and stalls; Spark runs
    # a speculative copy on the other host, which wins. The straggler's transaction never
    # reaches the driver: found in the registry, it is aborted as the job commits.
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"p%05d" % i for i in range(2000)]
    produce(url, source, sent, batching_max_messages=200)
    control = tmp_path / "control"
    job = _write_job(url, source, target, "pulsar_slow")
    job["partitions"] = 4
    t0 = time.monotonic()
    with StandaloneCluster(tmp_path / "cluster") as cluster:
        job["master"] = cluster.url
        job["conf"] = _speculating(control)
        started = time.monotonic() - t0
        with Driver(job, control) as driver:
            result = driver.wait(300)
            aborted = driver.count("aborted 1 transactions of task attempts")
    assert result.get("error") is None, f"{result['error']}\n{driver.tail()}"
    assert (control / "slow-write").exists()
    assert (control / "attempt-0-1").exists(), "no second attempt of partition 0 ran"
    got, gaps, java, java_gaps = _read_back(url, target, sent)
    figure(record_property, "exactly_once_speculation", rows=len(sent), sink_rows=len(got),
           **gaps, java_rows=len(java), stragglers_aborted=aborted,
           cluster_start_seconds=round(started, 1), job_seconds=result["seconds"],
           test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert gaps == EXACT
    assert java_gaps == EXACT
    assert aborted >= 1  # under load, Spark may overtake other slow tasks too


def _gave_up_on_the_broker(result: dict, driver: Driver, broker) -> str | None:
    """None when the job succeeded; else its failure (:func:`_failure`), which must be
    that the broker stayed unreachable or unresponsive past the client's operation
    timeout (any other failure fails the test). After a failure, the broker's errors
    are printed (pytest shows them if the test fails later on)."""
    error = result.get("error")
    if error is None:
        return None
    lines = broker.log_path.read_text(errors="replace").splitlines()
    errors = [line for line in lines if " ERROR " in line or "ransaction buffer" in line]
    print("the job failed; the broker's errors since its start:", *errors[-40:], sep="\n")
    cause = _failure(result, driver)
    assert any(name in cause for name in RETRIABLE), f"{error}\n{driver.tail()}"
    return cause


def _again(run: Callable[[], T], attempts: int = 3) -> tuple[T, int]:
    """Runs ``run`` (a failed job or query again, or a read), once more while it fails
    for a broker still recovering (a retriable error), as a user would; its result and
    how many runs it took."""
    for attempt in range(1, attempts + 1):
        try:
            return run(), attempt
        except Exception as exc:  # noqa: PERF203 - a retry loop
            if attempt == attempts or not any(name in str(exc) for name in RETRIABLE):
                raise
            time.sleep(10)
    raise AssertionError  # not reached: the last attempt returns or raises


def _failure(result: dict, driver: Driver) -> str:
    """The job's error with the driver log's account of the final failure: Spark's
    message may hold the cause ("... perform latestOffset: Traceback ...") or not
    ("Writing job failed."), and the log's last failure report has it (earlier lines,
    such as retried tasks' errors, are left out)."""
    log = driver.log_path.read_text(errors="replace")
    start = max(log.rfind(mark) for mark in ("terminated with error", "is aborting."))
    return str(result.get("error")) + ("" if start < 0 else log[start:])


def _exactly_once_write(spark, url: str, source: str, target: str) -> None:
    """A plain exactly-once batch copy of ``source``'s keys and values to ``target``."""
    (
        spark.read.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .load()
        .select("key", "value")
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", target)
        .options(**EXACTLY_ONCE)
        .mode("append")
        .save()
    )


def test_a_broker_restarted_mid_write_leaves_each_row_once(
    spark, fresh_apache_pulsar, topic_name, tmp_path, record_property
) -> None:
    # The broker restarts while a task sends batch after batch in its transaction, and
    # other tasks start while it is down (they wait for it). Either the transaction lives
    # on (every receipt was in: the producer re-attaches and goes on) or a send was in
    # doubt or unconfirmed: the transaction fails, the task fails and aborts it, and
    # Spark's retry writes the partition again in a new one. Either way: each row once.
    broker = fresh_apache_pulsar(variant="txn")
    url = broker.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"r%05d" % i for i in range(3000)]
    produce(url, source, sent, batching_max_messages=200)
    control = tmp_path / "control"
    job = _write_job(url, source, target, "pulsar_paced")
    job["conf"] = {"spark.sql.execution.arrow.maxRecordsPerBatch": "50"}
    t0 = time.monotonic()
    with Driver(job, control, PULSAR_FAULT_PACE_SECONDS="0.3") as driver:
        driver.wait_until(lambda: (control / "sending").exists(), 180, "the paced task's sends")
        restart = broker.restart()
        result = driver.wait(300)
        lost_tasks = driver.count("Lost task")  # attempts that failed, and were run again
    # After a restart, Apache Pulsar 4.0 may leave a topic unanswered past the client's
    # operation timeout (once in CI: GET_LAST_MESSAGE_ID on the registry, unanswered for
    # 90 s, as the broker recovered its transaction buffer). The job then fails, aborts
    # every transaction and shows nothing; running it again writes each row once.
    cause = _gave_up_on_the_broker(result, driver, broker)
    failed = cause is not None
    decided = cause is not None and any(
        mark in cause for mark in ("is recorded in", "commit was decided")
    )
    visible_after_failure, runs = 0, 0
    if failed and not decided:
        visible_after_failure = len(_again(lambda: _values(url, target))[0])
    if decided:  # failed midway through its commit: the next job finishes it
        _next_job(spark, url, f"{topic_name}-next")
    elif failed:
        runs = _again(lambda: _exactly_once_write(spark, url, source, target))[1]
    got, gaps, java, java_gaps = _read_back(url, target, sent)
    figure(record_property, "exactly_once_broker_restart", rows=len(sent), sink_rows=len(got),
           **gaps, java_rows=len(java), restart_seconds=round(restart, 1),
           lost_tasks=lost_tasks, job_seconds=result["seconds"], job_failed=failed,
           runs_after_the_failure=runs,
           failed_after_its_decision=decided,
           rows_visible_after_the_failure=visible_after_failure,
           test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert visible_after_failure == 0
    assert gaps == EXACT
    assert java_gaps == EXACT


def test_a_driver_killed_before_the_job_commits_leaves_nothing_visible(
    spark, apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # Every task wrote and handed its transaction over; the driver dies before the job
    # commits. Nothing shows: not while the transactions are open (readers are not held
    # back either), nor once they time out. Running the job again writes each row once.
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"k%04d" % i for i in range(900)]
    produce(url, source, sent, batching_max_messages=100)
    control = tmp_path / "control"
    job = _write_job(url, source, target, "pulsar_hanging")
    job["sink_options"]["transactionTimeout"] = "8s"
    t0 = time.monotonic()
    with Driver(job, control) as driver:
        driver.wait_until(lambda: (control / "committing-job").exists(), 180, "the job commit")
        killed = driver.kill()
    open_rows = len(_values(url, target))
    time.sleep(10)  # the transactions time out: aborted by their coordinator
    timed_out_rows = len(_values(url, target))
    _exactly_once_write(spark, url, source, target)
    got = _values(url, target)
    gaps = multiset_gaps(sent, got)
    figure(record_property, "exactly_once_batch_driver_killed", rows=len(sent),
           rows_visible_while_open=open_rows, rows_visible_after_timeout=timed_out_rows,
           sink_rows=len(got), **gaps, processes_killed=killed,
           test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert open_rows == 0 and timed_out_rows == 0
    assert gaps == EXACT


def test_a_commit_its_driver_left_midway_is_finished_by_the_next_job(
    spark, apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # The driver records the job's decision, commits the first of its transactions and
    # dies. Readers see at most that one's rows (none while the others, open, come before
    # them); once those time out, the job would stay partly visible. The next
    # exactly-once batch job on the namespace finds the decision (no "done", the dead
    # driver's hold gone) as it plans, and commits the rest: every row once.
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"m%04d" % i for i in range(900)]
    produce(url, source, sent, batching_max_messages=100)
    control = tmp_path / "control"
    job = _write_job(url, source, target, "pulsar_hanging")
    t0 = time.monotonic()
    with Driver(job, control, PULSAR_FAULT_HANG_MIDWAY="1") as driver:
        driver.wait_until(lambda: (control / "committing-job").exists(), 180, "the job commit")
        killed = driver.kill()
    partial = len(_values(url, target))
    _next_job(spark, url, f"{topic_name}-next")
    got = _values(url, target)
    gaps = multiset_gaps(sent, got)
    figure(record_property, "exactly_once_batch_commit_midway", rows=len(sent),
           rows_visible_after_kill=partial, sink_rows=len(got), **gaps,
           processes_killed=killed, test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert partial < len(sent)
    assert gaps == EXACT
    assert _values(url, f"{topic_name}-next") == [b"x"]


def test_a_losing_task_attempts_transaction_is_aborted_when_the_job_commits(
    apache_pulsar_txn, topic_name
) -> None:
    # Speculation as the sink sees it: two attempts of one task both write; the driver's
    # commit gets one attempt's message. The other's transaction, found in the registry,
    # is aborted as the job commits: its rows never show, and readers are not held back
    # until it times out. (Spark runs no speculative copy on the host of the first attempt,
    # and every local executor shares one host, so the two attempts are driven by hand.)
    import pyarrow as pa

    from pulsar_spark.spark.options.parse import parse_options
    from pulsar_spark.spark.writer import PulsarArrowWriter

    url = apache_pulsar_txn.service_url
    options = parse_options({"service.url": url, "topic": topic_name, **EXACTLY_ONCE})
    rows = pa.record_batch({"value": pa.array([b"s%03d" % i for i in range(50)])})
    writer = PulsarArrowWriter(options, ("value",))
    writer.prepare()  # the driver, planning
    winner = writer.write(iter([rows]))
    loser = writer.write(iter([rows]))
    assert winner.txn != loser.txn
    writer.commit([winner])  # the loser's message never came
    assert sorted(_values(url, topic_name)) == rows.column(0).to_pylist()
    with PulsarClient(url) as client, pytest.raises(Exception, match="TransactionNotFound"):
        client.transaction(loser.txn).commit()  # it ended: aborted


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_driver_killed_between_the_commit_and_the_commit_log_writes_nothing_twice(
    spark, apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # Micro-batch 1's transactions are committed, then the driver dies before Spark's
    # commit log has the batch. The restarted query replays batch 1 into new transactions;
    # the sink's own commit log shows batch 1 committed: the replay's are aborted.
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    sent = [b"d%04d" % i for i in range(400)]
    produce(url, source, sent[:300], batching_max_messages=20)
    checkpoint, control = tmp_path / "checkpoint", tmp_path / "control"
    job = _copy_job(url, source, target, checkpoint)
    job["sink_format"] = "pulsar_hanging"
    t0 = time.monotonic()
    with Driver(job, control, PULSAR_FAULT_HANG_BATCH="1") as driver:
        driver.wait_until(lambda: (control / "committing-1").exists(), 180, "batch 1's commit")
        assert (checkpoint / "offsets" / "1").exists()
        assert not (checkpoint / "commits" / "1").exists()
        killed = driver.kill()
    at_kill = len(_values(url, target))
    produce(url, source, sent[300:], batching_max_messages=20)
    query = rerun_copy(spark, _copy_job(url, source, target, checkpoint))
    assert (checkpoint / "commits" / "1").exists()
    got = _values(url, target)
    gaps = multiset_gaps(sent, got)
    with PulsarClient(url) as client:
        found = CommitLog(client, log_topic(None, target, str(query.id))).last()
    figure(record_property, "exactly_once_stream_driver_killed", produced=len(sent),
           sink_rows=len(got), **gaps, rows_visible_when_killed=at_kill,
           processes_killed=killed, test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert at_kill == 200  # batches 0 and 1 were committed before the kill
    assert found is not None and found[1].batch >= 1
    assert gaps == EXACT


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_python_worker_killed_in_a_stream_leaves_nothing_twice(
    apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # The reading Python worker of a task's first attempt dies after handing Spark a batch;
    # the task's sink has opened (and registered) its transaction and may have written in
    # it. Spark retries the task; the micro-batch's commit aborts the dead attempt's
    # transaction and commits the retry's.
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    apache_pulsar_txn.admin.create_partitioned_topic(source, 2)
    sent = [b"s%04d" % i for i in range(1200)]
    produce(url, source, sent, batching_max_messages=20)
    job = _copy_job(url, source, target, tmp_path / "checkpoint")
    job["trigger"] = {"availableNow": True}
    job["source_format"] = "pulsar_killing"
    job["source_options"]["maxRecordsPerTrigger"] = "600"
    t0 = time.monotonic()
    with Driver(job, tmp_path / "control") as driver:
        result = driver.wait(300)
    assert result.get("error") is None, f"{result['error']}\n{driver.tail()}"
    assert (tmp_path / "control" / "killed-stream-worker").exists()
    got, gaps, java, java_gaps = _read_back(url, target, sent)
    figure(record_property, "exactly_once_stream_worker_killed", produced=len(sent),
           sink_rows=len(got), **gaps, java_rows=len(java),
           test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert gaps == EXACT
    assert java_gaps == EXACT


def _speculating(control: Path) -> dict[str, str]:
    """Spark settings of a job on a :class:`StandaloneCluster`: speculation on (a task
    that runs 1.5x the median, and 2 s, once half its stage is done), the fault formats
    importable by the executors' Python workers."""
    return {
        "spark.speculation": "true",
        "spark.speculation.interval": "100ms",
        "spark.speculation.quantile": "0.5",
        "spark.speculation.multiplier": "1.5",
        "spark.speculation.minTaskRuntime": "2s",
        "spark.executor.memory": "512m",
        "spark.executorEnv.PYTHONPATH": str(REPO),
        f"spark.executorEnv.{FAULT_DIR}": str(control),
        "spark.pyspark.python": sys.executable,
    }


def _copy_job(url: str, source: str, target: str, checkpoint: Path) -> dict:
    """A stream ``source`` -> ``target`` (key and value) with an exactly-once sink."""
    return copy_job(url, source, target, checkpoint, sink_options=EXACTLY_ONCE)


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_speculative_copy_in_a_stream_leaves_the_stragglers_rows_out(
    apache_pulsar_txn, topic_name, tmp_path, record_property
) -> None:
    # As the batch test above, in a micro-batch: the straggler's transaction, registered
    # under the query and the micro-batch, is aborted when the micro-batch commits.
    url = apache_pulsar_txn.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    apache_pulsar_txn.admin.create_partitioned_topic(source, 4)
    sent = [b"q%05d" % i for i in range(2000)]
    produce(url, source, sent, batching_max_messages=50)
    control = tmp_path / "control"
    job = _copy_job(url, source, target, tmp_path / "checkpoint")
    job["trigger"] = {"availableNow": True}
    job["sink_format"] = "pulsar_slow"
    job["source_options"]["maxRecordsPerTrigger"] = "1000"
    t0 = time.monotonic()
    with StandaloneCluster(tmp_path / "cluster") as cluster:
        job["master"] = cluster.url
        job["conf"] = _speculating(control)
        with Driver(job, control) as driver:
            result = driver.wait(300)
            aborted = driver.count("aborting 1 transactions of task attempts")
    assert result.get("error") is None, f"{result['error']}\n{driver.tail()}"
    assert (control / "slow-write").exists()
    assert (control / "attempt-0-1").exists(), "no second attempt of partition 0 ran"
    got, gaps, java, java_gaps = _read_back(url, target, sent)
    figure(record_property, "exactly_once_stream_speculation", produced=len(sent),
           sink_rows=len(got), **gaps, java_rows=len(java), stragglers_aborted=aborted,
           test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert gaps == EXACT
    assert java_gaps == EXACT
    assert aborted >= 1  # under load, Spark may overtake other slow tasks too


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_broker_killed_under_an_exactly_once_stream_leaves_each_row_once(
    spark, fresh_apache_pulsar, topic_name, tmp_path, record_property
) -> None:
    # SIGKILL of the broker (its bookie and ZooKeeper with it) while the query works
    # through a backlog, then a start: tasks in flight fail and are retried in new
    # transactions, and the driver's commits wait for the broker. Should the broker stay
    # unresponsive past the client's operation timeout (see the batch test above), the
    # query fails with its micro-batch uncommitted; restarted from its checkpoint, it
    # writes each row once.
    broker = fresh_apache_pulsar(variant="txn")
    url = broker.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    broker.admin.create_partitioned_topic(source, 2)
    sent = [b"x%05d" % i for i in range(2000)]
    produce(url, source, sent, batching_max_messages=20)
    job = _copy_job(url, source, target, tmp_path / "checkpoint")
    job["timeout"] = 400
    t0 = time.monotonic()
    with Driver(job, tmp_path / "control") as driver:
        driver.wait_until(lambda: len(_values(url, target)) >= 300, 180, "300 rows committed")
        broker.kill()
        time.sleep(2)
        restart = broker.start()
        driver.stop_when_caught_up()
        result = driver.wait(300)
        lost_tasks = driver.count("Lost task")
    failed = _gave_up_on_the_broker(result, driver, broker) is not None
    runs = _again(lambda: rerun_copy(spark, job))[1] if failed else 0
    got, gaps, java, java_gaps = _read_back(url, target, sent)
    figure(record_property, "exactly_once_stream_broker_killed", produced=len(sent),
           sink_rows=len(got), **gaps, java_rows=len(java), restart_seconds=round(restart, 1),
           lost_tasks=lost_tasks, query_failed=failed, restarts=runs,
           test_seconds=round(time.monotonic() - t0, 1))  # fmt: skip
    assert gaps == EXACT
    assert java_gaps == EXACT
