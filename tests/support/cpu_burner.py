"""Keep the machine's cores busy beside a command: ``python -m tests.support.cpu_burner``.

The reliability tests must hold on a machine that is busy with something else, as a CI
runner shared with other jobs is. This runs ``--burners`` processes (default: one per
core) that spin at full speed, beside the command given after ``--``, and stops them when
it ends; the command's exit status is its own::

    python -m tests.support.cpu_burner -- python -m pytest tests/client/test_send_faults.py

``--runs N`` runs the command N times in a row, each beside fresh burners, and stops at
the first failure. Each run's status and seconds are printed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["burning"]


def _spin() -> None:
    while True:
        pass


@contextmanager
def burning(count: int) -> Iterator[list[multiprocessing.Process]]:
    """``count`` processes spinning on the CPU for the duration of the block."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.join()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.cpu_burner")
    parser.add_argument("--burners", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    status = 0
    for run in range(1, args.runs + 1):
        t0 = time.monotonic()
        with burning(args.burners):
            status = subprocess.call(command)
        took = time.monotonic() - t0
        print(
            f"cpu_burner: run {run} of {args.runs} beside {args.burners} burners: "
            f"status {status} in {took:.0f} s",
            flush=True,
        )
        if status != 0:
            break
    return status


if __name__ == "__main__":
    sys.exit(main())
