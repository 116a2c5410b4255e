"""Spark fault tests' helpers: subprocess Spark drivers, faulty sources and sinks, figures.

A test that kills a Spark driver, or needs Spark to retry a failed task (``local[N,F]``,
which the shared ``spark`` fixture is not), runs its query in a driver of its own:
:class:`Driver` starts ``python -m tests.support.spark_faults '<json job>'`` in a new
session (the JVM and its Python workers in one process group), logs to a file, and
:meth:`Driver.kill` SIGKILLs the whole tree, as a crashed machine would.

A job (:func:`run_job`, in the subprocess) is a batch read collected to a JSON file
(``mode: batch``) or a stream from a source format to a sink format (``mode: stream``)
that runs until ``<control>/stop`` appears (then ``processAllAvailable`` and stop) or,
with ``availableNow``, until caught up. Its outcome goes to ``<control>/result.json``.

Fault formats registered in the driver (their classes live here, so Python workers import
them by name; the driver's ``PYTHONPATH`` holds the repository):

``pulsar_killing``
    the pulsar source whose first task attempt SIGKILLs its own Python worker after
    handing Spark one batch of rows (batch and stream reads; once per control directory).
``pulsar_hanging``
    the pulsar sink whose driver-side commit of micro-batch ``$PULSAR_FAULT_HANG_BATCH``
    writes ``committing-<id>`` and hangs: the offset log holds the batch, its rows are at
    the broker, and the commit log does not have it yet. As a batch sink, its job commit
    writes ``committing-job`` and hangs before it commits anything, or, with
    ``$PULSAR_FAULT_HANG_MIDWAY`` set, once it has recorded its decision and committed
    the first of the job's transactions.
``pulsar_killing`` as a batch sink
    a task's first attempt SIGKILLs its own Python worker once it has sent (and had
    acknowledged) its first Arrow batch: a worker dying mid-write (once per control
    directory).
``pulsar_slow``
    the pulsar batch or stream sink whose every task attempt writes
    ``attempt-<partition>-<attempt>``, and whose first attempt of partition 0, once it has
    sent (and had acknowledged) its first Arrow batch, writes ``slow-write`` and sleeps for
    ``$PULSAR_FAULT_SLOW_SECONDS`` (120 s; once per control directory): a straggler for
    Spark's speculation to overtake.
``pulsar_paced``
    the pulsar batch sink whose first attempt of partition 0 writes ``sending`` once it
    has sent its first Arrow batch, and sleeps ``$PULSAR_FAULT_PACE_SECONDS`` (0.5 s)
    after each batch: a write that lasts long enough for a test to disturb the broker
    under it (with ``spark.sql.execution.arrow.maxRecordsPerBatch`` small).

A job's ``master`` (``local[2,4]``) and ``conf`` (more Spark settings) shape its session.
A job's ``mode`` may also be ``write``: a batch read of ``source_format`` written with
``df.write`` to ``sink_format`` (``sink_options``).

Faults find their control directory in ``$PULSAR_FAULT_DIR`` (workers inherit the JVM's
environment). Also: :func:`multiset_gaps` (lost and duplicated of a multiset) and
:func:`figure` (one ``FIGURE`` line per test, and a ``record_property``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from pulsar_spark import PulsarDataSource
from pulsar_spark.spark import reader, writer
from pulsar_spark.spark.reader import PulsarBatchReader
from pulsar_spark.spark.stream import reader as stream_reader
from pulsar_spark.spark.stream.reader import PulsarStreamReader
from pulsar_spark.spark.stream.writer import PulsarStreamWriter
from pulsar_spark.spark.writer import PulsarArrowWriter

from .figures import figure
from .spark import local_session

__all__ = [
    "Driver",
    "copy_job",
    "figure",
    "multiset_gaps",
    "process_tree",
    "rerun_copy",
    "run_job",
    "wait_for",
]

REPO = Path(__file__).resolve().parents[2]
FAULT_DIR = "PULSAR_FAULT_DIR"
HANG_BATCH = "PULSAR_FAULT_HANG_BATCH"
SLOW_SECONDS = "PULSAR_FAULT_SLOW_SECONDS"
PACE_SECONDS = "PULSAR_FAULT_PACE_SECONDS"
HANG_MIDWAY = "PULSAR_FAULT_HANG_MIDWAY"
#: Rows per Arrow batch in the killing source, so that a task yields several.
SMALL_BATCH_ROWS = 100


# ---------------------------------------------------------------------------
# Test side
# ---------------------------------------------------------------------------


def copy_job(
    url: str,
    source: str,
    target: str,
    checkpoint: Path,
    sink_options: dict[str, str] | None = None,
    **extra: object,
) -> dict[str, Any]:
    """A stream job ``source`` -> ``target`` (key and value), 100 rows a micro-batch; more
    sink options in ``sink_options``, more job keys in ``extra``."""
    return {
        "mode": "stream",
        "source_format": "pulsar",
        "source_options": {
            "service.url": url,
            "topic": source,
            "startingOffsets": "earliest",
            "maxRecordsPerTrigger": "100",
        },
        "sink_format": "pulsar",
        "sink_options": {"service.url": url, "topic": target, **(sink_options or {})},
        "checkpoint": str(checkpoint),
        **extra,
    }


def rerun_copy(spark: Any, job: dict[str, Any]) -> Any:
    """The restart of a killed driver's copy ``job``, in ``spark`` (a new driver: the
    checkpoint is all it shares), with ``Trigger.AvailableNow``; the finished query."""
    query = (
        spark.readStream.format("pulsar")
        .options(**job["source_options"])
        .load()
        .select("key", "value")
        .writeStream.format("pulsar")
        .options(**job["sink_options"])
        .option("checkpointLocation", job["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return query


def multiset_gaps(expected: Iterable[Any], got: Iterable[Any]) -> dict[str, int]:
    """``lost`` (expected, missing), ``duplicated`` (extra copies of expected items) and
    ``unexpected`` (items never expected) between two multisets."""
    want, have = Counter(expected), Counter(got)
    lost = sum((want - have).values())
    extra = have - want
    unexpected = sum(n for item, n in extra.items() if item not in want)
    return {"lost": lost, "duplicated": sum(extra.values()) - unexpected, "unexpected": unexpected}


def wait_for(check: Callable[[], bool], timeout: float, what: str, every: float = 0.2) -> float:
    """Poll ``check`` until true; the seconds it took, or ``TimeoutError`` naming ``what``."""
    t0 = time.monotonic()
    while not check():
        if time.monotonic() - t0 > timeout:
            msg = f"{what}: not reached within {timeout:g} s"
            raise TimeoutError(msg)
        time.sleep(every)
    return time.monotonic() - t0


def process_tree(pid: int) -> list[int]:
    """``pid`` and every descendant (from ``/proc``), parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


