"""Arrow columns encoded as Pulsar primitive schema values (STRING, INT32, TIMESTAMP...), one
payload per row, with NumPy byte-swapped views (layouts as the Java client writes them).

===============  ====================================  =================================
Schema type      Arrow types that fit                  bytes (all big-endian)
===============  ====================================  =================================
NONE, BYTES      binary (any offsets, views, fixed)    as they are
STRING           string (any offsets, views)           UTF-8
BOOLEAN          bool                                  1 byte, 01 or 00
INT8..INT64      integers no wider (uint: narrower)    1 / 2 / 4 / 8 bytes
FLOAT, DOUBLE    float16/32, and float64 for DOUBLE    IEEE 754 (NaN as Java's canonical NaN)
DATE             date32, date64, timestamp             int64 ms since the epoch
TIME             time32, time64                        int64 ms of the day
TIMESTAMP        timestamp (naive: UTC), date          int64 ms since the epoch
INSTANT          timestamp                             int64 epoch second, int32 nanosecond
LOCAL_DATE       date32, date64                        int64 epoch day
LOCAL_TIME       time32, time64                        int64 nanosecond of the day
LOCAL_DATE_TIME  timestamp (its wall time as stored)   int64 epoch day, int64 ns of the day
===============  ====================================  =================================

Times are rounded down to the unit (as Java's ``getTime`` does). A null
value gives a null payload: the producer sends it with ``null_value``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol.schemas.types import SchemaType

from ...arrays import Bytes, Int64s, valid_mask
from ...pieces import Piece, binary_piece, to_arrow
from ..avro.encode import Values, value_array
from ..encode_errors import SchemaMismatch

__all__ = ["check_primitive", "encode_primitive", "primitive_fits"]

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_DAY = 86_400
_F4_NAN = np.array([0x7FC00000], ">u4").view(">f4")[0]
_F8_NAN = np.array([0x7FF8000000000000], ">u8").view(">f8")[0]


def _ticks(array: pa.Array) -> tuple[Int64s, int]:
    """The numbers behind a timestamp, time or date column, and how many make a second."""
    kind = array.type
    if pa.types.is_date32(kind):
        days = np.asarray(array.view(pa.int32()).to_numpy(zero_copy_only=False), np.int64)
        return days * _DAY, 1
    if pa.types.is_date64(kind):
        return np.asarray(array.view(pa.int64()).to_numpy(zero_copy_only=False)), 1_000
    raw = array.view(pa.int32() if kind.bit_width == 32 else pa.int64())
    return np.asarray(raw.to_numpy(zero_copy_only=False), np.int64), _PER_SECOND[kind.unit]


def _split(array: pa.Array, seconds: int) -> tuple[Int64s, Int64s]:
    """Whole spans of ``seconds`` (rounded down) and the nanoseconds after them."""
    ticks, per = _ticks(array)
    whole, rest = np.divmod(ticks, seconds * per)
    return whole, rest * (1_000_000_000 // per)


def _be(values: np.ndarray, dtype: str) -> Bytes:
    """Values as big-endian ``dtype``, one row of bytes per value."""
    out = np.ascontiguousarray(values.astype(dtype, copy=False))
    matrix: Bytes = out.view(np.uint8).reshape(len(values), out.dtype.itemsize)
    return matrix


def _ints(dtype: str) -> Callable[[pa.Array], Bytes]:
    def convert(array: pa.Array) -> Bytes:
        return _be(np.asarray(array.to_numpy(zero_copy_only=False)), dtype)

    return convert


def _floats(dtype: str, nan: np.floating) -> Callable[[pa.Array], Bytes]:
    def convert(array: pa.Array) -> Bytes:
        values = np.asarray(array.to_numpy(zero_copy_only=False)).astype(dtype)
        values[np.isnan(values)] = nan
        return _be(values, dtype)

    return convert


def _bool(array: pa.Array) -> Bytes:
    flags = np.asarray(array.to_numpy(zero_copy_only=False), bool)
    return flags.view(np.uint8).reshape(-1, 1)


def _millis(array: pa.Array) -> Bytes:
    ticks, per = _ticks(array)
    millis = ticks * (1_000 // per) if per < 1_000 else ticks // (per // 1_000)
    return _be(millis, ">i8")


def _instant(array: pa.Array) -> Bytes:
    seconds, nanos = _split(array, 1)
    return np.hstack((_be(seconds, ">i8"), _be(nanos, ">i4")))


def _local_date(array: pa.Array) -> Bytes:
    return _be(_split(array, _DAY)[0], ">i8")


def _local_time(array: pa.Array) -> Bytes:
    return _be(_split(array, _DAY)[1], ">i8")


def _local_date_time(array: pa.Array) -> Bytes:
    days, nanos = _split(array, _DAY)
    return np.hstack((_be(days, ">i8"), _be(nanos, ">i8")))


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_binary(t: pa.DataType) -> bool:
    b = pa.types
    return bool(
        b.is_binary(t)
        or b.is_large_binary(t)
        or b.is_binary_view(t)
        or (b.is_fixed_size_binary(t) and not b.is_decimal(t))
    )


def _int_fits(bits: int) -> Callable[[pa.DataType], bool]:
    def fits(t: pa.DataType) -> bool:
        if pa.types.is_signed_integer(t):
            return bool(t.bit_width <= bits)
        return bool(pa.types.is_unsigned_integer(t) and t.bit_width < bits)

    return fits


_t = pa.types
#: Per type: which Arrow types fit, and how a column of them becomes a (rows, width) matrix.
_FIXED: dict[SchemaType, tuple[Callable[[pa.DataType], bool], Callable[[pa.Array], Bytes]]] = {
    SchemaType.BOOLEAN: (_t.is_boolean, _bool),
    SchemaType.INT8: (_int_fits(8), _ints(">i1")),
    SchemaType.INT16: (_int_fits(16), _ints(">i2")),
    SchemaType.INT32: (_int_fits(32), _ints(">i4")),
    SchemaType.INT64: (_int_fits(64), _ints(">i8")),
    SchemaType.FLOAT: (lambda t: _t.is_float16(t) or _t.is_float32(t), _floats(">f4", _F4_NAN)),
    SchemaType.DOUBLE: (_t.is_floating, _floats(">f8", _F8_NAN)),
    SchemaType.DATE: (lambda t: _t.is_date(t) or _t.is_timestamp(t), _millis),
    SchemaType.TIME: (_t.is_time, _millis),
    SchemaType.TIMESTAMP: (lambda t: _t.is_timestamp(t) or _t.is_date(t), _millis),
    SchemaType.INSTANT: (_t.is_timestamp, _instant),
    SchemaType.LOCAL_DATE: (_t.is_date, _local_date),
    SchemaType.LOCAL_TIME: (_t.is_time, _local_time),
    SchemaType.LOCAL_DATE_TIME: (_t.is_timestamp, _local_date_time),
}


def primitive_fits(dtype: pa.DataType, kind: SchemaType) -> bool:
    """Whether values of ``dtype`` can be written with the primitive schema ``kind``."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if kind.is_bytes:
        return _is_binary(dtype)
    if kind is SchemaType.STRING:
        return _is_text(dtype)
    if kind in _FIXED:
        return bool(_FIXED[kind][0](dtype))
    return False


