"""Reliability figures: :func:`figure` (one ``FIGURE`` line per measurement, kept as junit
properties for the run's summary) and what the reliability tests cost of a run's time.

:data:`RELIABILITY_FILES` is the one list of the reliability test files (issue 14: faults
at the Spark level, stress, soak, slow and odd links, send and read faults, memory, chunk
bounds); :func:`time_share` sums their phases' durations against the whole run's, for
the terminal summary (``plugin.pytest_terminal_summary``). Imports nothing of the package,
so that client tests use it without loading Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

__all__ = ["RELIABILITY_FILES", "figure", "time_share"]

#: The reliability tests, by file (paths from the repository root).
RELIABILITY_FILES = frozenset(
    {
        "tests/spark/test_faults_batch.py",
        "tests/spark/test_faults_stream.py",
        "tests/spark/test_stock_broker.py",
        "tests/spark/test_stream_faults_read.py",
        "tests/spark/test_stream_task_retry.py",
        "tests/spark/test_stress.py",
        "tests/spark/test_soak.py",
        "tests/client/test_links.py",
        "tests/client/test_send_faults.py",
        "tests/client/test_read_faults.py",
        "tests/client/test_read_memory.py",
        "tests/client/test_chunk_expiry.py",
    }
)


def figure(record: Callable[[str, object], None] | None, name: str, **values: object) -> str:
    """Print ``FIGURE <name>: k=v, ...`` (shown by ``pytest -s`` and in failure reports)
    and record each value as a junit property (``record_property``), which the terminal
    summary lists under "reliability figures"; return the line."""
    line = f"FIGURE {name}: " + ", ".join(f"{k}={v}" for k, v in values.items())
    print(line, flush=True)
    if record is not None:
        for key, value in values.items():
            record(f"{name}.{key}", value)
    return line


def time_share(stats: Mapping[str, Iterable[object]]) -> str | None:
    """``reliability tests: R s of T s of test time (P%)`` from a terminal reporter's
    ``stats``: R sums the setup, call and teardown durations of the tests in
    :data:`RELIABILITY_FILES`, T those of every test; None when none of them ran."""
    total = reliable = 0.0
    seen = False
    for reports in stats.values():
        for report in reports:
            duration = getattr(report, "duration", None)
            nodeid = getattr(report, "nodeid", None)
            if getattr(report, "when", None) is None or duration is None or nodeid is None:
                continue  # warnings, deselected items, collection reports
            total += duration
            if nodeid.partition("::")[0] in RELIABILITY_FILES:
                reliable += duration
                seen = True
    if not seen or not total:
        return None
    share = 100 * reliable / total
    return f"reliability tests: {reliable:.0f} s of {total:.0f} s of test time ({share:.0f}%)"
