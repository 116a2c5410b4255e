"""Streams over many partitions: idle-trigger ``latestOffset`` time and the first micro-batch.

    python bench/partitions.py [--partitions 16,256,1024] [--messages 20] [--triggers 10]

For each partition count N an embedded pulsar-lite is started with
``default_partitions = N`` (every topic has N partitions) and ``--messages``
messages of 100 bytes are written to each partition. Spark runs ``local[2]``.

* **First micro-batch**: a query (``startingOffsets=earliest``, ``noop`` sink)
  reads everything in its first micro-batch: ``durationMs['triggerExecution']``
  of that batch (and its ``addBatch`` part).
* **Idle triggers**: the same query then runs on with nothing new to read,
  one trigger every 100 ms: the median (and max) of ``durationMs['latestOffset']``
  over ``--triggers`` idle triggers (``noDataProgressEventInterval`` is 0, so
  every idle trigger reports its progress).

Both are measured, in the same run and the same session, for a trivial Python
streaming source with as many partitions and rows (each partition yields its
rows from memory; its offset is one counter): the floor Spark itself sets.
Warm-up queries first start the Python workers and run the pulsar source once
(2 partitions), so that the first counts measure partitions, not the workers'
first import of the connector (``--cold``: no pulsar warm-up). Targets (issue 15):
``latestOffset`` at most 100 ms at 256 partitions and 300 ms at 1,024; the
first micro-batch within 1.5x of the trivial source's.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import spark_session
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from support.lite import PulsarLite

from pulsar_spark.client import PulsarClient

TOPIC = "persistent://public/default/bench-partitions"
VALUE = b"x" * 100


class _Slice(InputPartition):
    def __init__(self, index: int) -> None:
        self.index = index


class TrivialStreamReader(DataSourceStreamReader):
    """``partitions`` partitions of ``rows`` rows each, all there from the start."""

    def __init__(self, partitions: int, rows: int) -> None:
        self.count, self.rows = partitions, rows

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict | None = None, limit: object = None) -> dict:
        return {"n": 1}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        if start["n"] == end["n"]:
            return []
        return [_Slice(i) for i in range(self.count)]

    def read(self, partition: InputPartition):  # type: ignore[override]
        for _ in range(self.rows):
            yield (VALUE,)

    def commit(self, end: dict) -> None:
        pass


class TrivialSource(DataSource):
    """``format("trivial-partitions")``: options ``partitions`` and ``rows``."""

    @classmethod
    def name(cls) -> str:
        return "trivial-partitions"

    def schema(self) -> str:
        return "value binary"

    def streamReader(self, schema):  # type: ignore[no-untyped-def]
        return TrivialStreamReader(int(self.options["partitions"]), int(self.options["rows"]))


def measure(spark, reader, rows: int, triggers: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Run the stream ``reader`` (a DataStreamReader, loaded here) until its first
    micro-batch and ``triggers`` idle triggers have reported: their figures (ms)."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (
            reader.load()
            .writeStream.format("noop")
            .option("checkpointLocation", checkpoint)
            .trigger(processingTime="100 milliseconds")
            .start()
        )
        try:
            deadline = time.time() + 1800
            while time.time() < deadline:
                progress = list(query.recentProgress)
                data = [p for p in progress if p.numInputRows > 0]
                idle = [p for p in progress if p.numInputRows == 0 and data
                        and p.batchId >= data[0].batchId]  # fmt: skip
                if query.exception() is not None:
                    raise RuntimeError(str(query.exception()))
                if data and len(idle) >= triggers:
                    break
                time.sleep(0.2)
            else:
                msg = "the query did not report its triggers within 30 minutes"
                raise RuntimeError(msg)
        finally:
            query.stop()
    first = data[0]
    if first.numInputRows != rows or len(data) != 1:
        got = [p.numInputRows for p in data]
        msg = f"expected one micro-batch of {rows} rows, got {got}"
        raise RuntimeError(msg)
    latest = [p.durationMs.get("latestOffset", 0) for p in idle[:triggers]]
    return {
        "first": first.durationMs["triggerExecution"],
        "add_batch": first.durationMs.get("addBatch", 0),
        "first_latest": first.durationMs.get("latestOffset", 0),
        "latest_median": statistics.median(latest),
        "latest_max": max(latest),
        "wall": (time.perf_counter() - started) * 1000,
    }


def fill(url: str, partitions: int, messages: int) -> None:
    with (
        PulsarClient(url) as client,
        client.create_producer(TOPIC, batch_max_messages=messages) as producer,
    ):
        for _ in range(partitions * messages):
            producer.send(VALUE)
        producer.flush()


@contextlib.contextmanager
def lite(partitions: int, messages: int) -> Iterator[str]:
    """A pulsar-lite whose topics have ``partitions`` partitions, ``TOPIC`` filled."""
    broker = PulsarLite(Path(tempfile.mkdtemp(prefix="bench-partitions-")), name="bench",
                        default_partitions=partitions)  # fmt: skip
    broker.start()
    try:
        fill(broker.service_url, partitions, messages)
        yield broker.service_url
    finally:
        broker.close()


def pulsar_stream(spark, url: str):  # type: ignore[no-untyped-def]
    return (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="16,256,1024")
    parser.add_argument("--messages", type=int, default=20, help="messages per partition")
    parser.add_argument("--triggers", type=int, default=10, help="idle triggers timed")
    parser.add_argument(
        "--cold", action="store_true",
        help="no pulsar warm-up: the first count pays for the workers' first pulsar query",
    )  # fmt: skip
    args = parser.parse_args()
    spark = spark_session("pulsar-spark-bench-partitions", 2, TrivialSource)
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "0")
    try:
        trivial = spark.readStream.format("trivial-partitions").option("rows", 10)
        measure(spark, trivial.option("partitions", 2), 20, 2)  # warm-up: Python workers
        if not args.cold:  # and the pulsar source's first query (its workers' imports)
            with lite(2, 10) as url:
                measure(spark, pulsar_stream(spark, url), 20, 2)
        for count in (int(n) for n in args.partitions.split(",")):
            rows = count * args.messages
            trivial = spark.readStream.format("trivial-partitions").option("rows", args.messages)
            floor = measure(spark, trivial.option("partitions", count), rows, args.triggers)
            with lite(count, args.messages) as url:
                got = measure(spark, pulsar_stream(spark, url), rows, args.triggers)
            print(
                f"{count:5d} partitions x {args.messages} msgs: idle latestOffset median "
                f"{got['latest_median']:.0f} ms (max {got['latest_max']:.0f}; trivial "
                f"{floor['latest_median']:.0f}); first micro-batch {got['first']:.0f} ms "
                f"(addBatch {got['add_batch']:.0f}, latestOffset {got['first_latest']:.0f}) "
                f"vs trivial {floor['first']:.0f} ms: {got['first'] / floor['first']:.2f}x",
                flush=True,
            )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
