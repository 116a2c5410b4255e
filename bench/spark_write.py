"""df.write.format("pulsar") against its ceiling and the client alone.

    python bench/spark_write.py [--messages 1000000] [--size 100] [--runs 3]
                                [--partitions 4] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started. The DataFrame is
``spark.range(n, numPartitions=N)`` with a ``value`` column of ``--size``
bytes (binary), cached and counted first so that every run writes the same
rows from memory. In the same run:

* **client alone**: our producer's ``send_batch`` of the same rows as one
  Arrow table, then ``flush()`` (every receipt in), rows/s;
* for ``local[1]`` and then ``local[2]``:

  * **pulsar**: ``df.write.format("pulsar")...mode("append").save()`` (LZ4,
    batched; each task returns once the broker acknowledged its rows), rows/s;
  * **ceiling**: a trivial ``DataSourceArrowWriter`` that only counts the
    Arrow batches it gets, rows/s.

Each Spark figure is the best of ``--runs`` after one warm-up, the two sinks
run in turn (every run writes to a fresh topic). Printed ratios:
pulsar/ceiling, pulsar/client and local[2] over local[1].
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, spark_session

from pulsar_spark.client import PulsarClient

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


@dataclass
class _Counted(WriterCommitMessage):
    rows: int


class _CountingWriter(DataSourceArrowWriter):
    def write(self, iterator):
        return _Counted(sum(batch.num_rows for batch in iterator))


class CountingDataSource(DataSource):
    """The ceiling: a sink that takes the Arrow batches and drops them."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_bench_null"

    def writer(self, schema, overwrite):
        return _CountingWriter()


def write_client(url: str, topic: str, table: pa.Table) -> int:
    with PulsarClient(url) as client:
        producer = client.create_producer(topic, compression="lz4")  # our default batches
        producer.send_batch(table)
        producer.flush()
        producer.close()
    return table.num_rows


def best(runs: int, action) -> float:
    action()  # warm-up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--service-url")
    args = parser.parse_args()
    n = args.messages

    with broker_url(args.service_url, "bench-spark-write-") as url:
        stamp = int(time.time())
        serial = iter(range(1_000_000))

        def topic() -> str:
            return f"persistent://public/default/bench-spark-write-{stamp}-{next(serial)}"

        table = pa.table({"value": pa.array([b"x" * args.size] * n, pa.binary())})
        client_s = best(args.runs, lambda: write_client(url, topic(), table))
        client_rate = n / client_s
        print(f"client alone      {client_rate:>12,.0f} rows/s  best {client_s:.2f} s")

        results: dict[int, tuple[float, float]] = {}
        for cores in (1, 2):
            spark = spark_session(f"bench-spark-write-{cores}", cores, CountingDataSource)
            df = (
                spark.range(0, n, 1, args.partitions)
                .selectExpr(f"cast(repeat('x', {args.size}) as binary) as value")
                .cache()
            )
            assert df.count() == n

            def write_pulsar(df=df) -> None:
                (
                    df.write.format("pulsar")
                    .option("service.url", url)
                    .option("topic", topic())
                    .option("compressionType", "LZ4")
                    .mode("append")
                    .save()
                )

            def write_null(df=df) -> None:
                df.write.format("pulsar_bench_null").mode("append").save()

            write_pulsar()
            write_null()  # warm-up
            spent: tuple[list[float], list[float]] = ([], [])
            for _ in range(args.runs):  # in turn, so that outside load hits both alike
                for action, times in ((write_pulsar, spent[0]), (write_null, spent[1])):
                    started = time.perf_counter()
                    action()
                    times.append(time.perf_counter() - started)
            pulsar_s, null_s = min(spent[0]), min(spent[1])
            results[cores] = (n / pulsar_s, n / null_s)
            print(f"local[{cores}] pulsar   {n / pulsar_s:>12,.0f} rows/s  best {pulsar_s:.2f} s")
            print(f"local[{cores}] ceiling  {n / null_s:>12,.0f} rows/s  best {null_s:.2f} s")
            df.unpersist()
            spark.stop()

        for cores, (pulsar_rate, ceiling_rate) in results.items():
            print(
                f"local[{cores}]: pulsar/ceiling {pulsar_rate / ceiling_rate:.0%}, "
                f"pulsar/client {pulsar_rate / client_rate:.2f}x"
            )
        print(
            f"speed-up from a second core: pulsar {results[2][0] / results[1][0]:.2f}x, "
            f"ceiling {results[2][1] / results[1][1]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
