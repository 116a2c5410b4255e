"""What a Spark Python worker pays to import the connector for a read or a write.

    python bench/worker_import.py [--runs 15] [--list 12]

Each run is a fresh interpreter that first imports what a Python data source worker has
loaded anyway (pyspark's worker modules, pyarrow, pyspark.sql.datasource), then times the
import of the module its pickled reader or writer names: ``pulsar_spark.spark.reader``
for a batch or stream read, ``pulsar_spark.spark.writer`` for a write. Printed: the
median and best of ``--runs`` (the goal is under 0.15 s), and, from ``-X importtime`` of
one more run, the connector's and its dependencies' heaviest modules.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

#: What a worker running a Python data source has imported before it unpickles ours.
BASELINE = (
    "import pyspark.worker, pyspark.serializers, pyarrow, pyspark.sql.datasource, "
    "pyspark.sql.types, pyspark.sql.pandas.types"
)
PATHS = {"read": "pulsar_spark.spark.reader", "write": "pulsar_spark.spark.writer"}


def timed(module: str) -> float:
    code = (
        f"{BASELINE}\nimport time\nt = time.perf_counter()\nimport {module}\n"
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _import_times(code: str) -> list[tuple[int, str]]:
    """(own microseconds, module) of each module ``code`` imports (``-X importtime``)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, check=True
    )
    rows = []
    for line in out.stderr.splitlines():
        head, sep, rest = line.partition("|")
        if not sep or not head.startswith("import time:") or "self [us]" in head:
            continue
        rows.append((int(head.split(":")[1]), rest.partition("|")[2].strip()))
    return rows


def heaviest(module: str, count: int) -> list[tuple[int, str]]:
    """The ``count`` modules importing ``module`` adds to the baseline that take longest."""
    before = {name for _, name in _import_times(BASELINE)}
    added = [row for row in _import_times(f"{BASELINE}\nimport {module}") if row[1] not in before]
    return sorted(added, reverse=True)[:count]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--list", type=int, default=12, help="heaviest modules to list")
    args = parser.parse_args()
    worst = 0.0
    for path, module in PATHS.items():
        times = [timed(module) for _ in range(args.runs)]
        median = statistics.median(times)
        worst = max(worst, median)
        print(f"{path:5s} import {module}: median {median * 1000:.0f} ms, best "
              f"{min(times) * 1000:.0f} ms over {args.runs} runs (goal < 150 ms)")  # fmt: skip
        for own, name in heaviest(module, args.list):
            print(f"        {own / 1000:6.1f} ms  {name}")
    return 0 if worst < 0.15 else 1


if __name__ == "__main__":
    sys.exit(main())
