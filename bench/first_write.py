"""The first write of a Spark session against the later ones, ours and a trivial sink's.

    python bench/first_write.py [--messages 1000000] [--size 100] [--runs 3] [--later 3]
                                [--service-url URL]

Each run is a fresh driver process (``--child``: a new JVM and new Python workers) that
caches ``--messages`` rows of ``--size`` bytes, counts them, then writes them ``1 +
--later`` times to one sink, timing each write: the ``pulsar`` format (to a fresh
topic each time), or ``pulsar_bench_null``, a Python sink that drops its Arrow batches.
The two sinks' runs alternate. Without ``--service-url`` an embedded pulsar-lite is
started.

A session's first write of any Python data source starts Spark's Python machinery:
one daemon per worker module (the data source's creation, the write's planning, the
tasks, the commit), each a fresh interpreter importing pyspark and pyarrow. The trivial
sink's first write measures that; ours adds what the connector does once per process.
Printed: per sink, the median first write, the median of the later ones and their ratio
(the goal: ours at most 1.5x), and what our first write costs beyond the trivial sink's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _broker import broker_url, child_report, run_child, spark_session
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


class _Dropped(WriterCommitMessage):
    pass


class _DroppingWriter(DataSourceArrowWriter):
    def write(self, iterator):  # type: ignore[no-untyped-def]
        for _ in iterator:
            pass
        return _Dropped()


class DroppingDataSource(DataSource):
    """A Python sink that takes its Arrow batches and drops them."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_bench_null"

    def writer(self, schema, overwrite):  # type: ignore[no-untyped-def]
        return _DroppingWriter()


def child(sink: str, url: str, messages: int, size: int, later: int) -> None:
    spark = spark_session(f"bench-first-write-{sink}", 2, DroppingDataSource)
    df = (
        spark.range(0, messages, 1, 4)
        .selectExpr(f"cast(repeat('x', {size}) as binary) as value")
        .cache()
    )
    assert df.count() == messages
    stamp = time.time_ns()
    times = []
    for n in range(1 + later):
        writer = df.write.format(sink).mode("append")
        if sink == "pulsar":
            topic = f"persistent://public/default/bench-first-write-{stamp}-{n}"
            writer = writer.option("service.url", url).option("topic", topic)
        started = time.perf_counter()
        writer.save()
        times.append(time.perf_counter() - started)
    spark.stop()
    child_report(first=times[0], later=statistics.median(times[1:]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--later", type=int, default=3)
    parser.add_argument("--service-url")
    parser.add_argument("--child", nargs=2, metavar=("SINK", "URL"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.messages, args.size, args.later)
        return 0
    sizes = ["--messages", str(args.messages), "--size", str(args.size)]
    sizes += ["--later", str(args.later)]
    found: dict[str, list[dict]] = {"pulsar": [], "pulsar_bench_null": []}
    with broker_url(args.service_url, "bench-first-write-") as url:
        for run in range(args.runs):
            for sink, results in found.items():
                result = run_child(__file__, sink, url, *sizes)
                results.append(result)
                print(f"run {run + 1} {sink:<18} first {result['first']:.2f} s, "
                      f"later {result['later']:.2f} s")  # fmt: skip
    medians = {
        sink: (
            statistics.median(r["first"] for r in results),
            statistics.median(r["later"] for r in results),
        )
        for sink, results in found.items()
    }
    for sink, (first, later) in medians.items():
        print(f"{sink:<18} first {first:.2f} s, later {later:.2f} s: {first / later:.1f}x")
    ours, trivial = medians["pulsar"], medians["pulsar_bench_null"]
    print(
        f"ours beyond the trivial sink: first write +{ours[0] - trivial[0]:.2f} s, "
        f"later writes +{ours[1] - trivial[1]:.2f} s; ours first/later {ours[0] / ours[1]:.1f}x "
        "(goal 1.5x)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
