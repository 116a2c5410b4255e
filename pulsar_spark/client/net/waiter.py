"""A request's wait for its answer: the timeout runs while nothing moves on the connection.

One TCP stream carries every frame of a connection in order, so an answer can be
queued behind a frame that takes long to arrive (5 MB over a 1 Mbit/s link: 40
s), and a request behind one that takes long to write. While such frames move,
the request waits on: its timeout counts from when they last moved
(:meth:`~.connection.Connection.moving_at`), and :data:`PATIENCE` times the
timeout bound the whole wait, so that a broker which never answers still fails
the request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import server_error
from pulsar_spark.protocol.framing import Frame, command_name

from ..errors import OperationTimeout, UnexpectedAnswer

__all__ = ["PATIENCE", "Waiter", "quiet_for"]

#: The longest wait for an answer, in timeouts, however long frames keep moving.
PATIENCE = 10


class Waiter:
    """The answer to one request: its frame, or the error that ended the wait."""

    __slots__ = ("done", "error", "frame")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.frame: Frame | None = None
        self.error: BaseException | None = None

    def wait(self, timeout: float, moving_at: Callable[[], float], what: str) -> None:
        """Wait until answered, or until ``timeout`` seconds passed with no frame
        moving (``moving_at`` gives when one last did), :data:`PATIENCE` x ``timeout``
        at most.

        Raises:
            OperationTimeout: no answer to ``what`` (the request and where it went).
        """
        moving_at()  # a first look: progress is seen as a change from it
        start = time.monotonic()
        limit = start + PATIENCE * timeout
        until = start + timeout
        while not self.done.wait(max(until - time.monotonic(), 0.0)):
            until = min(max(start, moving_at()) + timeout, limit)
            now = time.monotonic()
            if now >= until and not self.done.is_set():
                msg = f"no answer to {what} within {timeout:g} s"
                if now - start >= 2 * timeout:
                    msg += f" of nothing moving on the connection ({now - start:.0f} s in all)"
                raise OperationTimeout(msg)

    def answer(self, what: str, key: object, expect: int) -> Frame:
        """The answering frame, of type ``expect``; ``what`` (the request and where it
        went) and ``key`` name it in errors.

        Raises:
            PulsarError: the error that ended the wait (a closed connection).
            ServerError: the broker answered ERROR (per-code subclass).
            UnexpectedAnswer: the broker answered with another command type.
        """
        if self.error is not None:
            raise self.error
        frame = self.frame
        assert frame is not None
        if frame.command.type == pb.BaseCommand.ERROR:
            err = frame.command.error
            raise server_error(err.error, err.message, context=what)
        if frame.command.type != expect:
            msg = (
                f"{what} ({key}) was answered with {command_name(frame.command.type)}, "
                f"not {command_name(expect)}"
            )
            raise UnexpectedAnswer(msg)
        return frame


def quiet_for(since: float, moving_at: float, timeout: float) -> float:
    """Seconds with nothing moving on a connection: since ``since`` (the last frame a
    reader took) or ``moving_at`` (:meth:`~.connection.Connection.moving_at`),
    whichever is later; but since ``since`` once that passed :data:`PATIENCE` x
    ``timeout``."""
    now = time.monotonic()
    if now - since >= PATIENCE * timeout:
        return now - since
    return now - max(since, moving_at)
