"""The bounds of a read as the client API takes them, parsed once at its edge.

A start or end may be given as

* a :class:`~..protocol.position.Position` (or its text with a ``from:``,
  ``after:`` or ``time:`` prefix), which says itself whether the message it
  names is included: as a start, ``from:X`` includes X and ``after:X`` does
  not; as an end, ``after:X`` includes X and ``from:X`` stops before it, so
  that one position ends a range and starts the next;
* ``"earliest"``, ``"latest"``, a :class:`MessageId` or its
  ``ledger:entry[:partition[:batch]]`` text, included or not as the call's
  ``start_inclusive``/``end_inclusive`` say;
* a publish time as a ``datetime`` (a naive one is UTC), like ``time:<ms>``.

:func:`start_bound` and :func:`end_bound` turn each into the one position type,
:class:`~pulsar_spark.protocol.ids.position.Position` (an id given with
``inclusive`` becomes ``from:`` or ``after:`` as its role says, a datetime
``time:``); malformed values raise :class:`~.errors.ClientError` naming the
argument. A reader takes a start as ``from:X`` (X included) or ``after:X``, and
an end as ``after:X`` (X included) or ``from:X`` (stops before X).
"""

from __future__ import annotations

import datetime as dt

from pulsar_spark.protocol.ids.message_id import EARLIEST, LATEST, MessageId
from pulsar_spark.protocol.ids.position import InvalidPosition, Position

from ..errors import ClientError, InvalidArgument

__all__ = [
    "FROM_EARLIEST",
    "TO_LATEST",
    "BoundLike",
    "end_bound",
    "parse_position",
    "publish_time_ms",
    "start_bound",
]

#: What the client API accepts as a start or an end.
BoundLike = Position | str | MessageId | dt.datetime

_PREFIXES = ("from:", "after:", "time:")


#: A read from the first message on, and one to the last message (when it starts).
FROM_EARLIEST = Position.earliest()
TO_LATEST = Position.latest()


def publish_time_ms(value: dt.datetime, what: str) -> int:
    """A datetime as epoch milliseconds; a naive one is taken as UTC."""
    if not isinstance(value, dt.datetime):
        msg = f"{what}={value!r}: expected a datetime"
        raise ClientError(msg)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp() * 1000)


def parse_position(value: str | MessageId | Position, what: str) -> MessageId:
    """``"earliest"``, ``"latest"``, a :class:`MessageId`, its
    ``"ledger:entry[:partition[:batch]]"`` text, or a position naming an id.

    Raises:
        ClientError: naming ``what`` (e.g. ``start``) and the bad value.
    """
    if isinstance(value, MessageId):
        return value
    position = _as_position(value, what)
    if position is not None:
        if position.kind == "time":
            msg = f"{what}={value!r}: expected a message id, not a publish time"
            raise InvalidArgument(msg)
        return position.id_or()
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "earliest":
            return EARLIEST
        if text == "latest":
            return LATEST
        try:
            return MessageId.parse(text)
        except ValueError as exc:
            msg = (
                f"{what}={value!r}: expected 'earliest', 'latest' or "
                "ledger:entry[:partition[:batch]]"
            )
            raise ClientError(msg) from exc
    msg = f"{what}={value!r}: expected 'earliest', 'latest', a MessageId or an id string"
    raise ClientError(msg)


def start_bound(value: BoundLike, inclusive: bool = True, what: str = "start") -> Position:
    """Where a read starts; ``inclusive`` applies to ids given without a position kind."""
    return _bound(value, inclusive, what, end=False)


def end_bound(value: BoundLike, inclusive: bool = True, what: str = "end") -> Position:
    """Where a read ends; ``inclusive`` applies to ids given without a position kind."""
    return _bound(value, inclusive, what, end=True)


def _bound(value: BoundLike, inclusive: bool, what: str, *, end: bool) -> Position:
    if isinstance(value, dt.datetime):
        return Position.at_time(publish_time_ms(value, what))
    position = _as_position(value, what)
    if position is not None:
        return position
    # The end of a range is the start of the next: an end that includes X is after:X.
    return Position.of(parse_position(value, what), inclusive=inclusive != end)


def _as_position(value: object, what: str) -> Position | None:
    """``value`` as a Position when it is one or its text has a kind prefix; else None."""
    if isinstance(value, Position):
        return value
    if not isinstance(value, str) or not value.strip().lower().startswith(_PREFIXES):
        return None
    try:
        return Position.parse(value, what=what)
    except InvalidPosition as exc:
        raise InvalidArgument(str(exc)) from None
