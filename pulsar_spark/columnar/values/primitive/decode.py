"""Values of primitive Pulsar schemas (STRING, BOOLEAN, INT8..INT64, FLOAT, DOUBLE and the
time types) decoded from a binary Arrow array at once.

The layouts are the Java client's (all big-endian; see the schema mapping in
:mod:`pulsar_spark.columnar.values.arrow_types` for the Arrow types)::

    BOOLEAN 1 byte (non-zero is true)   INT8/16/32/64 1/2/4/8 bytes   FLOAT/DOUBLE IEEE 754
    DATE, TIME, TIMESTAMP   int64 ms since the epoch (DATE -> its UTC day, TIME -> its UTC
                            time of day)
    INSTANT                 int64 seconds + int32 nanoseconds (12 bytes)
    LOCAL_DATE              int64 epoch day        LOCAL_TIME  int64 nanosecond of day
    LOCAL_DATE_TIME         int64 epoch day + int64 nanosecond of day (16 bytes)
    STRING                  text in the ``__charset`` property's charset (UTF-8 by default)

Fixed-width values are read through a big-endian view of the value buffer at
each value's offset, so a column costs a few NumPy operations. Null values
(``null_value`` messages) stay null; a value of the wrong length, text that
does not decode, or a time beyond Arrow's range (for timestamps: beyond what
microseconds since the epoch can hold, as Spark needs) fails naming its row.
"""

from __future__ import annotations

import codecs
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from pulsar_spark.protocol.schemas.types import SchemaType

from ...arrays import Bytes, Int64s, Mask
from ...gather import utf8_errors
from ..arrow_types import PRIMITIVE_TYPES
from ..errors import SchemaDecodeError, UnmappableSchema

__all__ = ["WIDTHS", "decode_primitive", "decode_primitive_collect"]

Numbers: TypeAlias = NDArray[Any]

#: Bytes per value of the fixed-width primitive types.
WIDTHS: dict[SchemaType, int] = {
    SchemaType.BOOLEAN: 1,
    SchemaType.INT8: 1,
    SchemaType.INT16: 2,
    SchemaType.INT32: 4,
    SchemaType.INT64: 8,
    SchemaType.FLOAT: 4,
    SchemaType.DOUBLE: 8,
    SchemaType.DATE: 8,
    SchemaType.TIME: 8,
    SchemaType.TIMESTAMP: 8,
    SchemaType.INSTANT: 12,
    SchemaType.LOCAL_DATE: 8,
    SchemaType.LOCAL_TIME: 8,
    SchemaType.LOCAL_DATE_TIME: 16,
}
_BIG_ENDIAN = {
    SchemaType.INT8: ">i1",
    SchemaType.INT16: ">i2",
    SchemaType.INT32: ">i4",
    SchemaType.INT64: ">i8",
    SchemaType.FLOAT: ">f4",
    SchemaType.DOUBLE: ">f8",
}
_MS_PER_DAY = 86_400_000
_NS_PER_DAY = 86_400_000_000_000
_US_PER_DAY = 86_400_000_000
_INT32 = (-(2**31), 2**31 - 1)
#: The milliseconds whose microseconds fit an int64.
_MAX_MS = (2**63 - 1) // 1000


def decode_primitive(
    values: pa.Array | pa.ChunkedArray,
    kind: SchemaType,
    *,
    topic: str = "",
    charset: str | None = None,
) -> pa.Array:
    """The values of a primitive schema as their Arrow type (nulls stay null).

    Args:
        values: binary (or string) values.
        kind: the schema type; NONE and BYTES return the values as binary.
        charset: STRING's ``__charset`` property (None or UTF-8: checked at once).

    Raises:
        SchemaDecodeError: a value that does not decode, naming its row.
        UnmappableSchema: ``kind`` is not a primitive type.
    """
    return _decode(values, kind, topic, charset, collect=False)[0]


def decode_primitive_collect(
    values: pa.Array | pa.ChunkedArray,
    kind: SchemaType,
    *,
    topic: str = "",
    charset: str | None = None,
) -> tuple[pa.Array, pa.Array]:
    """Like :func:`decode_primitive`, but a value that does not decode comes out null and
    the second column holds its error text (null for the rows that decoded)."""
    column, errors = _decode(values, kind, topic, charset, collect=True)
    assert errors is not None
    return column, errors


