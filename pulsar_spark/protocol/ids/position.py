"""Positions: where a read starts or ends, in one type with one text form.

A position is one of::

    earliest            the first message the topic still holds
    latest              the message that is last when the read is planned
    from:L:E:P:B        message L:E:P:B and what follows it
    after:L:E:P:B       what follows message L:E:P:B (batch index -1: the whole entry)
    time:<epoch ms>     the first message published at or after that time

``str(position)`` gives that text and :meth:`Position.parse` reads it back, so
batch ranges, stream offsets (whose checkpoint JSON holds exactly these
strings) and the client share one form. A bare id ``L:E[:P[:B]]`` parses as
``from:`` (the id included), which is what a user who names an id means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import PulsarError
from .message_id import EARLIEST, LATEST, MessageId

__all__ = ["InvalidPosition", "PositionKind", "Position"]

PositionKind = Literal["earliest", "latest", "from", "after", "time"]

_PREFIXES: tuple[PositionKind, ...] = ("from", "after", "time")


class InvalidPosition(PulsarError, ValueError):
    """A position text or value that is not one of the forms above (not retriable)."""


@dataclass(frozen=True, slots=True)
class Position:
    """A start or end of a read. Build one with the class methods, not the fields."""

    kind: PositionKind
    message_id: MessageId | None = None
    time_ms: int | None = None

    # -- construction --------------------------------------------------------

    @classmethod
    def earliest(cls) -> Position:
        return _EARLIEST

    @classmethod
    def latest(cls) -> Position:
        return _LATEST

    @classmethod
    def at(cls, message_id: MessageId) -> Position:
        """From ``message_id`` on, that message included (see :meth:`of`)."""
        return cls.of(message_id, inclusive=True)

    @classmethod
    def after(cls, message_id: MessageId) -> Position:
        """What follows ``message_id`` (batch index -1: what follows the whole entry).

        See :meth:`of` for the wire's earliest and latest ids.
        """
        return cls.of(message_id, inclusive=False)

    @classmethod
    def at_time(cls, time_ms: int) -> Position:
        """The first message published at or after ``time_ms`` (epoch milliseconds;
        a time before 1970, before every message, means from the start)."""
        if not isinstance(time_ms, int) or isinstance(time_ms, bool):
            msg = f"a publish time must be epoch milliseconds (an int), not {time_ms!r}"
            raise InvalidPosition(msg)
        return cls("time", None, time_ms)

    @classmethod
    def of(cls, message_id: MessageId, *, inclusive: bool) -> Position:
        """``from:`` or ``after:`` an id; the wire's earliest/latest ids map to their kinds.

        That mapping is what :meth:`parse` does with such an id, so
        ``Position.parse(str(p)) == p`` holds for every position built here.
        """
        if message_id.is_earliest:
            return _EARLIEST
        if message_id.is_latest:
            return _LATEST
        return cls("from" if inclusive else "after", message_id)

    @classmethod
    def parse(cls, text: str, *, what: str = "position") -> Position:
        """Read the text form back; ``what`` names the option or field in errors.

        Raises:
            InvalidPosition: naming ``what`` and the text.
        """
        if not isinstance(text, str):
            msg = f"{what}={text!r}: a position is text, not {type(text).__name__}"
            raise InvalidPosition(msg)
        value = text.strip()
        lowered = value.lower()
        if lowered == "earliest":
            return _EARLIEST
        if lowered == "latest":
            return _LATEST
        prefix, sep, rest = value.partition(":")
        kind = prefix.lower()
        try:
            if sep and kind == "time":
                return cls.at_time(int(rest))
            if sep and kind in ("from", "after"):
                return cls.of(MessageId.parse(rest), inclusive=kind == "from")
            return cls.of(MessageId.parse(value), inclusive=True)
        except (ValueError, InvalidPosition) as exc:
            msg = (
                f"{what}={text!r} is not a position: expected 'earliest', 'latest', "
                f"'L:E:P:B', 'from:L:E:P:B', 'after:L:E:P:B' or 'time:<epoch ms>' ({exc})"
            )
            raise InvalidPosition(msg) from None

    # -- reading -------------------------------------------------------------

    def __str__(self) -> str:
        if self.kind == "time":
            return f"time:{self.time_ms}"
        if self.kind in ("from", "after"):
            return f"{self.kind}:{self.message_id}"
        return self.kind

    @property
    def inclusive(self) -> bool:
        """Whether the message the position names is part of the read."""
        return self.kind != "after"

    @property
    def is_id(self) -> bool:
        """A ``from:`` or ``after:`` position, which names a message id."""
        return self.message_id is not None

    def id_or(self) -> MessageId:
        """The id named, or the wire's EARLIEST/LATEST id for those kinds.

        Raises:
            InvalidPosition: a ``time:`` position, which has to be resolved first.
        """
        if self.message_id is not None:
            return self.message_id
        if self.kind == "earliest":
            return EARLIEST
        if self.kind == "latest":
            return LATEST
        msg = f"{self} names a time, not a message id: resolve it against the topic first"
        raise InvalidPosition(msg)


_EARLIEST = Position("earliest")
_LATEST = Position("latest")
