"""CPU seconds by process while a benchmark measures: where a Spark run's time goes.

:func:`snapshot` reads ``/proc`` for this process and its descendants (the Spark
JVM, its Python daemon and workers, the planning and streaming-source runners,
an embedded broker) and sorts each into a role by its command line and parent;
:func:`report` turns two snapshots and the wall time between them into CPU
seconds per role and the cores each kept busy. Linux only (``/proc``); elsewhere
the report is empty.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["report", "snapshot"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds: user + system) of ``pid``, None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK


def _role(pid: int, parents: dict[int, int], me: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return "gone"
    if pid == me:
        return "driver python (foreachBatch, py4j)"
    if "java" in cmd.split(" ", 1)[0]:
        return "spark jvm"
    if "pulsar-lite" in cmd or "pulsar_lite" in cmd:
        return "broker"
    if "pyspark.daemon" in cmd:
        parent = parents.get(pid)
        if parent is not None and parent in parents and "pyspark.daemon" in _cmd(parent):
            return "python workers (tasks)"
        return "python daemon"
    if "pyspark" in cmd:
        return "python planning/source runner"
    return "other: " + " ".join(Path(arg).name for arg in cmd.split()[:2])


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (role, CPU seconds so far) for this process and its descendants."""
    me = os.getpid()
    stats: dict[int, tuple[int, float]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if entry.name.isdigit() and (found := _stat(int(entry.name))) is not None:
            stats[int(entry.name)] = found
    parents = {pid: parent for pid, (parent, _) in stats.items()}
    ours = {me}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in ours and pid not in ours:
                ours.add(pid)
                changed = True
    return {pid: (_role(pid, parents, me), stats[pid][1]) for pid in ours if pid in stats}


def report(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
           wall: float) -> str:  # fmt: skip
    """CPU seconds per role between two snapshots, and the cores each kept busy."""
    spent: dict[str, float] = {}
    for pid, (role, cpu) in after.items():
        spent[role] = spent.get(role, 0.0) + cpu - before.get(pid, (role, 0.0))[1]
    parts = [
        f"{role} {cpu:.2f} s ({cpu / wall:.2f} cores)"
        for role, cpu in sorted(spent.items(), key=lambda item: -item[1])
        if cpu >= 0.01
    ]
    return f"CPU over {wall:.2f} s wall: " + "; ".join(parts)
