"""Filter pushdown: a time window and one partition of a big topic, with and without it.

    python bench/spark_pushdown.py [--messages 10000000] [--size 20] [--runs 3]
                                   [--window-percent 1]

Two embedded pulsar-lite brokers are started (every topic has 4 partitions on the
first and 8 on the second). Our producer writes ``--messages``
payloads of ``--size`` bytes to a topic of each; the last ``--window-percent`` percent
of the first one's messages are sent after a pause, and the time before them noted.
Then, in one ``local[2]`` session (``pushFilters=true``, a DataFrame per query), each
query once to warm up and ``--runs`` times with ``spark.sql.python.filterPushdown.enabled``
off and on, in turn (best of each):

* **window**: ``load().where(publishTime >= T).count()`` on the 4-partition topic;
  the goal is pushdown at least 20x faster, with the same count;
* **partition**: ``load().where("partition = 3").count()`` on the 8-partition topic;
  the goal is at least 6x.

Each query is also timed on a **floor**: a trivial Python data source with as many
input partitions, whose ``pushFilters`` takes every filter and whose tasks yield just the
answer's rows, as our reader decodes them, from a memory-mapped Arrow file (no broker).
No Python source can answer faster in that session, so ``without / floor`` is the most
pushdown could gain there.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import spark_session
from _results import write_result
from pyspark import cloudpickle
from spark_read import MemoryDataSource, MemoryReader, produce_ours, read_client
from support.lite import PulsarLite

# Spark's workers cannot import this folder's modules: ship spark_read's classes by value.
cloudpickle.register_pickle_by_value(sys.modules[MemoryReader.__module__])

CONF = "spark.sql.python.filterPushdown.enabled"


class _FloorReader(MemoryReader):
    """The answer's rows from an Arrow file; every filter taken."""

    def pushFilters(self, filters):
        return iter(())


class FloorDataSource(MemoryDataSource):
    """A Python source answering with the rows of the answer only, from memory."""

    @classmethod
    def name(cls) -> str:
        return "pulsar_bench_floor"

    def reader(self, schema):
        return _FloorReader(self.options["path"], int(self.options["partitions"]))


def answer_file(url: str, topic: str, rows: int, size: int, path: Path) -> str:
    """An Arrow file of ``rows`` rows as our reader decodes them (from a scratch topic)."""
    produce_ours(url, topic, rows, size)
    assert read_client(url, topic, str(path)) == rows
    return str(path)


def floor(spark, path: str, partitions: int, where: str, runs: int) -> float:
    """Best time of the floor source's ``where(...).count()`` (pushdown on)."""
    spark.conf.set(CONF, "true")
    df = (
        spark.read.format("pulsar_bench_floor")
        .option("path", path)
        .option("partitions", partitions)
        .load()
        .where(where)
    )
    best = float("inf")
    for _ in range(runs + 1):
        started = time.perf_counter()
        df.count()
        best = min(best, time.perf_counter() - started)
    return best


def timed(spark, setting: str, query) -> tuple[float, int]:
    spark.conf.set(CONF, setting)
    started = time.perf_counter()
    count = query()
    return time.perf_counter() - started, count


def compare(
    spark, name: str, query, runs: int, goal: float, least: float, found: dict | None = None
) -> bool:
    timed(spark, "false", query)  # warm-up, both ways
    timed(spark, "true", query)
    off: list[float] = []
    on: list[float] = []
    counts = set()
    for _ in range(runs):
        for setting, into in (("false", off), ("true", on)):
            seconds, count = timed(spark, setting, query)
            into.append(seconds)
            counts.add(count)
    ratio = min(off) / min(on)
    same = len(counts) == 1
    if found is not None:
        found[name] = {
            "count": sorted(counts),
            "seconds": {"without": off, "with": on, "floor_best": least},
            "goal": goal,
        }
    print(
        f"{name:10s} count {sorted(counts)}  without {min(off):7.3f} s  with {min(on):7.3f} s"
        f"  ratio {ratio:6.1f}x (goal {goal:g}x){'' if same else '  COUNTS DIFFER'}",
        flush=True,
    )
    print(
        f"{'':10s} floor {least:7.3f} s: at most {min(off) / least:6.1f}x for any Python "
        f"source here; pushdown reaches {least / min(on):.0%} of the floor's speed",
        flush=True,
    )
    return same and ratio >= goal


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=10_000_000)
    parser.add_argument("--size", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--window-percent", type=float, default=1.0)
    parser.add_argument("--json-out", metavar="PATH", help="also write the results as JSON")
    args = parser.parse_args()
    found: dict = {}
    root = Path(tempfile.mkdtemp(prefix="bench-pushdown-"))
    four = PulsarLite(root / "four", name="bench-4", default_partitions=4)
    eight = PulsarLite(root / "eight", name="bench-8", default_partitions=8)
    four.start()
    eight.start()
    try:
        topic = "persistent://public/default/pushdown-window"
        tail = max(1, int(args.messages * args.window_percent / 100))
        started = time.perf_counter()
        produce_ours(four.service_url, topic, args.messages - tail, args.size)
        time.sleep(0.05)
        cut = dt.datetime.now(dt.timezone.utc)
        time.sleep(0.05)
        produce_ours(four.service_url, topic, tail, args.size)
        other = "persistent://public/default/pushdown-partitions"
        produce_ours(eight.service_url, other, args.messages, args.size)
        print(
            f"produced 2 x {args.messages:,} messages of {args.size} B in "
            f"{time.perf_counter() - started:.1f} s; window: the last {tail:,}",
            flush=True,
        )
        scratch = "persistent://public/default/pushdown-answer-"
        window_file = answer_file(
            eight.service_url, scratch + "window", tail, args.size, root / "window.arrow"
        )
        partition_file = answer_file(
            four.service_url, scratch + "partition", args.messages // 8, args.size,
            root / "partition.arrow",
        )  # fmt: skip
        spark = spark_session("bench-pushdown", 2)
        spark.dataSource.register(FloorDataSource)

        def load(url: str, name: str):
            return (
                spark.read.format("pulsar")
                .option("service.url", url)
                .option("topic", name)
                .option("pushFilters", "true")
                .load()
            )

        since = f"publishTime >= '{cut.isoformat()}'"
        window = compare(
            spark, "window", lambda: load(four.service_url, topic).where(since).count(),
            args.runs, 20, floor(spark, window_file, 4, since, args.runs), found,
        )  # fmt: skip
        partition = compare(
            spark,
            "partition",
            lambda: load(eight.service_url, other).where("partition = 3").count(),
            args.runs,
            6,
            floor(spark, partition_file, 1, "partition = 3", args.runs),
            found,
        )
        spark.stop()
        if args.json_out:
            write_result(
                args.json_out,
                "spark_pushdown",
                messages=args.messages,
                size=args.size,
                runs=args.runs,
                window_percent=args.window_percent,
                broker="pulsar-lite (embedded; 4 and 8 partitions)",
                queries=found,
            )
        return 0 if window and partition else 1
    finally:
        four.close()
        eight.close()


if __name__ == "__main__":
    sys.exit(main())