class Driver:
    """A Spark driver running :func:`run_job` in a subprocess (see the module docstring)."""

    def __init__(self, job: dict[str, Any], control: Path, **env: str) -> None:
        self.job = {**job, "control": str(control)}
        self.control = control
        control.mkdir(parents=True, exist_ok=True)
        self.log_path = control / f"driver-{time.monotonic_ns()}.log"
        self.env = {
            **os.environ,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
            ),
            FAULT_DIR: str(control),
            **env,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Driver:
        (self.control / "result.json").unlink(missing_ok=True)
        (self.control / "stop").unlink(missing_ok=True)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.support.spark_faults", json.dumps(self.job)],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def wait_until(self, check: Callable[[], bool], timeout: float, what: str) -> float:
        """:func:`wait_for` ``check``, failing at once (with the job's error and the log's
        tail) if the driver ends first."""

        def done() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                result = self.control / "result.json"
                error = json.loads(result.read_text()).get("error") if result.exists() else None
                msg = f"the Spark driver ended before {what}: {error}\n{self.tail()}"
                raise AssertionError(msg)
            return check()

        return wait_for(done, timeout, what)

    def stop_when_caught_up(self) -> None:
        """Ask the job to process what is available, then stop."""
        (self.control / "stop").touch()

    def wait(self, timeout: float) -> dict[str, Any]:
        """Wait for the job's end; its ``result.json`` (``AssertionError`` with the log's
        tail if it ended without one)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            msg = f"the Spark driver did not end within {timeout:g} s:\n{self.tail()}"
            raise AssertionError(msg) from None
        result = self.control / "result.json"
        if not result.exists():
            msg = f"the Spark driver ended ({self.proc.returncode}) with no result:\n{self.tail()}"
            raise AssertionError(msg)
        return dict(json.loads(result.read_text()))

    def kill(self) -> int:
        """SIGKILL the driver, its JVM and every Python worker; the number of processes."""
        if self.proc is None or self.proc.poll() is not None:
            return 0
        tree = process_tree(self.proc.pid)
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return len(tree)

    def count(self, text: str) -> int:
        """How many lines of the driver's log (JVM and workers included) hold ``text``."""
        with self.log_path.open(errors="replace") as log:
            return sum(text in line for line in log)

    def tail(self, chars: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def __enter__(self) -> Driver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


# ---------------------------------------------------------------------------
# Driver side: fault formats (imported by the Python workers) and the job
# ---------------------------------------------------------------------------


def _claim(name: str) -> bool:
    """Create ``$PULSAR_FAULT_DIR/<name>`` if it is not there yet; whether we did."""
    try:
        os.close(os.open(Path(os.environ[FAULT_DIR]) / name, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def _killing(batches: Iterator[Any], kind: str) -> Iterator[Any]:
    """Yield ``batches``; on a task's first attempt, after the first batch, SIGKILL this
    Python worker (once per control directory, the marker written first)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    first_attempt = context is not None and context.attemptNumber() == 0
    for n, batch in enumerate(batches):
        yield batch
        if n == 0 and first_attempt and _claim(f"killed-{kind}-worker"):
            os.kill(os.getpid(), signal.SIGKILL)


def _small_batches() -> None:
    reader.BATCH_ROWS = SMALL_BATCH_ROWS
    stream_reader.BATCH_ROWS = SMALL_BATCH_ROWS


class KillingBatchReader(PulsarBatchReader):
    def read(self, partition: Any) -> Iterator[Any]:
        _small_batches()
        return _killing(super().read(partition), "batch")


class KillingStreamReader(PulsarStreamReader):
    def read(self, partition: Any) -> Iterator[Any]:
        _small_batches()
        return _killing(super().read(partition), "stream")


class HangingStreamWriter(PulsarStreamWriter):
    def commit(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]
        super().commit(messages, batchId)
        if str(batchId) == os.environ.get(HANG_BATCH) and _claim(f"committing-{batchId}"):
            time.sleep(600)  # until the test kills the driver


class KillingWriter(PulsarArrowWriter):
    def _send(self, producer: Any, table: Any) -> int:
        from pyspark import TaskContext

        sent = super()._send(producer, table)
        context = TaskContext.get()
        if context is not None and context.attemptNumber() == 0:
            producer.flush()  # these rows are at the broker (in the task's transaction)
            if _claim("killed-write-worker"):
                os.kill(os.getpid(), signal.SIGKILL)
        return sent


class _Straggling:
    """``pulsar_slow``'s sending (a mixin before a pulsar writer)."""

    def _send(self, producer: Any, table: Any) -> int:
        from pyspark import TaskContext

        sent = super()._send(producer, table)  # type: ignore[misc]
        context = TaskContext.get()
        if context is None:
            return int(sent)
        _claim(f"attempt-{context.partitionId()}-{context.attemptNumber()}")
        if context.partitionId() == 0 and context.attemptNumber() == 0:
            producer.flush()  # these rows are at the broker (in the attempt's transaction)
            if _claim("slow-write"):
                time.sleep(float(os.environ.get(SLOW_SECONDS, "120")))
        return int(sent)


class SlowWriter(_Straggling, PulsarArrowWriter):
    pass


class SlowStreamWriter(_Straggling, PulsarStreamWriter):
    def commit(self, messages: list[Any], batchId: int) -> None:  # type: ignore[override]
        logging.basicConfig(level=logging.INFO)  # this commit worker's logs, in the driver's
        super().commit(messages, batchId)


class PacedWriter(PulsarArrowWriter):
    def _send(self, producer: Any, table: Any) -> int:
        from pyspark import TaskContext

        sent = super()._send(producer, table)
        context = TaskContext.get()
        if context is not None and context.partitionId() == 0 and context.attemptNumber() == 0:
            _claim("sending")
            time.sleep(float(os.environ.get(PACE_SECONDS, "0.5")))
        return sent


def _commit_one_then_hang(client: Any, txns: list[str], *, commit: bool) -> int:
    """``end_transactions`` of a driver that dies midway: the first transaction
    committed, then ``committing-job`` written and a hang."""
    client.transaction(txns[0]).commit()
    _claim("committing-job")
    time.sleep(600)  # until the test kills the driver
    return 1


class HangingWriter(PulsarArrowWriter):
    def commit(self, messages: list[Any]) -> None:
        if os.environ.get(HANG_MIDWAY):
            writer.end_transactions = _commit_one_then_hang  # this commit worker only
        elif _claim("committing-job"):
            time.sleep(600)  # until the test kills the driver
        super().commit(messages)


def _as(cls: type[PulsarArrowWriter], base: PulsarArrowWriter) -> PulsarArrowWriter:
    """The pulsar batch writer ``base`` (as the driver planned it) made a ``cls``."""
    made = cls(base.options, base.columns, base.plans, base.sink)
    made.owner, made.registry_from = base.owner, base.registry_from
    return made


class Killing(PulsarDataSource):
    """``pulsar_killing``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_killing"

    def reader(self, schema: Any) -> Any:
        base = super().reader(schema)
        return KillingBatchReader(base.options, base.read_schema, schema)

    def streamReader(self, schema: Any) -> Any:
        base = super().streamReader(schema)
        return KillingStreamReader(base.options, base.read_schema, schema)

    def writer(self, schema: Any, overwrite: bool) -> Any:
        return _as(KillingWriter, super().writer(schema, overwrite))


class Slow(PulsarDataSource):
    """``pulsar_slow``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_slow"

    def writer(self, schema: Any, overwrite: bool) -> Any:
        return _as(SlowWriter, super().writer(schema, overwrite))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        base = super().streamWriter(schema, overwrite)
        return SlowStreamWriter(base.options, base.columns, base.plans)


class Paced(PulsarDataSource):
    """``pulsar_paced``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_paced"

    def writer(self, schema: Any, overwrite: bool) -> Any:
        return _as(PacedWriter, super().writer(schema, overwrite))


class Hanging(PulsarDataSource):
    """``pulsar_hanging``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_hanging"

    def writer(self, schema: Any, overwrite: bool) -> Any:
        return _as(HangingWriter, super().writer(schema, overwrite))

    def streamWriter(self, schema: Any, overwrite: bool) -> Any:
        base = super().streamWriter(schema, overwrite)
        return HangingStreamWriter(base.options, base.columns, base.plans)


def _session(master: str, conf: dict[str, str] | None) -> Any:
    spark = local_session(master, conf)  # the pulsar source registered
    spark.sparkContext.setLogLevel("WARN")
    for source in (Killing, Hanging, Slow, Paced):
        spark.dataSource.register(source)
    return spark


def _stream(spark: Any, job: dict[str, Any], control: Path) -> dict[str, Any]:
    df = spark.readStream.format(job["source_format"]).options(**job["source_options"]).load()
    df = df.selectExpr(*job.get("columns", ["key", "value"]))
    writer = (
        df.writeStream.format(job["sink_format"])
        .options(**job["sink_options"])
        .option("checkpointLocation", job["checkpoint"])
    )
    trigger = job.get("trigger", {"processingTime": "500 milliseconds"})
    query = writer.trigger(**trigger).start()
    deadline = time.monotonic() + job.get("timeout", 300)
    if "availableNow" in trigger:
        query.awaitTermination(job.get("timeout", 300))
    else:
        while query.isActive and time.monotonic() < deadline:
            if (control / "stop").exists():
                query.processAllAvailable()
                break
            time.sleep(0.2)
    error = query.exception()
    batches = (query.lastProgress or {}).get("batchId")
    query.stop()
    return {"error": None if error is None else str(error), "last_batch": batches}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Run one job (see the module docstring) in this process; its result."""
    control = Path(job["control"])
    logging.basicConfig(level=logging.INFO)  # the connector's own logs go to the log too
    spark = _session(job.get("master", "local[2,4]"), job.get("conf"))
    t0 = time.monotonic()
    try:
        if job["mode"] == "batch":
            df = spark.read.format(job["source_format"]).options(**job["source_options"]).load()
            rows = df.select("value").collect()
            result: dict[str, Any] = {"values": [bytes(r.value).hex() for r in rows]}
        elif job["mode"] == "write":
            df = spark.read.format(job["source_format"]).options(**job["source_options"]).load()
            df = df.selectExpr(*job.get("columns", ["key", "value"]))
            if job.get("partitions"):
                df = df.repartition(job["partitions"])
            sink = df.write.format(job["sink_format"]).options(**job["sink_options"])
            sink.mode("append").save()
            result = {"written": True}
        else:
            result = _stream(spark, job, control)
    except Exception as exc:  # the test reads it from result.json; the log has it too
        result = {"error": f"{type(exc).__name__}: {exc}"}
        traceback.print_exc()
    result["seconds"] = round(time.monotonic() - t0, 2)
    (control / "result.json").write_text(json.dumps(result))
    spark.stop()
    return result


if __name__ == "__main__":
    run_job(json.loads(sys.argv[1]))
