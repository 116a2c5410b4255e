"""Protobuf scalar values turned into Arrow arrays with NumPy: varints (int32/64, uint32/64,
sint32/64 zigzag, bool, enum), fixed 32/64-bit values, floats, strings and bytes; and
google.protobuf.Timestamp structs into timestamps.

Each scalar kind comes as positions in the buffer and (for varints and
lengths) the wire value; see :mod:`.schema` for the Arrow types. int32
and enum varints keep their low 32 bits, as protobuf reads them. A string
that is not UTF-8 is the row's error (protobuf refuses it too), and reads as
"" in dead-letter mode.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...arrays import Bytes, Int64s, Mask, UInt64s
from ...gather import gather_binary, utf8_errors
from ..avro.lanes import Failures
from .schema import SCALAR_TYPES, ProtoField

__all__ = ["FIXED_WIDTH", "defaults", "scalar_array", "timestamp_array"]

#: Bytes per value of the fixed-width kinds.
FIXED_WIDTH = {
    "fixed32": 4,
    "sfixed32": 4,
    "float": 4,
    "fixed64": 8,
    "sfixed64": 8,
    "double": 8,
}
_FIXED_DTYPE = {
    "fixed32": "<u4",
    "sfixed32": "<i4",
    "float": "<f4",
    "fixed64": "<u8",
    "sfixed64": "<i8",
    "double": "<f8",
}
_ONE = np.uint64(1)
#: Seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z (Timestamp's valid range).
_MIN_SECONDS, _MAX_SECONDS = -62135596800, 253402300799


def defaults(field: ProtoField, n: int) -> pa.Array:
    """``n`` copies of the value of an absent field (nulls when it has presence)."""
    dtype = SCALAR_TYPES.get(field.kind)
    if dtype is None or field.default is None:
        from .schema import proto_arrow_field

        return pa.nulls(n, proto_arrow_field(field).type)
    return pa.array([field.default] * n, dtype)


def scalar_array(
    data: Bytes,
    field: ProtoField,
    pos: Int64s,
    value: UInt64s,
    rows: Int64s,
    failures: Failures,
    path: str,
) -> pa.Array:
    """The values of a scalar field, one per position (see the module docstring)."""
    kind = field.kind
    if kind in FIXED_WIDTH:
        width = FIXED_WIDTH[kind]
        if len(pos) == 0:
            raw = np.zeros(0, _FIXED_DTYPE[kind])
        else:
            view = np.ndarray((len(data) - width + 1,), _FIXED_DTYPE[kind], data, 0, (1,))
            raw = view[pos]
        if kind == "fixed32":
            return pa.array(raw.astype(np.int64))
        if kind == "fixed64":
            return pa.array(raw).cast(SCALAR_TYPES[kind])
        return pa.array(raw)
    if kind in ("string", "bytes"):
        values = gather_binary(data, pos, value.astype(np.int64))
        return _utf8(values, rows, failures, path) if kind == "string" else values
    if kind == "int64":
        return pa.array(value.view(np.int64))
    if kind in ("int32", "enum"):
        low = value.astype(np.uint32).view(np.int32)
        return _enum_names(field, low) if kind == "enum" else pa.array(low)
    if kind == "uint32":
        return pa.array((value & np.uint64(0xFFFFFFFF)).astype(np.int64))
    if kind == "uint64":
        return pa.array(value).cast(SCALAR_TYPES[kind])
    if kind == "bool":
        return pa.array(value != 0)
    if kind == "sint32":
        low = value.astype(np.uint32)
        return pa.array((low >> np.uint32(1)).view(np.int32) ^ -(low & np.uint32(1)).view(np.int32))
    if kind == "sint64":
        return pa.array((value >> _ONE).view(np.int64) ^ -(value & _ONE).view(np.int64))
    msg = f"no scalar kind {kind}"  # pragma: no cover - the schema has only these
    raise AssertionError(msg)


def _enum_names(field: ProtoField, numbers: np.ndarray) -> pa.Array:
    """Enum numbers as names; a number the enum does not declare as its decimal text."""
    declared: dict[int, str] = {}
    for number, name in field.enum:
        declared.setdefault(number, name)  # an alias: the first name
    known = np.array(sorted(declared), np.int64)
    names = [declared[k] for k in known.tolist()]
    at = np.searchsorted(known, numbers)
    at_clip = np.minimum(at, max(len(known) - 1, 0))
    hit = (known[at_clip] == numbers) if len(known) else np.zeros(len(numbers), bool)
    index = at_clip.astype(np.int32)
    if not hit.all():
        unknown, where = np.unique(numbers[~hit], return_inverse=True)
        index[~hit] = len(names) + where.astype(np.int32)
        names = names + [str(u) for u in unknown.tolist()]
    dictionary = pa.array(names, pa.string())
    return pa.DictionaryArray.from_arrays(pa.array(index), dictionary).dictionary_decode()


def _utf8(values: pa.Array, rows: Int64s, failures: Failures, path: str) -> pa.Array:
    text = values.view(pa.string())
    bad = utf8_errors(values)
    if bad is not None:
        failures.add(rows[bad], path, "a string that is not valid UTF-8", ())
        values = pa.array(
            [b"" if b else v for v, b in zip(values.to_pylist(), bad.tolist(), strict=True)],
            pa.binary(),
        )
        text = values.view(pa.string())
    return text


def timestamp_array(
    struct: pa.StructArray,
    present: Mask | None,
    rows: Int64s,
    failures: Failures,
    path: str,
) -> pa.Array:
    """google.protobuf.Timestamp structs (seconds, nanos) as timestamp[us, UTC] (sub-
    microsecond digits dropped); null where not ``present``. Values outside
    0001-01-01..9999-12-31, or nanos outside 0..999,999,999, are the row's error."""
    seconds = struct.field(0).to_numpy(zero_copy_only=False).astype(np.int64)
    nanos = struct.field(1).to_numpy(zero_copy_only=False).astype(np.int64)
    bad = (seconds < _MIN_SECONDS) | (seconds > _MAX_SECONDS) | (nanos < 0) | (nanos > 999_999_999)
    if present is not None:
        bad &= present
    if bad.any():
        failures.add(
            rows[bad],
            path,
            "Timestamp seconds {0}, nanos {1} is out of range (0001-01-01 to 9999-12-31)",
            (seconds[bad], nanos[bad]),
        )
        seconds[bad], nanos[bad] = 0, 0
    micros = seconds * 1_000_000 + nanos // 1000
    mask = None if present is None else ~present
    return pa.array(micros, pa.timestamp("us", tz="UTC"), mask=mask)
