"""Structured Streaming with format "pulsar": end-to-end latency and Pulsar-to-Pulsar throughput.

    python bench/stream.py [--rate 200] [--seconds 20] [--messages 1000000] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started. Spark runs ``local[2]``.

* **Latency**: a stream query with the default trigger (a micro-batch as soon as the
  previous one ends) feeds ``foreachBatch``; a producer thread sends ``--rate``
  messages per second for ``--seconds`` (once a first row has come through), each
  carrying its send time. Latency is the time from ``send`` to the row being
  visible in ``foreachBatch``. Prints p50, p99 and max. The same is measured, in the
  same session, for a trivial Python streaming source (:class:`TickSource`): its
  offset is a counter that time feeds (``--rate`` rows per second from the query's
  start), its rows carry their creation time, and the same ``foreachBatch`` takes
  them: Spark's own floor for a Python source. For both, the median duration of
  each phase of a micro-batch (``StreamingQueryProgress.durationMs``) says where
  the time goes.
* **Throughput**: ``--messages`` messages of 100 bytes are in a source topic; a
  ``Trigger.AvailableNow`` query copies them to a sink topic through
  ``writeStream.format("pulsar")`` and waits for every receipt; timed twice, the
  session's first copy (which warms Spark up) and a second one. Compared, in the
  same run, with the client alone copying the same topic (``read_batches`` into
  ``send_batch``, one process, one thread): the ceiling for one partition.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, spark_session
from _cpu import report, snapshot
from _results import write_result

from pulsar_spark.client import PulsarClient

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

_STAMP = struct.Struct(">d")
#: The phases of a micro-batch reported (``durationMs``), in the order they happen.
PHASES = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets",
          "triggerExecution")  # fmt: skip


class _Ticks(InputPartition):
    def __init__(self, first: int, end: int) -> None:
        self.first, self.end = first, end


class TickReader(DataSourceStreamReader):
    """Row ``i`` is created at ``t0 + i / rate`` (epoch s); the offset counts the rows
    created so far; each row's value is its creation time, as the Pulsar side's
    values hold their send time."""

    def __init__(self, t0: float, rate: int) -> None:
        self.t0, self.rate = t0, rate

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict | None = None, limit: object = None) -> dict:
        return {"n": max(0, int((time.time() - self.t0) * self.rate))}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if start["n"] >= end["n"]:
            return []
        return [_Ticks(start["n"], end["n"])]

    def read(self, partition: InputPartition):  # type: ignore[override]
        assert isinstance(partition, _Ticks)
        for i in range(partition.first, partition.end):
            yield (struct.pack(">d", self.t0 + i / self.rate),)  # as _STAMP

    def commit(self, end: dict) -> None:
        pass


class TickSource(DataSource):
    """``format("ticks")``: options ``t0`` (epoch s) and ``rate`` (rows per second)."""

    @classmethod
    def name(cls) -> str:
        return "ticks"

    def schema(self) -> str:
        return "value binary"

    def streamReader(self, schema):  # type: ignore[no-untyped-def]
        return TickReader(float(self.options["t0"]), int(self.options["rate"]))


def phases(query) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Median ms of each phase over the query's micro-batches that read rows."""
    progress = [p for p in query.recentProgress if p.numInputRows > 0]
    return {
        name: statistics.median(p.durationMs.get(name, 0) for p in progress) for name in PHASES
    } | {"batches": len(progress)}


def tick_latency(spark: SparkSession, rate: int, seconds: float) -> tuple[list[float], dict]:
    """:func:`latency` for the trivial source: the same sink, the same timing."""
    seen: list[tuple[float, float]] = []

    def collect(frame, _batch_id: int) -> None:
        now = time.time()
        for row in frame.select("value").collect():
            created = _STAMP.unpack(row.value)[0]
            seen.append((created, now - created))

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("ticks")
            .option("t0", repr(time.time()))
            .option("rate", rate)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        deadline = time.time() + 120
        while not seen and time.time() < deadline:  # warm: a first row came through
            time.sleep(0.1)
        started, cpu = time.time(), snapshot()
        end = started + seconds
        while time.time() < end + 30 and not any(c >= end for c, _ in seen):
            time.sleep(0.1)
        print(f"  trivial: {report(cpu, snapshot(), time.time() - started)}")
        query.stop()
        figures = phases(query)
    return [lag for created, lag in seen if started <= created < end], figures


def latency(spark: SparkSession, url: str, rate: int, seconds: float) -> tuple[list[float], dict]:
    topic = f"persistent://public/default/bench-latency-{int(time.time())}"
    with PulsarClient(url) as client, client.create_producer(topic) as producer:
        producer.send(b"warm-up")  # the topic exists before the stream starts at latest
    seen: list[float] = []
    warm: list[bytes] = []

    def collect(frame, _batch_id: int) -> None:
        now = time.time()
        for row in frame.select("value").collect():
            if len(row.value) == _STAMP.size:
                seen.append(now - _STAMP.unpack(row.value)[0])
            else:
                warm.append(row.value)

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("pulsar")
            .option("service.url", url)
            .option("topic", topic)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        sent = 0
        with (
            PulsarClient(url) as client,
            client.create_producer(topic, batch_max_delay=0.001) as producer,
        ):
            # Timing starts once a first row came through: the first micro-batches
            # start Python workers (seconds), which is not the steady state measured.
            deadline = time.time() + 120
            while not warm and time.time() < deadline:
                producer.send(b"warm-up")
                time.sleep(1)
            started, cpu = time.time(), snapshot()
            while time.time() - started < seconds:
                producer.send(_STAMP.pack(time.time()))
                sent += 1
                producer.flush()
                time.sleep(max(0.0, started + sent / rate - time.time()))
            print(f"  pulsar: {report(cpu, snapshot(), time.time() - started)}")
        deadline = time.time() + 30
        while len(seen) < sent and time.time() < deadline:
            time.sleep(0.1)
        query.stop()
        figures = phases(query)
    if len(seen) < sent:
        print(f"latency: only {len(seen)} of {sent} messages seen")
    return seen, figures


