"""The retry policy of the client: one classifier of failures, and reconnect delays.

Every loop that may try an operation again (the reader's reconnects, the
producer's re-creation, attaching to a durable subscription) asks
:func:`classify` what a failure means, instead of reading ``retriable`` and
special-casing broker codes itself::

    Action.RECONNECT   the connection or the broker's ownership is in doubt:
                       look the topic up, connect and try again
                       (ConnectError, ConnectionClosed, OperationTimeout, and
                       retriable broker codes such as ServiceNotReady)
    Action.RETRY       the broker said "not yet" on a sound connection: a
                       producer or consumer name still held by the previous
                       attachment (ProducerBusy, ConsumerBusy); wait and try again
    Action.FATAL       trying again cannot help (authentication, authorization,
                       a terminated topic, a protocol violation, a bad request)

The delays between attempts come from :class:`Backoff`; each loop bounds its
attempts by its own deadline.
"""

from __future__ import annotations

import enum
import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import PulsarError, ServerError

__all__ = ["Action", "Backoff", "classify", "may_retry", "retried"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")

#: Broker codes that mean a name is still held by an attachment being closed.
_BUSY = frozenset({pb.ProducerBusy, pb.ConsumerBusy})


class Action(enum.Enum):
    """What to do after a failure (see the module's table)."""

    RECONNECT = "reconnect"
    RETRY = "retry"
    FATAL = "fatal"


def classify(exc: BaseException) -> Action:
    """The one decision on whether, and how, an operation that raised ``exc`` is retried.

    Errors from outside the package (and ``KeyboardInterrupt`` and the like) are
    fatal: they are bugs or the caller's wish, not the network's.
    """
    if not isinstance(exc, PulsarError):
        return Action.FATAL
    if isinstance(exc, ServerError) and exc.code in _BUSY:
        return Action.RETRY
    return Action.RECONNECT if exc.retriable else Action.FATAL


def may_retry(exc: BaseException) -> bool:
    """Whether :func:`classify` allows another attempt (after a reconnect or a wait)."""
    return classify(exc) is not Action.FATAL


class Backoff:
    """Reconnect delays: 100 ms doubling to 60 s, minus up to 10 % jitter."""

    def __init__(self, initial: float = 0.1, maximum: float = 60.0) -> None:
        self.initial, self.maximum = initial, maximum
        self._next = initial

    def next(self) -> float:
        delay = self._next
        self._next = min(self._next * 2, self.maximum)
        return delay * (1 - random.random() * 0.1)

    def reset(self) -> None:
        self._next = self.initial


def retried(call: Callable[[], _T], timeout: float, what: str, *, maximum: float = 60.0) -> _T:
    """``call()``, made again after a :class:`Backoff` delay (up to ``maximum`` s) while
    :func:`classify` allows, until ``timeout`` seconds have passed; then its last error.
    Each retry is logged (INFO), naming ``what``."""
    deadline = time.monotonic() + timeout
    backoff = Backoff(maximum=maximum)
    while True:
        try:
            return call()
        except PulsarError as exc:  # noqa: PERF203 (a retry loop)
            delay = backoff.next()
            if classify(exc) is Action.FATAL or time.monotonic() + delay > deadline:
                raise
            log.info("%s: %s; again in %.1f s", what, exc, delay)
            time.sleep(delay)
