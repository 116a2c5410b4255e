"""Slow links for the fault proxy: a byte rate and an added delay, per direction.

A :class:`Throttle` paces what :class:`~tests.support.fault_proxy.FaultProxy` forwards in
one direction: each chunk leaves no earlier than ``delay`` seconds after it came in, and
the direction carries at most ``rate`` bytes per second (in slices of 1/20 s, so the flow
is smooth rather than bursty). The proxy reads a throttled connection's client side
through a small receive buffer, so that a writer on the other end feels the slow link
within a few tens of kilobytes instead of filling megabytes of kernel buffers first.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Throttle", "mbit"]

#: The receive buffer of a throttled proxy socket (bytes).
SMALL_BUFFER = 64 * 1024


def mbit(megabits_per_second: float) -> float:
    """A rate in bytes per second: ``mbit(1)`` is 125,000."""
    return megabits_per_second * 1_000_000 / 8


@dataclass
class Throttle:
    """At most ``rate`` bytes/s (None: unlimited), each chunk held ``delay`` s."""

    rate: float | None = None
    delay: float = 0.0
    _free_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.rate is not None and self.rate <= 0:
            msg = f"rate must be a positive number of bytes per second, not {self.rate!r}"
            raise ValueError(msg)
        if self.delay < 0:
            msg = f"delay must be at least 0 seconds, not {self.delay!r}"
            raise ValueError(msg)

    @property
    def active(self) -> bool:
        return self.rate is not None or self.delay > 0

    def sendall(self, sock: socket.socket, data: bytes | bytearray, received_at: float) -> None:
        """Write ``data`` (which came in at monotonic ``received_at``) to ``sock``, paced."""
        hold = received_at + self.delay - time.monotonic()
        if hold > 0:
            time.sleep(hold)
        rate = self.rate
        if rate is None:
            sock.sendall(data)
            return
        piece = max(int(rate / 20), 1)
        view = memoryview(data)
        for start in range(0, len(view), piece):
            chunk = view[start : start + piece]
            with self._lock:
                now = time.monotonic()
                begin = max(now, self._free_at)
                self._free_at = begin + len(chunk) / rate
            if begin > now:
                time.sleep(begin - now)
            sock.sendall(chunk)
