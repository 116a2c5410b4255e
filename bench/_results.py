"""Result files of the benchmarks: one JSON object per run, for ``bench/plots.py``.

Every file records what produced it (``command``), when (``date``, UTC) and where
(``machine``: cores, CPU model, load averages when the run started and ended), next to
the benchmark's own ``figures``. ``--json-out PATH`` of a benchmark writes one.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

__all__ = ["command_line", "machine", "write_result"]

ROOT = Path(__file__).resolve().parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def machine(load_at_start: list[float] | None = None) -> dict[str, Any]:
    """Cores, CPU model, OS, Python, and the 1/5/15-minute load averages now (and at start)."""
    found: dict[str, Any] = {
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "system": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load_average_end": _load(),
    }
    if load_at_start is not None:
        found["load_average_start"] = load_at_start
    return found


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed from the repository root: ``python bench/x.py ARGS``."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    try:
        argv[0] = str(script.relative_to(ROOT))
    except ValueError:
        argv[0] = str(script)
    return shlex.join(["python", *argv])


_START_LOAD = _load()


def write_result(
    path: str | os.PathLike[str], benchmark: str, *, command: str | None = None, **figures: Any
) -> Path:
    """Write ``{"benchmark", "date", "command", "machine", **figures}`` to ``path``;
    ``command`` defaults to this process's own command line."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": benchmark,
        "date": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
        "command": command or command_line(),
        "machine": machine(_START_LOAD),
        **figures,
    }
    target.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {target}")
    return target