def _decode(
    values: pa.Array | pa.ChunkedArray,
    kind: SchemaType,
    topic: str,
    charset: str | None,
    *,
    collect: bool,
) -> tuple[pa.Array, pa.Array | None]:
    if kind not in PRIMITIVE_TYPES:
        msg = f"{kind.name} is not a primitive schema type"
        raise UnmappableSchema(msg, topic=topic)
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    if not pa.types.is_binary(values.type):
        values = values.cast(pa.binary())
    decoder = _Decoder(values, kind, topic, collect)
    if kind in (SchemaType.NONE, SchemaType.BYTES):
        column = values
    elif kind is SchemaType.STRING:
        column = decoder.text(charset)
    else:
        column = decoder.fixed()
    return decoder.finish(column)


_UNDECODABLE = "\x00undecodable"


def _decode_text(raw: bytes | None, charset: str) -> str | None:
    try:
        return None if raw is None else raw.decode(charset)
    except UnicodeDecodeError:
        return _UNDECODABLE


def _beyond(values: Numbers, limit: int) -> Mask:
    """Where ``|values| > limit`` (without ``np.abs``, which leaves INT64_MIN negative)."""
    out: Mask = (values > limit) | (values < -limit)
    return out


class _Decoder:
    def __init__(self, values: pa.Array, kind: SchemaType, topic: str, collect: bool) -> None:
        self.values = values
        self.kind = kind
        self.topic = topic
        self.collect = collect
        n = len(values)
        self.valid: Mask = (
            values.is_valid().to_numpy(zero_copy_only=False)
            if values.null_count
            else np.ones(n, bool)
        )
        self.offsets: Int64s = np.frombuffer(
            values.buffers()[1], np.int32, n + 1, 4 * values.offset
        ).astype(np.int64)
        data = values.buffers()[2]
        self.data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
        self.failed: Mask = np.zeros(n, bool)
        self.errors: dict[int, str] = {}

    def fail(self, bad: Mask, reason: str, values: Int64s | None = None) -> None:
        rows = np.flatnonzero(bad & ~self.failed)
        if not len(rows):
            return
        if not self.collect:
            first = int(rows[0])
            text = reason.format(int(values[first])) if values is not None else reason
            raise SchemaDecodeError(text, row=first, topic=self.topic)
        for row in rows.tolist():
            text = reason.format(int(values[row])) if values is not None else reason
            self.errors[row] = text
        self.failed[rows] = True

    def finish(self, column: pa.Array) -> tuple[pa.Array, pa.Array | None]:
        if not self.collect:
            return column, None
        if self.failed.any():
            keep = np.arange(len(column), dtype=np.int64)
            column = column.take(pa.array(keep, mask=self.failed))
        texts: list[str | None] = [None] * len(column)
        for row, text in self.errors.items():
            texts[row] = text
        return column, pa.array(texts, pa.string())

    def text(self, charset: str | None) -> pa.Array:
        name = codecs.lookup(charset).name if charset else "utf-8"
        if name == "utf-8":
            bad = utf8_errors(self.values)
            if bad is None:
                return self.values.view(pa.string())
            self.fail(bad, "text that is not valid UTF-8")
            return self.values.view(pa.string()).take(pa.array(np.arange(len(bad)), mask=bad))
        decoded = [_decode_text(raw, name) for raw in self.values.to_pylist()]  # per value
        bad = np.array([t is _UNDECODABLE for t in decoded], bool)
        if bad.any():
            self.fail(bad, f"text that is not valid {name}")
        texts = [None if t is _UNDECODABLE else t for t in decoded]
        return pa.array(texts, pa.string())

    def fixed(self) -> pa.Array:
        """A fixed-width type: check every length, then read all values at once."""
        width = WIDTHS[self.kind]
        lengths = np.diff(self.offsets)
        wrong = self.valid & (lengths != width)
        if wrong.any():
            name = self.kind.name
            self.fail(wrong, f"a {name} value of {{}} bytes ({width} expected)", lengths)
        ok = self.valid & ~self.failed
        starts = np.where(ok, self.offsets[:-1], 0)
        if len(self.data) < width:
            starts[:] = 0
            data = np.zeros(width, np.uint8)
        else:
            data = self.data
        column = self._build(data, starts, width)
        if not ok.all():
            keep = np.arange(len(column), dtype=np.int64)
            column = column.take(pa.array(keep, mask=~ok))
        return column

    def _build(self, data: Bytes, starts: Int64s, width: int) -> pa.Array:
        kind, out = self.kind, PRIMITIVE_TYPES[self.kind]

        def word(dtype: str, skip: int = 0) -> Numbers:
            """The big-endian numbers at each start (+ skip), in native order."""
            size = np.dtype(dtype).itemsize
            view = np.ndarray((len(data) - size + 1,), dtype, data, 0, (1,))
            native: Numbers = view[starts + skip].astype(np.dtype(dtype).newbyteorder("="))
            return native

        if kind is SchemaType.BOOLEAN:
            return pa.array(data[starts] != 0, pa.bool_())
        if kind in _BIG_ENDIAN:
            return pa.array(word(_BIG_ENDIAN[kind]), out)
        if kind is SchemaType.INSTANT:
            seconds, nanos = word(">i8"), word(">i4", 8)
            bad = self.ok_rows() & (
                _beyond(seconds, 9_000_000_000_000) | (nanos < 0) | (nanos > 999_999_999)
            )
            self.fail(
                bad, "an INSTANT beyond the range of microsecond timestamps, or bad nanoseconds"
            )
            micros = np.where(bad, 0, seconds) * 1_000_000 + np.where(bad, 0, nanos) // 1000
            return pa.array(micros, out)
        millis_or_days = word(">i8")
        if kind is SchemaType.DATE:
            days = millis_or_days // _MS_PER_DAY
            bad = self.ok_rows() & ((days < _INT32[0]) | (days > _INT32[1]))
            self.fail(bad, "a DATE of {} ms, beyond Arrow's dates", millis_or_days)
            return pa.array(np.where(bad, 0, days).astype(np.int32), out)
        if kind is SchemaType.TIME:
            return pa.array((millis_or_days % _MS_PER_DAY).astype(np.int32), out)
        if kind is SchemaType.TIMESTAMP:
            # Spark holds microseconds: beyond them, a value could not be read there.
            bad = self.ok_rows() & _beyond(millis_or_days, _MAX_MS)
            self.fail(
                bad,
                "a TIMESTAMP of {} ms, beyond the range of microsecond timestamps",
                millis_or_days,
            )
            return pa.array(np.where(bad, 0, millis_or_days), out)
        if kind is SchemaType.LOCAL_TIME:
            bad = self.ok_rows() & ((millis_or_days < 0) | (millis_or_days >= _NS_PER_DAY))
            self.fail(bad, "a LOCAL_TIME of {} ns, beyond a day", millis_or_days)
            return pa.array(np.where(bad, 0, millis_or_days), out)
        if kind is SchemaType.LOCAL_DATE:
            bad = self.ok_rows() & ((millis_or_days < _INT32[0]) | (millis_or_days > _INT32[1]))
            self.fail(bad, "a LOCAL_DATE of epoch day {}, beyond Arrow's dates", millis_or_days)
            return pa.array(np.where(bad, 0, millis_or_days).astype(np.int32), out)
        # LOCAL_DATE_TIME
        nanos = word(">i8", 8)
        bad = self.ok_rows() & (
            _beyond(millis_or_days, 100_000_000) | (nanos < 0) | (nanos >= _NS_PER_DAY)
        )
        self.fail(bad, "a LOCAL_DATE_TIME beyond the range of microsecond timestamps")
        days, nanos = np.where(bad, 0, millis_or_days), np.where(bad, 0, nanos)
        return pa.array(days * _US_PER_DAY + nanos // 1000, out)

    def ok_rows(self) -> Mask:
        ok: Mask = self.valid & ~self.failed
        return ok
