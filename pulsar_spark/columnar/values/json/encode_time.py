"""Dates, times and timestamps as JSON text, in the forms the Java client's JSON schema writes
them, column by column with NumPy and pyarrow.compute (no Python step per row).

Pulsar's reflection maps a POJO's ``java.time`` fields to Avro logical types,
and the Java client's JSON schema writes those fields with Jackson
(JavaTimeModule, dates as timestamps, nanoseconds: its defaults). A Java
consumer with ``Schema.JSON(Pojo.class)`` reads only those forms (a number of
microseconds for an ``Instant`` reads as seconds; one for a ``LocalDateTime``
is refused), so each logical type is written as Jackson writes its Java type
(checked byte for byte against the 4.0.8 client, Jackson 2.17)::

    timestamp-millis/-micros/-nanos   Instant        epoch second, a dot, 9 digits of
                                                     nanoseconds: 1704164645.678000000;
                                                     -1.500000000 is half a second before
                                                     the epoch (second -1 plus 0.5 s); the
                                                     epoch is 0.0; under a microsecond after
                                                     it, BigDecimal's text (1E-9, 1.00E-7)
    local-timestamp-millis/...        LocalDateTime  [y,m,d,h,mi], then the second when it
                                                     or the nanoseconds are not 0, then
                                                     the nanoseconds when not 0
    date                              LocalDate      [y,m,d]
    time-millis / time-micros         LocalTime      [h,mi], then second and nanoseconds
                                                     as for LocalDateTime

(``timestamp-millis`` is an ``Instant`` with ``withJSR310ConversionEnabled``;
``java.util.Date`` fields are not a logical type for Pulsar's reflection.)
Years are ISO years (year 0 is 1 BC, as ``java.time`` counts them).
:func:`.iso_time.jackson_ticks` reads all of these back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import Int64s, Mask
from ...pieces import Piece, binary_piece, constant, expand
from ..encode_errors import SchemaMismatch
from .encode_text import integer_text

__all__ = ["time_text"]

_NANOS = 1_000_000_000
_PER_SECOND = {"millis": 1_000, "micros": 1_000_000, "nanos": _NANOS}
_DAY_SECONDS = 86_400

#: The text of a column of the schema's numbers (for errors: the field's path).
TimeText = Callable[[Int64s, str], list[Piece]]


def _per_second(logical: str) -> int:
    return _PER_SECOND[logical.rsplit("-", 1)[1]]


def _scientific(nanos: int) -> str:
    """Java's ``BigDecimal.toString`` of ``nanos`` * 10^-9 (``0 < nanos < 1000``)."""
    digits = str(nanos)
    exponent = len(digits) - 10
    return f"{digits[0]}{'.' + digits[1:] if len(digits) > 1 else ''}E{exponent}"


def instant_text(ticks: Int64s, per: int) -> list[Piece]:
    """Ticks since the epoch (``per`` a second) as Jackson writes an ``Instant``."""
    seconds = np.floor_divide(ticks, per)
    nanos = (ticks - seconds * per) * (_NANOS // per)
    whole = pa.array(seconds, pa.int64()).cast(pa.string())
    fraction = pc.utf8_lpad(pa.array(nanos, pa.int64()).cast(pa.string()), 9, "0")
    text = pc.binary_join_element_wise(whole, fraction, ".")
    at_zero = seconds == 0
    if at_zero.any():
        epoch = at_zero & (nanos == 0)
        if epoch.any():
            text = pc.if_else(pa.array(epoch), "0.0", text)
        tiny = np.flatnonzero(at_zero & (nanos > 0) & (nanos < 1000))
        if len(tiny):  # timestamp-nanos only: BigDecimal writes these in E notation
            texts = text.to_pylist()
            for row in tiny.tolist():
                texts[row] = _scientific(int(nanos[row]))
            text = pa.array(texts, pa.string())
    return [binary_piece(text)]


def _shown(values: Int64s, shown: Mask) -> list[Piece]:
    """``,value`` on the rows where ``shown``, nothing elsewhere."""
    if not shown.any():
        return []
    if shown.all():
        return [constant(len(values), b","), integer_text(values)]
    kept = values[shown]
    return [expand(constant(len(kept), b","), shown), expand(integer_text(kept), shown)]


def _date_fields(days: Int64s) -> list[Piece]:
    """``y,m,d`` of days since the epoch (proleptic Gregorian, ISO years)."""
    day = days.astype("datetime64[D]")
    month = day.astype("datetime64[M]")
    years = day.astype("datetime64[Y]").astype(np.int64) + 1970
    months = month.astype(np.int64) % 12 + 1
    days_of_month = (day - month.astype("datetime64[D]")).astype(np.int64) + 1
    comma = constant(len(days), b",")
    return [
        integer_text(years),
        comma,
        integer_text(months),
        comma,
        integer_text(days_of_month),
    ]


def _time_fields(of_day: Int64s, per: int) -> list[Piece]:
    """``h,mi`` then ``,s`` and ``,nanos`` as Jackson leaves them out, of ticks of a day."""
    seconds = of_day // per
    nanos = (of_day - seconds * per) * (_NANOS // per)
    comma = constant(len(of_day), b",")
    shown_nanos = nanos != 0
    return [
        integer_text(seconds // 3600),
        comma,
        integer_text(seconds // 60 % 60),
        *_shown(seconds % 60, (seconds % 60 != 0) | shown_nanos),
        *_shown(nanos, shown_nanos),
    ]


def _array(fields: list[Piece], rows: int) -> list[Piece]:
    return [constant(rows, b"["), *fields, constant(rows, b"]")]


def _local_timestamp(per: int) -> TimeText:
    def text(ticks: Int64s, path: str) -> list[Piece]:
        day_ticks = _DAY_SECONDS * per
        days = np.floor_divide(ticks, day_ticks)
        of_day = ticks - days * day_ticks
        fields = [*_date_fields(days), constant(len(ticks), b","), *_time_fields(of_day, per)]
        return _array(fields, len(ticks))

    return text


def _time(per: int) -> TimeText:
    def text(ticks: Int64s, path: str) -> list[Piece]:
        bad = (ticks < 0) | (ticks >= _DAY_SECONDS * per)
        if bad.any():
            value = int(ticks[np.argmax(bad)])
            unit = "ms" if per == 1_000 else "us"
            reason = f"a time of day of {value} {unit}, not within a day (a LocalTime)"
            raise SchemaMismatch.of([(path, reason)])
        return _array(_time_fields(ticks, per), len(ticks))

    return text


def _date(days: Int64s, path: str) -> list[Piece]:
    return _array(_date_fields(days), len(days))


def time_text(logical: str | None) -> TimeText | None:
    """How a column of a logical type's numbers (days, ticks of the day or since the
    epoch in the type's unit) is written; None for other types (written as numbers)."""
    if logical is None:
        return None
    if logical == "date":
        return _date
    if logical.startswith("timestamp-"):
        per = _per_second(logical)
        return lambda ticks, path: instant_text(ticks, per)
    if logical.startswith("local-timestamp-"):
        return _local_timestamp(_per_second(logical))
    if logical.startswith("time-"):
        return _time(_per_second(logical))
    return None