def check_primitive(dtype: pa.DataType, kind: SchemaType, *, topic: str = "") -> None:
    """Raises :class:`SchemaMismatch` when ``dtype`` values cannot be written as ``kind``."""
    if not primitive_fits(dtype, kind):
        if kind.is_primitive:
            reason = f"a column of type {dtype} cannot be written as {kind.name}"
        else:
            reason = f"{kind.name} is not a primitive schema type"
        raise SchemaMismatch.of([("", reason)], topic=topic, schema=kind.name)


def encode_primitive(values: Values, kind: SchemaType, *, topic: str = "") -> pa.Array:
    """One payload per row of a primitive schema type: a binary array, null where the
    value is null.

    Raises:
        SchemaMismatch: values of a type that does not fit ``kind`` (see the module).
    """
    array = value_array(values)
    check_primitive(array.type, kind, topic=topic)
    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    rows = len(array)
    valid = valid_mask(array)
    nulls = array.null_count
    if kind.is_bytes or kind is SchemaType.STRING:
        if nulls:
            array = array.filter(pa.array(valid))
        body = binary_piece(array)
    else:
        matrix = _FIXED[kind][1](array.fill_null(_zero(array.type)) if nulls else array)
        if nulls:
            matrix = matrix[valid]
        body = Piece(np.full(len(matrix), matrix.shape[1], np.int64), matrix.reshape(-1))
    if nulls:
        lens = np.zeros(rows, np.int64)
        lens[valid] = body.lens
        body = Piece(lens, body.data)
    return to_arrow(body, valid if nulls else None)


def _zero(dtype: pa.DataType) -> pa.Scalar:
    """A value to stand in for nulls before the conversion (their bytes are dropped)."""
    if pa.types.is_boolean(dtype):
        return pa.scalar(False)
    if pa.types.is_integer(dtype) or pa.types.is_floating(dtype):
        return pa.scalar(0, dtype)
    storage = pa.int32() if dtype.bit_width == 32 else pa.int64()
    return pa.scalar(0, storage).cast(dtype)
