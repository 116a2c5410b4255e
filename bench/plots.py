"""Figures of the benchmarks' JSON results, as PNG files for the documentation.

    python bench/plots.py [--results bench/results] [--out docs/assets/performance]

Reads the result files the benchmarks write with ``--json-out`` (and
``bench/streamnative/run.sh``) and draws one PNG per file found:

==========================  ==============================  =============================
result file                 figure                          from
==========================  ==============================  =============================
``client_read.json``        ``client-throughput.png``       ``bench/client_read.py``
``client_write.json``       (same figure, write bars)       ``bench/client_write.py``
``streamnative.json``       ``spark-vs-streamnative.png``   ``bench/streamnative/run.sh``
``spark_read.json``         ``spark-read-ceiling.png``      ``bench/spark_read.py``
``stream.json``             ``stream-latency.png``          ``bench/stream.py``
``spark_pushdown.json``     ``pushdown.png``                ``bench/spark_pushdown.py``
==========================  ==============================  =============================

A figure whose files are all missing is skipped (and said so). Each figure's footer
names the machine and the date of its run. Matplotlib's Agg backend: no display needed.
Prints the path of every PNG written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

ROOT = Path(__file__).resolve().parent.parent
OURS, OTHER, FLOOR = "#1f77b4", "#b0b0b0", "#2ca02c"

Result = dict[str, Any]


def load(results: Path, name: str) -> Result | None:
    path = results / f"{name}.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def footer(fig: Figure, *results: Result) -> None:
    """The machine and date of each result, under the plot."""
    lines = []
    for result in results:
        m = result.get("machine", {})
        start, end = m.get("load_average_start") or [], m.get("load_average_end") or []
        load_text = ""
        if start and end:
            load_text = f", load average {start[0]:.1f} at start, {end[0]:.1f} at end"
        elif start or end:
            load_text = f", load average {(start or end)[0]:.1f}"
        lines.append(
            f"{result['benchmark']}: {result['date'][:10]}, {m.get('cores', '?')} cores "
            f"({m.get('cpu_model', '?')}){load_text}"
        )
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, color="#555555", va="bottom")


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def bar_labels(ax: plt.Axes, bars: Any, fmt: str) -> None:
    for bar in bars:
        height = bar.get_height()
        ax.annotate(
            fmt.format(height),
            (bar.get_x() + bar.get_width() / 2, height),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 2),
            textcoords="offset points",
        )


def paired_bars(
    ax: plt.Axes,
    groups: list[str],
    ours: list[float],
    other: list[float],
    other_label: str,
    ratios: list[float],
) -> None:
    """Two bars per group (the other side, then ours), values in thousands, ratio on top."""
    width = 0.38
    xs = range(len(groups))
    left = ax.bar([x - width / 2 for x in xs], [v / 1e3 for v in other], width, color=OTHER)
    right = ax.bar([x + width / 2 for x in xs], [v / 1e3 for v in ours], width, color=OURS)
    left.set_label(other_label)
    right.set_label("pulsar-spark")
    bar_labels(ax, left, "{:,.0f}k")
    bar_labels(ax, right, "{:,.0f}k")
    top = max([*ours, *other]) / 1e3
    for x, ratio, a, b in zip(xs, ratios, ours, other, strict=True):
        ax.text(
            x,
            max(a, b) / 1e3 + top * 0.09,
            f"{ratio:.2f}x",
            ha="center",
            fontsize=11,
            fontweight="bold",
        )
    ax.set_ylim(0, top * 1.35)
    ax.set_xticks(list(xs), groups)
    ax.legend(loc="upper center", ncol=2, fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)


def client_throughput(results: Path) -> tuple[Figure, str] | None:
    read, write = load(results, "client_read"), load(results, "client_write")
    found = [r for r in (read, write) if r is not None]
    if not found:
        return None
    groups, ours, official, ratios = [], [], [], []
    for label, result in (("read into Arrow", read), ("write, every receipt in", write)):
        if result is None:
            continue
        n = result["messages"]
        o = n / median(result["seconds"]["ours"])
        p = n / median(result["seconds"]["official"])
        groups.append(f"{label}\n{n:,} x {result['size']} B")
        ours.append(o)
        official.append(p)
        ratios.append(o / p)
    fig, ax = plt.subplots(figsize=(7, 4.4))
    paired_bars(ax, groups, ours, official, "official pulsar-client (Python)", ratios)
    ax.set_ylabel("thousand messages/s (median run)")
    ax.set_title("Client throughput: pulsar-spark's client and the official one", fontsize=11)
    fig.subplots_adjust(bottom=0.22)
    footer(fig, *found)
    return fig, "client-throughput.png"


def spark_vs_streamnative(results: Path) -> tuple[Figure, str] | None:
    result = load(results, "streamnative")
    if result is None:
        return None
    groups, ours, theirs, ratios = [], [], [], []
    for op, label in (("read", "batch read, count()"), ("write", "batch write")):
        figures = result[op]
        groups.append(label)
        ours.append(figures["ours"]["median_rows_per_s"])
        theirs.append(figures["streamnative"]["median_rows_per_s"])
        ratios.append(figures["ratio_median"])
    fig, ax = plt.subplots(figsize=(7, 4.4))
    paired_bars(ax, groups, ours, theirs, "StreamNative 3.4.1.3 (Spark 3.4.1)", ratios)
    ax.set_ylabel("thousand rows/s (median run)")
    ax.set_title(
        f"Spark, local[2]: {result['messages']:,} rows x {result['size']} B, "
        f"Apache Pulsar standalone",
        fontsize=11,
    )
    fig.subplots_adjust(bottom=0.2)
    footer(fig, result)
    return fig, "spark-vs-streamnative.png"


def spark_read_ceiling(results: Path) -> tuple[Figure, str] | None:
    result = load(results, "spark_read")
    if result is None:
        return None
    rates = result["best_rows_per_s"]
    groups = [key for key in ("local[1]", "local[2]") if key in rates]
    ours = [rates[g]["pulsar"] for g in groups]
    ceiling = [rates[g]["ceiling"] for g in groups]
    fig, ax = plt.subplots(figsize=(7, 4.4))
    paired_bars(
        ax,
        groups,
        ours,
        ceiling,
        "trivial Python source, the same Arrow batches from memory",
        [o / c for o, c in zip(ours, ceiling, strict=True)],
    )
    ax.set_ylabel("thousand rows/s (best run)")
    ax.set_title(
        f"Spark read, count(): {result['messages']:,} x {result['size']} B, "
        f"{result['partitions']} input partitions",
        fontsize=11,
    )
    fig.subplots_adjust(bottom=0.17)
    footer(fig, result)
    return fig, "spark-read-ceiling.png"


def stream_latency(results: Path) -> tuple[Figure, str] | None:
    result = load(results, "stream")
    if result is None or not result.get("latency"):
        return None
    keys = ("p50_ms", "p90_ms", "p95_ms", "p99_ms", "max_ms")
    names = [k.split("_")[0] for k in keys]
    sides = [
        ("trivial", "trivial Python streaming source", OTHER),
        ("pulsar", "pulsar-spark", OURS),
    ]
    fig, ax = plt.subplots(figsize=(7, 4.4))
    width = 0.38
    xs = range(len(keys))
    for i, (side, label, color) in enumerate(sides):
        if side not in result["latency"]:
            continue
        values = [result["latency"][side][k] for k in keys]
        bars = ax.bar([x + (i - 0.5) * width for x in xs], values, width, color=color)
        bars.set_label(label)
        bar_labels(ax, bars, "{:,.0f}")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("ms from send to foreachBatch")
    ax.set_title(
        f"Streaming latency, default trigger, {result['rate']} messages/s for "
        f"{result['seconds']:g} s",
        fontsize=11,
    )
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.subplots_adjust(bottom=0.17)
    footer(fig, result)
    return fig, "stream-latency.png"


def pushdown(results: Path) -> tuple[Figure, str] | None:
    result = load(results, "spark_pushdown")
    if result is None or not result.get("queries"):
        return None
    labels = {
        "window": "publishTime window\n(last {p:g}%, 4 partitions)",
        "partition": "one partition of 8\n(partition = 3)",
    }
    names = [name for name in ("window", "partition") if name in result["queries"]]
    fig, ax = plt.subplots(figsize=(7, 4.4))
    width = 0.27
    top = 0.0
    series = (
        ("without", "pushdown off", OTHER),
        ("with", "pushdown on", OURS),
        ("floor_best", "floor: a Python source yielding only the answer", FLOOR),
    )
    for i, (key, label, color) in enumerate(series):
        values = []
        for name in names:
            seconds = result["queries"][name]["seconds"][key]
            values.append(min(seconds) if isinstance(seconds, list) else seconds)
        bars = ax.bar([x + (i - 1) * width for x in range(len(names))], values, width, color=color)
        bars.set_label(label)
        bar_labels(ax, bars, "{:.2f} s")
        top = max(top, *values)
    ax.set_ylim(0, top * 1.45)
    ax.set_xticks(
        list(range(len(names))),
        [labels[n].format(p=result.get("window_percent", 1)) for n in names],
    )
    ax.set_ylabel("seconds, count() (best run)")
    ax.set_title(
        f"Filter pushdown: {result['messages']:,} messages x {result['size']} B",
        fontsize=11,
    )
    ax.legend(loc="upper center", fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.subplots_adjust(bottom=0.2)
    footer(fig, result)
    return fig, "pushdown.png"


FIGURES: tuple[Callable[[Path], tuple[Figure, str] | None], ...] = (
    client_throughput,
    spark_vs_streamnative,
    spark_read_ceiling,
    stream_latency,
    pushdown,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "assets" / "performance")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for draw in FIGURES:
        made = draw(args.results)
        if made is None:
            print(f"{draw.__name__}: no result file in {args.results}, skipped")
            continue
        fig, name = made
        target = args.out / name
        fig.savefig(target, dpi=120)
        plt.close(fig)
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
