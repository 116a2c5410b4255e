"""spark.read.format("pulsar").load().count() against its ceiling and the client alone.

    python bench/spark_read.py [--messages 1000000] [--size 100] [--shape fixed]
                               [--runs 3] [--partitions 4] [--service-url URL]
                               [--option KEY=VALUE ...]

Without ``--service-url`` an embedded pulsar-lite is started. Our producer
writes ``--messages`` payloads of ``--size`` bytes (batched, LZ4) to one
topic; ``--shape varied`` spreads their sizes, ``--shape keyed`` adds a key,
two properties and an event time to each. Then, in the same run:

* **client alone**: ``PulsarClient.read_batches`` over the whole topic in this
  process (one thread), rows/s;
* for ``local[1]`` and then ``local[2]``:

  * **pulsar**: ``spark.read.format("pulsar")...option("minPartitions", N)
    .load().count()``, rows/s;
  * **ceiling**: a trivial Python data source whose tasks yield the very same
    Arrow record batches from memory (an Arrow IPC file the client wrote,
    memory-mapped, split into the same N partitions), rows/s.

Each Spark figure is the best of ``--runs`` after one warm-up, the two sources
run in turn. Printed ratios: pulsar/ceiling (the goal is at least 80% on local[2]),
pulsar/client, and local[2] over local[1] (the speed-up from a second core).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, spark_session
from _results import write_result
from _shapes import SHAPES, sample_table

from pulsar_spark.client import PulsarClient

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.spark import SPARK_SCHEMA


class _Slice(InputPartition):
    def __init__(self, first: int, last: int) -> None:
        self.first, self.last = first, last


class MemoryReader(DataSourceReader):
    """The batches of an Arrow file, in ``partitions`` tasks of consecutive batches."""

    def __init__(self, path: str, partitions: int) -> None:
        self.path, self.n = path, partitions

    def partitions(self) -> list[InputPartition]:
        with pa.memory_map(self.path) as source:
            count = pa.ipc.open_file(source).num_record_batches
        bounds = [count * i // self.n for i in range(self.n + 1)]
        return [_Slice(a, b) for a, b in itertools.pairwise(bounds)]

    def read(self, partition: _Slice):
        reader = pa.ipc.open_file(pa.memory_map(self.path))
        for i in range(partition.first, partition.last):
            yield reader.get_batch(i)


class MemoryDataSource(DataSource):
    """The ceiling: the same Arrow batches as the Pulsar read, from memory."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_bench_memory"

    def schema(self):
        return SPARK_SCHEMA

    def reader(self, schema):
        return MemoryReader(self.options["path"], int(self.options["partitions"]))


def produce_ours(url: str, topic: str, count: int, size: int, shape: str = "fixed") -> None:
    table = sample_table(shape, min(count, 100_000), size)
    with PulsarClient(url) as client:
        producer = client.create_producer(topic, compression="lz4", max_pending_messages=20_000)
        left = count
        while left:
            part = table.slice(0, min(left, table.num_rows))
            producer.send_batch(part)
            left -= part.num_rows
        producer.flush()
        producer.close()


def read_client(url: str, topic: str, path: str | None = None) -> int:
    """Read the whole topic with the client; write the batches to ``path`` if given."""
    rows = 0
    writer = None
    with PulsarClient(url) as client:
        for batch in client.read_batches(topic, batch_rows=50_000):
            rows += batch.num_rows
            if path is not None:
                if writer is None:
                    writer = pa.ipc.new_file(path, ROW_SCHEMA)
                writer.write_batch(batch)
    if writer is not None:
        writer.close()
    return rows


def best(runs: int, action) -> tuple[float, int]:
    action()  # warm-up
    times, result = [], 0
    for _ in range(runs):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return min(times), result


def alternating(runs: int, first, second, expect: int) -> tuple[float, float]:
    """Best times of two actions run in turn (after a warm-up of each), so that load from
    elsewhere on the machine hits both alike."""
    assert first() == expect and second() == expect
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(runs):
        for action, spent in ((first, times[0]), (second, times[1])):
            started = time.perf_counter()
            count = action()
            spent.append(time.perf_counter() - started)
            assert count == expect, count
    return min(times[0]), min(times[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="fixed",
        help="the messages' sizes and fields (bench/_shapes.py)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4, help="minPartitions / slices")
    parser.add_argument("--service-url", help="an existing broker instead of pulsar-lite")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another option of the pulsar read (repeatable)",
    )
    parser.add_argument("--json-out", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    n = args.messages

    with (
        broker_url(args.service_url, "bench-spark-read-") as url,
        tempfile.TemporaryDirectory() as tmp,
    ):
        topic = f"persistent://public/default/bench-spark-read-{int(time.time())}"
        started = time.perf_counter()
        produce_ours(url, topic, n, args.size, args.shape)
        print(
            f"produced {n:,} x {args.size} B ({args.shape}; LZ4, batched) in "
            f"{time.perf_counter() - started:.1f} s"
        )
        path = str(Path(tmp) / "rows.arrow")
        if read_client(url, topic, path) != n:
            print("the client did not read every message", file=sys.stderr)
            return 1
        client_s, rows = best(args.runs, lambda: read_client(url, topic))
        assert rows == n
        client_rate = n / client_s
        print(f"client alone      {client_rate:>12,.0f} rows/s  best {client_s:.2f} s")

        results: dict[int, tuple[float, float]] = {}
        for cores in (1, 2):
            spark = spark_session(f"bench-spark-read-{cores}", cores, MemoryDataSource)
            pulsar_df = (
                spark.read.format("pulsar")
                .option("service.url", url)
                .option("topic", topic)
                .option("minPartitions", str(args.partitions))
                .options(**dict(o.split("=", 1) for o in args.option))
                .load()
            )
            memory_df = (
                spark.read.format("pulsar_bench_memory")
                .option("path", path)
                .option("partitions", str(args.partitions))
                .load()
            )
            pulsar_s, memory_s = alternating(args.runs, pulsar_df.count, memory_df.count, n)
            results[cores] = (n / pulsar_s, n / memory_s)
            print(f"local[{cores}] pulsar   {n / pulsar_s:>12,.0f} rows/s  best {pulsar_s:.2f} s")
            print(f"local[{cores}] ceiling  {n / memory_s:>12,.0f} rows/s  best {memory_s:.2f} s")
            spark.stop()

        for cores, (pulsar_rate, ceiling_rate) in results.items():
            print(
                f"local[{cores}]: pulsar/ceiling {pulsar_rate / ceiling_rate:.0%} (goal: at "
                f"least 80%), pulsar/client {pulsar_rate / client_rate:.2f}x"
            )
        print(
            f"speed-up from a second core: pulsar {results[2][0] / results[1][0]:.2f}x, "
            f"ceiling {results[2][1] / results[1][1]:.2f}x"
        )
        if args.json_out:
            write_result(
                args.json_out,
                "spark_read",
                messages=n,
                size=args.size,
                shape=args.shape,
                runs=args.runs,
                partitions=args.partitions,
                broker=args.service_url or "pulsar-lite (embedded)",
                best_rows_per_s={
                    "client": client_rate,
                    **{
                        f"local[{cores}]": {"pulsar": rates[0], "ceiling": rates[1]}
                        for cores, rates in results.items()
                    },
                },
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
