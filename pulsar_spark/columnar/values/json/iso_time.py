"""ISO-8601 text as the numbers behind Arrow's date, time and timestamp types, for JSON values
whose temporal fields arrive as text instead of the Avro schema's numbers.

Producers that serialize dates and times themselves (Python's ``isoformat()``,
Jackson with ``WRITE_DATES_AS_TIMESTAMPS`` off, JavaScript's ``toISOString()``)
write ``"2024-01-02T03:04:05.678Z"`` where Pulsar's JSON schema (an Avro
schema) says ``timestamp-millis``. Accepted::

    date                 YYYY-MM-DD
    time                 HH:MM[:SS[.fraction]]
    timestamp (UTC)      YYYY-MM-DD(T| )HH:MM[:SS[.fraction]][Z|±HH[:MM]]   (no zone: UTC)
    timestamp (no zone)  the same without a zone (a zone is refused: the value is a wall time)

Fractions of up to nine digits are rounded down to the type's unit, as the
Java client rounds times down. Anything else is a ``ValueError`` that quotes
the text.

:func:`jackson_ticks` reads the forms the Java client's JSON schema gives
``java.time`` fields (Jackson's JavaTimeModule, dates written as timestamps,
its default): an ``Instant`` (or any zoned time) as its epoch second, a dot
and its nanoseconds, ``1709210096.123456789`` (one nanosecond before the epoch
is ``-1.999999999``); a ``LocalDate`` as ``[2024, 2, 29]``; a
``LocalTime`` as ``[12, 34]`` to ``[12, 34, 56, 123000000]``; a
``LocalDateTime`` as ``[2024, 2, 29, 12, 34]`` to seven numbers (the last
ones left out when zero). Pulsar's reflection maps those fields to
timestamp-micros, date, time-micros and local-timestamp-millis.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa

__all__ = ["iso_ticks", "jackson_ticks"]

_DATE = r"(\d{4})-(\d{2})-(\d{2})"
_TIME = r"(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?"
_ZONE = r"(Z|z|[+-]\d{2}(?::?\d{2})?)?"
_DATE_RE = re.compile(_DATE)
_TIME_RE = re.compile(_TIME)
_STAMP_RE = re.compile(_DATE + r"[Tt ]" + _TIME + _ZONE)
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_EPOCH = dt.datetime(1970, 1, 1)


def _fraction(digits: str | None, per: int) -> int:
    """The ticks (``per`` a second) of a decimal fraction of a second, rounded down."""
    if not digits:
        return 0
    return int(digits.ljust(9, "0")) * per // 1_000_000_000


def _offset_seconds(zone: str | None) -> int | None:
    """The seconds a zone is ahead of UTC; None when it is out of range."""
    if not zone or zone in ("Z", "z"):
        return 0
    sign = -1 if zone[0] == "-" else 1
    hours, minutes = int(zone[1:3]), int(zone[-2:]) if len(zone) > 3 else 0
    if hours > 18 or minutes > 59:
        return None
    return sign * (hours * 3600 + minutes * 60)


def iso_ticks(text: str, dtype: pa.DataType) -> int:
    """The number Arrow stores for ``text`` as ``dtype`` (a date, time or timestamp type):
    days, ticks of the day, or ticks since the epoch in ``dtype``'s unit.

    Raises:
        ValueError: text that is not ISO-8601 of that kind, quoting it.
    """
    refusal: str | None = None  # text that matches but is refused: the message says why
    try:
        if pa.types.is_date(dtype):
            m = _DATE_RE.fullmatch(text)
            if m is None:
                raise ValueError
            day = dt.date(int(m[1]), int(m[2]), int(m[3]))
            days = (day - _EPOCH.date()).days
            return days if pa.types.is_date32(dtype) else days * 86_400_000
        if pa.types.is_time(dtype):
            m = _TIME_RE.fullmatch(text)
            if m is None:
                raise ValueError
            per = _PER_SECOND[dtype.unit]
            t = dt.time(int(m[1]), int(m[2]), int(m[3] or 0))
            seconds = (t.hour * 60 + t.minute) * 60 + t.second
            return seconds * per + _fraction(m[4], per)
        if pa.types.is_timestamp(dtype):
            m = _STAMP_RE.fullmatch(text)
            if m is None:
                raise ValueError
            if m[8] and dtype.tz is None:
                refusal = f"a time with a zone ({text!r}) for a local timestamp, which has none"
            else:
                wall = dt.datetime(
                    int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6] or 0)
                )
                offset = _offset_seconds(m[8])
                if offset is None:
                    refusal = f"a zone offset out of range ({m[8]}): {text!r}"
                else:
                    seconds = (wall - _EPOCH) // dt.timedelta(seconds=1) - offset
                    per = _PER_SECOND[dtype.unit]
                    return seconds * per + _fraction(m[7], per)
    except ValueError as exc:  # no match, or a day or time out of range
        reason = f" ({exc})" if exc.args else ""
    else:
        reason = ""
    if refusal is not None:
        raise ValueError(refusal)
    kind = "date" if pa.types.is_date(dtype) else "time" if pa.types.is_time(dtype) else ""
    msg = f"text that is not an ISO-8601 {kind or 'timestamp'} of {dtype}: {text!r}{reason}"
    raise ValueError(msg)


def _ints(value: list[Any], least: int, most: int) -> list[int] | None:
    if least <= len(value) <= most and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return value
    return None


def jackson_ticks(value: Any, dtype: pa.DataType) -> int | None:
    """The number Arrow stores for a ``java.time`` value as Jackson writes it (decimal
    seconds, or an array of fields; see the module), or None when ``value`` is not one.

    Raises:
        ValueError: an array whose fields are not a valid date or time, quoting it.
    """
    try:
        if isinstance(value, Decimal) and pa.types.is_timestamp(dtype) and dtype.tz:
            # Jackson writes the epoch second, a dot and the nanoseconds: -1.999999999 is
            # one nanosecond before the epoch (second -1, nanosecond 999999999).
            seconds = int(value)
            nanos = int(abs(value - seconds).scaleb(9))
            per = _PER_SECOND[dtype.unit]
            return seconds * per + nanos * per // 1_000_000_000
        if not isinstance(value, list):
            return None
        if pa.types.is_date(dtype) and (fields := _ints(value, 3, 3)):
            days = (dt.date(*fields) - _EPOCH.date()).days
            return days if pa.types.is_date32(dtype) else days * 86_400_000
        if pa.types.is_time(dtype) and (fields := _ints(value, 2, 4)):
            hour, minute, second, nano = [*fields, 0, 0][:4]
            per = _PER_SECOND[dtype.unit]
            t = dt.time(hour, minute, second)
            if not 0 <= nano < 1_000_000_000:
                raise ValueError
            of_day = (t.hour * 60 + t.minute) * 60 + t.second
            return of_day * per + nano * per // 1_000_000_000
        if pa.types.is_timestamp(dtype) and dtype.tz is None and (fields := _ints(value, 5, 7)):
            year, month, day, hour, minute, second, nano = [*fields, 0, 0][:7]
            if not 0 <= nano < 1_000_000_000:
                raise ValueError
            wall = dt.datetime(year, month, day, hour, minute, second)
            per = _PER_SECOND[dtype.unit]
            return (wall - _EPOCH) // dt.timedelta(seconds=1) * per + nano * per // 1_000_000_000
    except (ValueError, TypeError, OverflowError) as exc:
        reason = f" ({exc})" if exc.args else ""
        msg = f"not a date or time of {dtype} as Jackson writes them: {value!r}{reason}"
        raise ValueError(msg) from None
    return None
