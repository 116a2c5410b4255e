"""The process base of every test broker: start, stop, kill, restart, log and memory of one process.

:class:`BrokerProcess` owns one broker process: it spawns it in a process group of its own
(behind :func:`orphan_guard`) with stdout and stderr appended to ``root/broker.log`` (each
start headed by a ``=== fixture: start #N of NAME ... ===`` line), waits for readiness
against a deadline, stops it (SIGTERM to the group, a grace period, then SIGKILL), kills
and restarts it, reads its log and its resident memory. Subclasses
(:class:`tests.support.lite.PulsarLite`, :class:`tests.support.apache.ApachePulsar`) say
what differs: the command line, the configuration written before each start, how ports
are picked and what "ready" means. Every instance not yet closed is killed at
interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TypeVar

__all__ = ["BrokerProcess", "BrokerStartError", "orphan_guard"]


class BrokerStartError(RuntimeError):
    """A broker did not come up; the message ends with the tail of its log."""

    def __init__(self, message: str, log_tail: str) -> None:
        super().__init__(f"{message}\n--- broker log (tail) ---\n{log_tail}")
        self.log_tail = log_tail


@functools.cache
def orphan_guard() -> tuple[str, ...]:
    """A command prefix that SIGKILLs the broker when the thread that started it dies.

    Teardown and an atexit hook kill brokers on every orderly exit, but not when the test
    process itself is killed or aborts (the official client can abort it: quirk 3).
    util-linux ``setpriv --pdeathsig`` sets PR_SET_PDEATHSIG and execs the broker, so
    the pid stays the broker's. Caveat of PR_SET_PDEATHSIG: the signal follows the
    *thread* that spawned the broker, so start brokers from a thread that outlives them
    (fixtures run in the main thread).
    """
    setpriv = shutil.which("setpriv")
    if setpriv is None or not sys.platform.startswith("linux"):
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--")


_B = TypeVar("_B", bound="BrokerProcess")


class BrokerProcess:
    """One broker process with its files in ``root``; subclasses fill in the specifics.

    ``root/broker.log`` gets stdout and stderr of every start, appended, each start headed
    by a ``=== fixture: start #N of NAME ... ===`` line, and a ``=== fixture: NAME ... ===``
    line for each stop, kill and teardown. A ``shared`` (session) instance refuses
    :meth:`stop`, :meth:`kill` and :meth:`restart`; :meth:`close` kills it all the same.

    Subclasses define :meth:`_command` (without the :func:`orphan_guard` prefix, which
    this class puts in front) and :meth:`_probe`, and may override
    :meth:`_pick_ports`, :meth:`_ports_movable`, :meth:`_prepare`, :meth:`_env`,
    :meth:`_before_start`, :meth:`_after_ready`, :meth:`_cleanup` and the class
    attributes below.
    """

    #: The broker kind, as the ``broker`` fixture names it (``lite``, ``apache``).
    kind = ""
    #: Names the broker in failed-test report sections.
    report_label = "broker"
    #: Whether the run's end prints this broker's :meth:`figures`.
    summarize_figures = False
    #: Lines of log :meth:`log_tail` returns by default (errors and reports).
    tail_lines = 80
    #: :meth:`log_tail` reads at most this many bytes from the end of the log.
    tail_bytes = 256 * 1024
    #: Default grace period between SIGTERM and SIGKILL, seconds.
    stop_timeout = 10.0
    #: Seconds between two readiness probes.
    probe_interval = 0.1
    #: The fixture named when a shared instance refuses to stop.
    fresh_fixture = "fresh_*"
    #: What exited, in :class:`BrokerStartError` messages.
    process_label = "the broker"
    #: Put after the name in start headers.
    header_label = ""

    def __init__(self, root: Path, *, name: str, shared: bool, start_timeout: float) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.shared = shared
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_start = 0  # log offset where the current start's output begins
        self.starts = 0
        #: Seconds from spawn to ready, one per successful start; [0] is the cold start.
        self.start_seconds: list[float] = []
        #: Seconds each :meth:`stop` took, and whether the last one needed SIGKILL.
        self.stop_seconds: list[float] = []
        self.stop_needed_sigkill = False
        self.server_version: str | None = None
        _LIVE.add(self)

    # -- what subclasses say ------------------------------------------------------------

    def _command(self, first: bool) -> list[str]:
        """The command line of a start (``first``: the instance's first start)."""
        raise NotImplementedError

    def _probe(self, left: float) -> bool:
        """Whether the broker is ready now (``left``: seconds to the deadline); sets
        :attr:`server_version`."""
        raise NotImplementedError

    def _ports_movable(self) -> bool:
        """Whether a first start that lost a race for a port may try other ports."""
        return True

    def _pick_ports(self, attempt: int) -> None:
        """Choose the ports of the first start's ``attempt``-th try (from 1)."""

    def _before_start(self) -> None:
        """Run by :meth:`start` once, before any try."""

    def _prepare(self, first: bool) -> None:
        """Write the configuration (and on a ``first`` start, set up the data)."""

    def _env(self) -> Mapping[str, str] | None:
        """The process environment (None: this process's)."""
        return None

    def _not_ready(self, timeout: float) -> str:
        return f"{self.name}: {self.process_label} was not ready within {timeout:.1f} s"

    def _after_ready(self, elapsed: float) -> None:
        """Checks after readiness; raise :class:`BrokerStartError` to fail the start."""

    def _cleanup(self) -> None:
        """Run by :meth:`close` after the process is gone."""

    # -- paths and state ----------------------------------------------------------------

    @property
    def log_path(self) -> Path:
        return self.root / "broker.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def cold_start_seconds(self) -> float | None:
        """Spawn-to-ready time of the first start (empty data directory)."""
        return self.start_seconds[0] if self.start_seconds else None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> float:
        """Start the broker and wait until it is ready; return the seconds it took.

        The first start may retry on other ports if it lost a race for one (unless the
        ports are fixed); a restart comes back on the same ports and data.

        Raises:
            BrokerStartError: with the tail of the log, after killing the process.
        """
        if self.running:
            msg = f"{self.name} is already running (pid {self.pid})"
            raise RuntimeError(msg)
        timeout = self.start_timeout if timeout is None else timeout
        self._before_start()
        first = self.starts == 0
        attempts = 3 if first and self._ports_movable() else 1
        for attempt in range(1, attempts + 1):
            if first:
                self._pick_ports(attempt)
            try:
                return self._start_once(timeout, first=first)
            except BrokerStartError as exc:
                if attempt == attempts or "Address already in use" not in exc.log_tail:
                    raise
        msg = "unreachable"
        raise AssertionError(msg)

    def _start_once(self, timeout: float, *, first: bool) -> float:
        self._prepare(first)
        self.starts += 1
        cmd = [*orphan_guard(), *self._command(first)]
        with self.log_path.open("ab") as log:
            header = (
                f"=== fixture: start #{self.starts} of {self.name}{self.header_label} at "
                f"{time.strftime('%Y-%m-%dT%H:%M:%S')}: {' '.join(cmd)} ===\n"
            )
            log.write(header.encode())
            log.flush()
            self._log_start = log.tell()
            t0 = time.monotonic()
            env = self._env()
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.root,
                env=None if env is None else dict(env),
                start_new_session=True,  # its own process group: stop and kill take all
            )
        deadline = t0 + timeout
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self._proc = None
                msg = f"{self.name}: {self.process_label} exited with status {rc} while starting"
                raise BrokerStartError(msg, self.log_tail())
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill_proc()
                raise BrokerStartError(self._not_ready(timeout), self.log_tail())
            if self._probe(left) and self._proc.poll() is None:
                elapsed = time.monotonic() - t0
                break
            time.sleep(self.probe_interval)
        try:
            self._after_ready(elapsed)
        except BrokerStartError:
            self._kill_proc()
            raise
        self.start_seconds.append(elapsed)
        return elapsed

    def _guard(self, what: str) -> None:
        if self.shared:
            msg = (
                f"{what}() on the shared session broker {self.name}: use the "
                f"{self.fresh_fixture} fixture for tests that stop or restart a broker"
            )
            raise RuntimeError(msg)

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM to the process group, wait up to ``timeout`` (default
        :attr:`stop_timeout`), then SIGKILL. Returns the exit status."""
        self._guard("stop")
        timeout = self.stop_timeout if timeout is None else timeout
        proc = self._proc
        if proc is None:
            return None
        t0 = time.monotonic()
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout)
                self.stop_needed_sigkill = False
            except subprocess.TimeoutExpired:
                self.stop_needed_sigkill = True
                self._note(f"no exit {timeout:g} s after SIGTERM: SIGKILL")
        rc = self._kill_proc()
        self.stop_seconds.append(time.monotonic() - t0)
        self._note(f"stopped (status {rc})")
        return rc

    def kill(self) -> int | None:
        """SIGKILL the process group, as a crash would. Returns the exit status."""
        self._guard("kill")
        rc = self._kill_proc()
        self._note(f"killed with SIGKILL (status {rc})")
        return rc

    def restart(self, timeout: float | None = None) -> float:
        """:meth:`stop` then :meth:`start` on the same ports and data; the start time."""
        self._guard("restart")
        self.stop()
        return self.start(timeout)

    def _kill_proc(self) -> int | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: no stray children
        return proc.wait()

    def close(self) -> None:
        """Teardown: make sure the process is gone (SIGKILL), whatever ``shared`` says."""
        if self._proc is not None:
            self._kill_proc()
            self._note("killed at teardown")
        self._cleanup()
        _LIVE.discard(self)

    def _note(self, text: str) -> None:
        with contextlib.suppress(OSError), self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"=== fixture: {self.name} {text} ===\n")

    def __enter__(self: _B) -> _B:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- observation --------------------------------------------------------------------

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_text(self, since: int = 0) -> str:
        """The log from byte offset ``since`` on."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int | None = None, since: int = 0) -> str:
        """The last ``lines`` (default :attr:`tail_lines`) lines of the log (of the part
        from ``since`` on), read from at most its last :attr:`tail_bytes` bytes."""
        lines = self.tail_lines if lines is None else lines
        text = self.log_text(max(since, self.log_size() - self.tail_bytes))
        return "\n".join(text.splitlines()[-lines:])

    def rss_bytes(self) -> int:
        """Resident memory of the broker process (VmRSS from /proc/PID/status)."""
        if not self.running:
            msg = f"{self.name} is not running"
            raise RuntimeError(msg)
        status = Path(f"/proc/{self.pid}/status").read_text()
        m = re.search(r"^VmRSS:\s+(\d+) kB", status, re.MULTILINE)
        if not m:
            msg = f"no VmRSS in /proc/{self.pid}/status"
            raise RuntimeError(msg)
        return int(m.group(1)) * 1024

    def figures(self) -> str:
        """Cold start, restarts, stops and RSS as one line, for reports."""
        parts = [f"{self.name}:"]
        if self.start_seconds:
            parts.append(f"cold start {self.start_seconds[0]:.1f} s")
        if len(self.start_seconds) > 1:
            parts.append("restarts " + ", ".join(f"{s:.1f}" for s in self.start_seconds[1:]) + " s")
        if self.stop_seconds:
            parts.append("stops " + ", ".join(f"{s:.1f}" for s in self.stop_seconds) + " s")
        if self.running:
            parts.append(f"RSS {self.rss_bytes() / 2**20:.0f} MiB")
        return " ".join(parts)


#: Every broker not yet closed, killed at interpreter exit as a last resort.
_LIVE: set[BrokerProcess] = set()


def _kill_leftovers() -> None:
    for broker in list(_LIVE):
        with contextlib.suppress(Exception):
            broker.close()


atexit.register(_kill_leftovers)
