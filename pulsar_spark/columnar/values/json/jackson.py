"""The layouts Arrow's JSON reader parses JSON values in (dates and times as their numbers, or
in Jackson's ``java.time`` forms), and Jackson's forms converted column by column.

The Java client's JSON schema (Jackson's JavaTimeModule) and our encoder write a
timestamp with a zone (``Instant``) as decimal seconds (``1704164645.678000000``,
``-1.999999999`` for a nanosecond before the epoch, ``1E-9``), a ``LocalDate``
as ``[y, m, d]``, a ``LocalDateTime`` as ``[y, m, d, h, mi]`` to seven numbers
and a ``LocalTime`` as ``[h, mi]`` to four (:mod:`.encode_time`). Arrow's
reader parses them as ``decimal128(38, 9)`` and ``list<int64>``
(:func:`jackson_storage`); :func:`from_jackson` turns those into the values
:func:`.iso_time.jackson_ticks` gives each one (the integer part of the
decimal is the second, its fraction the nanoseconds added, whatever the
sign), with NumPy. Values it cannot take the same way (a year outside 1..9999,
a field out of range, an array of another length, ticks beyond int64) make it
give None: the caller then reads the batch value by value, which names the row.

A plain integer in a timestamp field is the schema's number (milliseconds or
microseconds since the epoch), not seconds; the decimal column cannot tell
``1704164645000000`` from ``1704164645000000.0``. Values with a fraction are
decimals for sure; for the others :func:`integer_pattern` gives a regular
expression that finds an integer member of those fields in the raw text (the
key in any of its JSON spellings), and a match sends the batch down the
value-by-value path.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import Int64s, Mask

__all__ = [
    "WholeSeconds",
    "from_jackson",
    "has_jackson",
    "integer_pattern",
    "jackson_storage",
    "number_storage",
    "read_jackson",
]

_NANOS = 1_000_000_000
_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": _NANOS}
_DAY = 86_400
#: The years ``datetime`` (the value-by-value path) takes.
_YEARS = (1, 9999)
_INT64_MAX = 2**63 - 1

#: Fields (by key) of timestamps holding whole seconds, and the rows to look at (None: all).
WholeSeconds = list[tuple[str, Mask | None]]


def _zoned(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(dtype) and dtype.tz)


def _arrayed(dtype: pa.DataType) -> bool:
    """Whether Jackson writes the type as an array of fields."""
    return bool(pa.types.is_date(dtype) or pa.types.is_time(dtype)) or (
        pa.types.is_timestamp(dtype) and not dtype.tz
    )


def has_jackson(dtype: pa.DataType) -> bool:
    """Whether ``dtype`` holds a date, time or timestamp (somewhere in structs and lists)."""
    if pa.types.is_struct(dtype):
        return any(has_jackson(f.type) for f in dtype)
    if pa.types.is_list(dtype):
        return has_jackson(dtype.value_type)
    return _zoned(dtype) or _arrayed(dtype)


def number_storage(dtype: pa.DataType) -> pa.DataType:
    """The type the JSON reader builds: temporal types as their numbers, enums as text."""
    return _storage(dtype, jackson=False)


def jackson_storage(dtype: pa.DataType) -> pa.DataType:
    """The type Arrow's reader builds for Jackson's forms: zoned timestamps as decimal
    seconds, dates, times and local timestamps as arrays of integers, enums as text."""
    return _storage(dtype, jackson=True)


def _storage(dtype: pa.DataType, *, jackson: bool) -> pa.DataType:
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, _storage(f.type, jackson=jackson)) for f in dtype])
    if pa.types.is_list(dtype):
        item = _storage(dtype.value_type, jackson=jackson)
        return pa.list_(pa.field(dtype.value_field.name, item))
    if pa.types.is_dictionary(dtype):
        return dtype.value_type
    if jackson and _zoned(dtype):
        return pa.decimal128(38, 9)
    if jackson and _arrayed(dtype):
        return pa.list_(pa.int64())
    if pa.types.is_temporal(dtype):
        return pa.int32() if dtype.bit_width == 32 else pa.int64()
    return dtype


def read_jackson(storage: pa.StructArray, dtype: pa.DataType, values: pa.Array) -> pa.Array | None:
    """The records read in :func:`jackson_storage`'s layout from ``values`` (their JSON
    texts) as ``dtype``, or None when some value is not one the fast path takes, or a zoned
    timestamp field with whole seconds is a plain integer somewhere (the schema's ticks)."""
    whole: WholeSeconds = []
    column = from_jackson(storage, dtype, whole, top=True)
    if column is None or not whole:
        return column
    rows = np.zeros(len(values), bool)
    for _, flags in whole:
        rows = rows | flags if flags is not None else np.ones(len(values), bool)
    suspects = values if rows.all() else values.filter(pa.array(rows))
    pattern = integer_pattern(name for name, _ in whole)
    return None if pc.any(pc.match_substring_regex(suspects, pattern)).as_py() else column


def from_jackson(
    storage: pa.Array, dtype: pa.DataType, whole: WholeSeconds, *, top: bool = False
) -> pa.Array | None:
    """``storage`` (of :func:`jackson_storage`'s type) as ``dtype``, or None when some value
    is not one the fast path takes. Zoned timestamp fields with whole seconds are added to
    ``whole`` (with the rows they are in when ``storage`` is the batch's records, ``top``)
    for :func:`integer_pattern`."""
    mask = storage.is_null() if storage.null_count else None
    if pa.types.is_struct(dtype):
        children: list[pa.Array] = []
        for i, field in enumerate(dtype):
            child = storage.field(i)
            if _zoned(field.type):
                ticks = _instants(child, field.type)
                if ticks is None:
                    return None
                if ticks[1].any():
                    whole.append((field.name, ticks[1] if top else None))
                children.append(ticks[0])
                continue
            converted = from_jackson(child, field.type, whole)
            if converted is None:
                return None
            children.append(converted)
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    if pa.types.is_list(dtype):
        if _zoned(dtype.value_type):  # no key to look for: whole seconds are refused
            items = _instants(storage.values, dtype.value_type)
            if items is None or items[1].any():
                return None
            values: pa.Array | None = items[0]
        else:
            values = from_jackson(storage.values, dtype.value_type, whole)
        if values is None:
            return None
        return pa.ListArray.from_arrays(storage.offsets, values, type=dtype, mask=mask)
    if _zoned(dtype):
        instants = _instants(storage, dtype)
        return None if instants is None or instants[1].any() else instants[0]
    if _arrayed(dtype):
        return _fields(storage, dtype)
    return storage if storage.type == dtype else storage.cast(dtype)


def _ticks_array(ticks: Int64s, valid: Mask, dtype: pa.DataType) -> pa.Array:
    width = np.int32 if dtype.bit_width == 32 else np.int64
    mask = None if valid.all() else ~valid
    return pa.array(ticks.astype(width), mask=mask).view(dtype)


def _valid(storage: pa.Array) -> Mask:
    if not storage.null_count:
        return np.ones(len(storage), bool)
    mask: Mask = storage.is_valid().to_numpy(zero_copy_only=False)
    return mask


def _instants(storage: pa.Array, dtype: pa.DataType) -> tuple[pa.Array, Mask] | None:
    """Decimal seconds as ticks, and which values are whole seconds; None when some
    second or its ticks do not fit int64."""
    valid = _valid(storage)
    try:  # the integer part, toward zero, is the second
        whole = pc.cast(storage, options=pc.CastOptions(pa.int64(), allow_decimal_truncate=True))
    except pa.ArrowInvalid:
        return None
    seconds: Int64s = whole.fill_null(0).to_numpy()  # (with nulls, NumPy's are floats)
    # The fraction's digits are the nanoseconds, whatever the sign: |value - second| * 10^9,
    # which the low 64 bits of the decimal's unscaled 128-bit integer give, modulo 2^64.
    words = np.frombuffer(storage.buffers()[1], np.uint64, 2 * len(storage), 16 * storage.offset)
    with np.errstate(over="ignore"):
        low = words[0::2] - seconds.astype(np.uint64) * np.uint64(_NANOS)
    nanos = np.where(valid, np.abs(low.view(np.int64)), 0)
    ticks = _ticks(seconds, nanos, _PER_SECOND[dtype.unit])
    return None if ticks is None else (_ticks_array(ticks, valid, dtype), valid & (nanos == 0))


def _fields(storage: pa.Array, dtype: pa.DataType) -> pa.Array | None:
    """Arrays of date or time fields as days or ticks; None when some array is not one."""
    least, most = (
        (3, 3) if pa.types.is_date(dtype) else (2, 4) if pa.types.is_time(dtype) else (5, 7)
    )
    valid = _valid(storage)
    offsets = storage.offsets.to_numpy()
    starts, lengths = offsets[:-1], np.diff(offsets)
    lengths_valid = lengths[valid]
    if not ((lengths_valid >= least) & (lengths_valid <= most)).all():
        return None
    items = storage.values
    if items.null_count:
        return None
    flat: Int64s = items.to_numpy() if len(items) else np.zeros(1, np.int64)

    def item(k: int, default: int = 0) -> Int64s:
        """The k-th field of each array (``default`` where it is left out, or null)."""
        at = np.minimum(starts + k, len(flat) - 1)
        got: Int64s = np.where(valid & (lengths > k), flat[at], default)
        return got

    if pa.types.is_time(dtype):
        of_day = _of_day(item(0), item(1), item(2), item(3))
        if of_day is None:
            return None
        seconds, nanos = of_day
    else:
        days = _days(item(0, 1970), item(1, 1), item(2, 1))
        if days is None:
            return None
        if pa.types.is_date(dtype):
            per_day = 1 if pa.types.is_date32(dtype) else _DAY * 1_000
            return _ticks_array(np.where(valid, days * per_day, 0), valid, dtype)
        of_day = _of_day(item(3), item(4), item(5), item(6))
        if of_day is None:
            return None
        seconds, nanos = days * _DAY + of_day[0], of_day[1]
    ticks = _ticks(np.where(valid, seconds, 0), np.where(valid, nanos, 0), _PER_SECOND[dtype.unit])
    return None if ticks is None else _ticks_array(ticks, valid, dtype)


def _ticks(seconds: Int64s, nanos: Int64s, per: int) -> Int64s | None:
    """``seconds * per + nanos * per // 10^9``, or None when one is beyond int64."""
    near = np.flatnonzero(np.abs(seconds) >= _INT64_MAX // per - 1)
    safe = np.where(np.abs(seconds) >= _INT64_MAX // per - 1, 0, seconds)
    ticks: Int64s = safe * per + nanos // (_NANOS // per)
    for row in near.tolist():  # at the ends of the range: exactly, in Python's integers
        exact = int(seconds[row]) * per + int(nanos[row]) // (_NANOS // per)
        if not -_INT64_MAX - 1 <= exact <= _INT64_MAX:
            return None
        ticks[row] = exact
    return ticks


def _days(year: Int64s, month: Int64s, day: Int64s) -> Int64s | None:
    """Days since the epoch of a proleptic Gregorian date, or None when one is not a date."""
    if not (
        ((year >= _YEARS[0]) & (year <= _YEARS[1])).all()
        and ((month >= 1) & (month <= 12)).all()
        and (day >= 1).all()
    ):
        return None
    months = (year - 1970) * 12 + month - 1
    first = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    following = (months + 1).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    if (day > following - first).any():
        return None
    days: Int64s = first + day - 1
    return days


def _of_day(
    hour: Int64s, minute: Int64s, second: Int64s, nano: Int64s
) -> tuple[Int64s, Int64s] | None:
    """Seconds of the day and nanoseconds, or None when a field is out of range."""
    ranges: list[tuple[Int64s, int]] = [(hour, 24), (minute, 60), (second, 60), (nano, _NANOS)]
    if not all(((v >= 0) & (v < top)).all() for v, top in ranges):
        return None
    seconds: Int64s = (hour * 60 + minute) * 60 + second
    return seconds, nano


def _hex(code: int, width: int) -> str:
    """``code`` as hexadecimal digits matching either case."""
    return "".join(d if d.isdigit() else f"[{d}{d.upper()}]" for d in f"{code:0{width}x}")


#: JSON's short escapes.
_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


def _char_pattern(char: str) -> str:
    """Every JSON spelling of one character in a string (RE2 on bytes)."""
    spellings = ["".join(f"\\x{b:02x}" for b in char.encode())]
    code = ord(char)
    if code < 0x10000:
        spellings.append(r"\\u" + _hex(code, 4))
    else:
        high, low = 0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF)
        spellings.append(r"\\u" + _hex(high, 4) + r"\\u" + _hex(low, 4))
    if char in _SHORT:
        spellings.append(r"\\" + "".join(f"\\x{b:02x}" for b in _SHORT[char].encode()))
    return "(?:" + "|".join(spellings) + ")"


def integer_pattern(keys: Any) -> str:
    """An RE2 pattern (for raw JSON bytes) matching a member named one of ``keys`` whose
    value is an integer: its key in any JSON spelling, a colon, digits, a comma or brace."""
    names = "|".join("".join(_char_pattern(c) for c in key) for key in sorted(set(keys)))
    space = "[ \\t\\n\\r]*"
    return f'"(?:{names})"{space}:{space}-?[0-9]+{space}[,}}]'
