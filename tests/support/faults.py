"""Faults that land: injected by the client's progress, tried again when refused.

A fault-injection test means something only if its faults landed, and a fault timed by
the clock (a sleep, "unload every 0.1 s for 3 s") misses on a busy machine: the client
finishes before the fault comes, and the test fails on its harness instead of on the
product. The helpers here tie faults to the client's progress instead:

:func:`land`
    one fault now (an admin unload, say), tried again while it is refused (an unload
    meets ``AdminError`` while the topic is being loaded), ``tries`` times at most; then
    the test fails saying the fault did not land. :func:`unload` is the usual one.
:class:`Storm`
    the same fault again and again from a thread, each one once the client got on
    (``progress()`` grew by ``step`` since the last one landed) and ``interval`` seconds
    after it. The client keeps pace with :meth:`Storm.wait_due`: at chosen points of its
    work it waits (with a generous bound) until the faults due by then landed, so it
    cannot run to its end first. A storm sized by the data (``at_least`` faults, one due
    every ``every`` units of the client's work) lands them all, however slow the machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from .admin import AdminError, PulsarAdmin

__all__ = ["TRIES", "Storm", "land", "try_to_land", "unload", "unload_storm"]

T = TypeVar("T")
#: Attempts at one fault before a test says it did not land (about 15 s of refusals).
TRIES = 20
Refusals = tuple[type[Exception], ...]


def _pause(attempt: int) -> float:
    """Seconds to wait after the ``attempt``-th refusal: 0.05, 0.1, ... up to 1."""
    return min(1.0, 0.05 * 2.0 ** (attempt - 1))


def try_to_land(
    fault: Callable[[], object],
    *,
    tries: int = TRIES,
    refused: Refusals = (AdminError,),
    wait: Callable[[float], bool] | None = None,
) -> str | None:
    """Run ``fault`` until it returns without raising one of ``refused``, ``tries`` times
    at most. None once it landed, else the last refusal. ``wait(seconds)`` pauses between
    tries and returns True to give up at once (a storm stopping); default: sleep."""
    last = "never tried"
    for attempt in range(1, tries + 1):
        try:
            fault()
        except refused as exc:
            last = f"{type(exc).__name__}: {exc}"
            if attempt < tries:
                if wait is None:
                    time.sleep(_pause(attempt))
                elif wait(_pause(attempt)):
                    return last
            continue
        return None
    return last


def land(
    fault: Callable[[], T], what: str, *, tries: int = TRIES, refused: Refusals = (AdminError,)
) -> T:
    """``fault()``, tried again while it raises one of ``refused``; the test fails, saying
    ``what`` did not land, after ``tries`` refusals. Returns what the fault returned."""
    result: list[T] = []
    error = try_to_land(lambda: result.append(fault()), tries=tries, refused=refused)
    if error is not None:
        pytest.fail(f"{what} did not land after {tries} tries (last: {error})")
    return result[0]


def unload(admin: PulsarAdmin, topic: str, *, tries: int = TRIES) -> None:
    """Unload ``topic`` (every partition of a partitioned one), tried again while the
    broker refuses (see :func:`land`)."""
    land(lambda: admin.unload(topic), f"the unload of {topic}", tries=tries)


class Storm:
    """``fault`` again and again from a thread while in a ``with``, each time once the
    client got on, and tried again while refused.

    The next fault waits until ``progress()`` (a count that grows as the client gets on:
    rows read, receipts back, producers made) grew by ``step`` since the last fault
    landed, and ``interval`` seconds have passed since (or since the start, for the first):
    each fault meets a client that is back at work, however long its reconnects take.
    A fault refused (one of ``refused`` raised) is tried again, ``tries`` times at most;
    then the storm stops and the test fails, saying so, at the client's next
    :meth:`wait_due`, :meth:`check` or at the end of the ``with``.

    The client must not finish before ``at_least`` faults landed: it calls
    :meth:`wait_due` as it goes (one fault due per ``every`` units of its work; ``every``
    well above ``step`` in ``progress()`` terms, or the two wait for each other), or loops
    until :attr:`landed` is enough. Leaving the ``with`` with fewer fails the test. The
    storm ends after ``at_most`` faults (None: when the ``with`` ends).
    """

    def __init__(
        self,
        fault: Callable[[], object],
        progress: Callable[[], int],
        *,
        what: str,
        at_least: int = 1,
        at_most: int | None = None,
        every: int = 1,
        step: int = 1,
        interval: float = 0.0,
        tries: int = TRIES,
        refused: Refusals = (AdminError,),
        bound: float = 180.0,
    ) -> None:
        self.what, self.at_least, self.every, self.step = what, at_least, every, step
        self.at_most = at_most
        self.interval, self.tries, self.refused, self.bound = interval, tries, refused, bound
        self._fault, self._progress = fault, progress
        #: Faults that landed.
        self.landed = 0
        #: Why the storm gave up (a fault refused ``tries`` times), or None.
        self.failure: str | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fault-storm", daemon=True)

    def _run(self) -> None:
        try:
            self._storm()
        except Exception as exc:  # not a refusal: the client hears of it at once
            with self._cond:
                self.failure = f"{self.what}: the storm broke: {type(exc).__name__}: {exc}"
                self._cond.notify_all()

    def _storm(self) -> None:
        mark, since = self._progress(), time.monotonic()
        while not self._stop.is_set() and (self.at_most is None or self.landed < self.at_most):
            if self._progress() - mark < self.step or time.monotonic() - since < self.interval:
                self._stop.wait(0.01)
                continue
            error = try_to_land(
                self._fault, tries=self.tries, refused=self.refused, wait=self._stop.wait
            )
            if error is not None and self._stop.is_set():
                return  # the client is done: the last attempt does not count
            with self._cond:
                if error is None:
                    self.landed += 1
                else:
                    self.failure = (
                        f"{self.what}: fault {self.landed + 1} did not land after "
                        f"{self.tries} tries (last: {error})"
                    )
                self._cond.notify_all()
            if error is not None:
                return
            mark, since = self._progress(), time.monotonic()

    def check(self) -> None:
        """Fail the test if a fault did not land (refused ``tries`` times)."""
        if self.failure is not None:
            pytest.fail(self.failure)

    def wait_landed(self, count: int, timeout: float | None = None) -> None:
        """Block until ``count`` faults landed; the test fails if one did not land, or
        if they did not within ``timeout`` (default :attr:`bound`) seconds."""
        bound = self.bound if timeout is None else timeout
        with self._cond:
            self._cond.wait_for(lambda: self.landed >= count or self.failure is not None, bound)
        self.check()
        if self.landed < count:
            pytest.fail(
                f"{self.what}: fault {self.landed + 1} of {count} did not land within "
                f"{bound:g} s (the client's progress: {self._progress()})"
            )

    def wait_due(self, done: int) -> None:
        """The client did ``done`` units of its work: wait until the faults due by then
        (one per :attr:`every`, :attr:`at_least` in all) landed."""
        self.wait_landed(min(self.at_least, done // self.every))

    def __enter__(self) -> Storm:
        self._thread.start()
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            self.check()
            if self.landed < self.at_least:
                pytest.fail(
                    f"{self.what}: only {self.landed} of {self.at_least} faults landed "
                    "before the client finished"
                )


def unload_storm(
    admin: PulsarAdmin, topic: str, progress: Callable[[], int], **options: Any
) -> Storm:
    """A :class:`Storm` of unloads of ``topic`` (``options``: see :class:`Storm`)."""
    return Storm(lambda: admin.unload(topic), progress, what=f"unloads of {topic}", **options)