def throughput(spark: SparkSession, url: str, messages: int) -> tuple[float, float, float]:
    stamp = int(time.time())
    source = f"persistent://public/default/bench-stream-in-{stamp}"
    import pyarrow as pa

    table = pa.table({"value": pa.array([b"x" * 100] * messages, pa.binary())})
    with PulsarClient(url) as client, client.create_producer(source, compression="lz4") as p:
        p.send_batch(table)
    # The client alone: read everything and write it to another topic.
    started, cpu = time.perf_counter(), snapshot()
    with (
        PulsarClient(url) as client,
        client.create_producer(f"{source}-client-copy", compression="lz4") as producer,
    ):
        for batch in client.read_batches(source):
            producer.send_batch(pa.table({"value": batch.column("value")}))
    wall = time.perf_counter() - started
    client_rate = messages / wall
    print(f"  client copy: {report(cpu, snapshot(), wall)}")
    # The first copy of a session also pays for warming up (the writer's Python
    # workers, the JVM's first Arrow conversions): timed apart.
    first_rate = messages / _spark_copy(spark, url, source, f"{source}-spark-first")
    spark_rate = messages / _spark_copy(spark, url, source, f"{source}-spark-copy")
    return first_rate, spark_rate, client_rate


def _spark_copy(spark: SparkSession, url: str, source: str, sink: str) -> float:
    """Seconds a Trigger.AvailableNow query takes to copy ``source`` to ``sink``."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (
            spark.readStream.format("pulsar")
            .option("service.url", url)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .schema("value binary")  # the one column the copy needs: Spark moves no other
            .load()
            .writeStream.format("pulsar")
            .option("service.url", url)
            .option("topic", sink)
            .option("compressionType", "lz4")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        cpu = snapshot()
        query.awaitTermination()
        wall = time.perf_counter() - started
        print(f"  spark copy to {sink.rsplit('-', 1)[-1]}: {report(cpu, snapshot(), wall)}")
        figures = phases(query)
        print(
            f"  micro-batches: {figures.pop('batches')}, ms: "
            + ", ".join(f"{k} {v:.0f}" for k, v in figures.items())
        )
        return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200, help="messages per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--service-url")
    parser.add_argument("--json-out", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    result: dict = {"latency": {}, "phases_ms": {}}
    spark = spark_session("pulsar-spark-bench-stream", 2, TickSource)
    try:
        with broker_url(args.service_url, "bench-stream-") as url:
            tick_latency(spark, args.rate, 3.0)  # warm-up: workers, the JVM's first batches
            found = {}
            for name, run in (
                ("trivial", lambda: tick_latency(spark, args.rate, args.seconds)),
                ("pulsar", lambda: latency(spark, url, args.rate, args.seconds)),
            ):
                lags, figures = run()
                seen = sorted(lags)
                if not seen:
                    print(f"latency ({name}): no message seen")
                    continue
                p50 = statistics.median(seen)
                p99 = seen[min(len(seen) - 1, int(len(seen) * 0.99))]
                found[name] = (p50, p99)
                result["latency"][name] = {
                    "messages": len(seen),
                    **{
                        f"p{q}_ms": seen[min(len(seen) - 1, int(len(seen) * q / 100))] * 1000
                        for q in (50, 90, 95, 99)
                    },
                    "max_ms": seen[-1] * 1000,
                }
                print(
                    f"latency ({name}), default trigger, {args.rate} msgs/s for "
                    f"{args.seconds:g} s: p50 {p50 * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms  "
                    f"max {seen[-1] * 1000:.0f} ms  ({len(seen)} messages)"
                )
                result["phases_ms"][name] = dict(figures)
                print(
                    f"  median ms per micro-batch ({figures.pop('batches')} batches): "
                    + ", ".join(f"{k} {v:.0f}" for k, v in figures.items())
                )
            if len(found) == 2:
                (t50, t99), (p50, p99) = found["trivial"], found["pulsar"]
                print(f"pulsar/trivial latency: p50 {p50 / t50:.2f}x, p99 {p99 / t99:.2f}x")
            first_rate, spark_rate, client_rate = throughput(spark, url, args.messages)
            print(
                f"pulsar -> pulsar, {args.messages:,} x 100 B, Trigger.AvailableNow: "
                f"{spark_rate:,.0f} msgs/s (the session's first copy: {first_rate:,.0f})"
            )
            print(f"client alone, read_batches -> send_batch:          {client_rate:,.0f} msgs/s")
            print(
                f"stream/client: {spark_rate / client_rate:.2f}x (the client is one partition "
                "and no Spark)"
            )
            if args.json_out:
                write_result(
                    args.json_out,
                    "stream",
                    rate=args.rate,
                    seconds=args.seconds,
                    messages=args.messages,
                    size=100,
                    broker=args.service_url or "pulsar-lite (embedded)",
                    **result,
                    throughput_rows_per_s={
                        "stream_copy": spark_rate,
                        "stream_copy_first": first_rate,
                        "client_copy": client_rate,
                    },
                )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
