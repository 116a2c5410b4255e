"""Avro encoders built for an Arrow type and a writer schema: which Arrow types fit which Avro
types, and the list of fields that do not fit.

========================================  ======================================
Avro (writer schema)                      Arrow types that fit
========================================  ======================================
null                                      null
boolean                                   bool
int                                       int8, int16, int32, uint8, uint16
long                                      any integer up to int64 / uint32
float / double                            float16, float32 / and float64
string (uuid too), enum                   string, large_string, string_view
bytes                                     binary, large_binary, binary_view, fixed_size_binary
fixed(n)                                  fixed_size_binary(n), binary (each value n bytes)
decimal (bytes or fixed)                  decimal128, decimal256 (cast to the schema's
                                          precision and scale; a value that does not fit fails)
date                                      date32, date64
time-millis / time-micros                 time32, time64 (converted)
timestamp-millis / -micros / -nanos       timestamp with a time zone (converted)
local-timestamp-millis / ...              timestamp without a time zone (converted)
record                                    struct: fields matched by name; a schema field the
                                          struct lacks needs a default; extra fields fail
array / map                               list, large_list, fixed_size_list / map<string, V>
union                                     a type that fits a branch; nulls need a null branch
========================================  ======================================

Dictionary columns fit when their values do. A nullable Arrow field fits a
schema without null; its null values fail when encoded (a DataFrame's fields
are usually nullable whether or not they hold nulls).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from ...arrays import Int64s
from ...pieces import join
from ..encode_errors import Misfit
from ..errors import SchemaError
from .arrow_types import avro_arrow_type
from .defaults import default_array
from .encode_nodes import (
    ArrayEnc,
    BoolEnc,
    BytesEnc,
    ConstEnc,
    DecimalEnc,
    Decoded,
    Enc,
    EnumEnc,
    FixedEnc,
    FloatEnc,
    LongEnc,
    MapEnc,
    NullEnc,
    RecordEnc,
    UnionEnc,
)
from .schema import NO_DEFAULT, AvroType, Enum, Field, Fixed, Primitive, Record, Union

__all__ = ["describe_avro", "fit_encoder", "is_bytes", "is_text"]

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_LOGICAL_UNIT = {"millis": "ms", "micros": "us", "nanos": "ns"}
_TIME_UNIT = {"time-millis": "ms", "time-micros": "us"}
_DAY_MS = 86_400_000


def fit_encoder(dtype: pa.DataType, node: AvroType, misfits: list[Misfit], path: str = "") -> Enc:
    """The encoder of ``dtype`` columns as ``node``; every field that does not fit is added
    to ``misfits`` as (path, reason) (the encoder is then not usable)."""
    enc = _Fitter(misfits).fit(dtype, node, path)
    return enc if enc is not None else NullEnc(path)


def describe_avro(node: AvroType) -> str:
    """A short name of an Avro type for messages: ``long (timestamp-micros)``, ``record a.B``."""
    if isinstance(node, Union):
        return "union [" + ", ".join(describe_avro(b) for b in node.branches) + "]"
    if isinstance(node, Record | Enum | Fixed):
        return f"{node.kind} {node.name}"
    if node.logical:
        return f"{node.kind} ({node.logical})"
    return node.kind


def _numbers(array: pa.Array) -> Int64s:
    """The numbers behind an integer, date, time or timestamp column, as int64."""
    kind = array.type
    if not pa.types.is_integer(kind):
        array = array.view(pa.int32() if kind.bit_width == 32 else pa.int64())
    return np.asarray(array.to_numpy(zero_copy_only=False), np.int64)


def _rescale(have: str, want: str) -> Callable[[pa.Array], Int64s]:
    """Numbers in unit ``have`` into unit ``want`` (rounded down, as Java's conversions do)."""
    a, b = _PER_SECOND[have], _PER_SECOND[want]

    def convert(array: pa.Array) -> Int64s:
        values = _numbers(array)
        if b > a:
            return values * (b // a)
        if a > b:
            return values // (a // b)
        return values

    return convert


def _days(array: pa.Array) -> Int64s:
    values = _numbers(array)
    return values // _DAY_MS if pa.types.is_date64(array.type) else values


def _is_int(dtype: pa.DataType, wide: bool) -> bool:
    t = pa.types
    small = t.is_int8(dtype) or t.is_int16(dtype) or t.is_int32(dtype)
    small = small or t.is_uint8(dtype) or t.is_uint16(dtype)
    return small or (wide and (t.is_int64(dtype) or t.is_uint32(dtype)))


def is_text(dtype: pa.DataType) -> bool:
    """A string type (string, large_string, string_view)."""
    t = pa.types
    return bool(t.is_string(dtype) or t.is_large_string(dtype) or t.is_string_view(dtype))


def is_bytes(dtype: pa.DataType) -> bool:
    """A binary type (binary, large, view or fixed-size; not a decimal)."""
    t = pa.types
    binary = t.is_binary(dtype) or t.is_large_binary(dtype) or t.is_binary_view(dtype)
    return bool(binary or (t.is_fixed_size_binary(dtype) and not t.is_decimal(dtype)))


class _Fitter:
    def __init__(self, misfits: list[Misfit]) -> None:
        self.misfits = misfits

    def no(self, path: str, dtype: pa.DataType, node: AvroType, why: str = "") -> None:
        reason = f"a column of type {dtype} does not fit {describe_avro(node)}"
        self.misfits.append((path, f"{reason} ({why})" if why else reason))

    def fit(self, dtype: pa.DataType, node: AvroType, path: str) -> Enc | None:
        if pa.types.is_dictionary(dtype):
            inner = self.fit(dtype.value_type, node, path)
            return None if inner is None else Decoded(inner)
        if isinstance(node, Union):
            return self.union(dtype, node, path)
        if pa.types.is_null(dtype):
            if node.kind == "null":
                return NullEnc(path)
            self.no(path, dtype, node, "only null values, and the schema has no null")
            return None
        if isinstance(node, Record):
            return self.record(dtype, node, path)
        if isinstance(node, Enum):
            if is_text(dtype):
                return EnumEnc(path, node.symbols)
        elif isinstance(node, Fixed):
            return self.fixed(dtype, node, path)
        elif node.kind == "array":
            t = pa.types
            if t.is_list(dtype) or t.is_large_list(dtype) or t.is_fixed_size_list(dtype):
                items = self.fit(dtype.value_type, node.items, path + "[]")  # type: ignore[union-attr]
                return None if items is None else ArrayEnc(path, items)
        elif node.kind == "map":
            if pa.types.is_map(dtype):
                if not is_text(dtype.key_type):
                    self.no(path, dtype, node, "Avro map keys are strings")
                    return None
                values = self.fit(dtype.item_type, node.values, path + "{}")  # type: ignore[union-attr]
                return None if values is None else MapEnc(path, BytesEnc(path), values)
        elif isinstance(node, Primitive):
            enc = self.primitive(dtype, node, path)
            if enc is not None:
                return enc
        self.no(path, dtype, node)
        return None

    def primitive(self, dtype: pa.DataType, node: Primitive, path: str) -> Enc | None:
        t = pa.types
        kind, logical = node.kind, node.logical
        if logical == "decimal":
            if t.is_decimal(dtype):
                return DecimalEnc(path, _decimal(node.precision, node.scale), None)
            return None
        if logical == "date":
            return LongEnc(path, _days) if t.is_date(dtype) else None
        if logical in ("time-millis", "time-micros"):
            if t.is_time(dtype):
                return LongEnc(path, _rescale(dtype.unit, _TIME_UNIT[logical]))
            return None
        if logical and "timestamp" in logical:
            if not t.is_timestamp(dtype):
                return None
            local = logical.startswith("local-")
            if local == bool(dtype.tz):
                zone = "no time zone" if local else "a time zone"
                self.no(path, dtype, node, f"the schema's timestamps have {zone}")
                return NullEnc(path)
            return LongEnc(path, _rescale(dtype.unit, _LOGICAL_UNIT[logical.rsplit("-", 1)[1]]))
        if kind == "null":
            return NullEnc(path) if t.is_null(dtype) else None
        if kind == "boolean":
            return BoolEnc(path) if t.is_boolean(dtype) else None
        if kind in ("int", "long"):
            return LongEnc(path, _numbers) if _is_int(dtype, kind == "long") else None
        if kind == "float" and (t.is_float16(dtype) or t.is_float32(dtype)):
            return FloatEnc(path, "<f4")
        if kind == "double" and t.is_floating(dtype):
            return FloatEnc(path, "<f8")
        if kind == "string" and is_text(dtype):
            return BytesEnc(path)
        if kind == "bytes" and is_bytes(dtype):
            return BytesEnc(path)
        return None

    def fixed(self, dtype: pa.DataType, node: Fixed, path: str) -> Enc | None:
        if node.logical == "decimal":
            if pa.types.is_decimal(dtype):
                return DecimalEnc(path, _decimal(node.precision, node.scale), node.size)
        elif is_bytes(dtype):
            if pa.types.is_fixed_size_binary(dtype) and dtype.byte_width != node.size:
                self.no(path, dtype, node, f"values of {dtype.byte_width} bytes, not {node.size}")
                return None
            return FixedEnc(path, node.size)
        self.no(path, dtype, node)
        return None

    def union(self, dtype: pa.DataType, node: Union, path: str) -> Enc | None:
        kinds = [b.kind for b in node.branches]
        null_index = kinds.index("null") if "null" in kinds else None
        if pa.types.is_null(dtype):
            if null_index is None:
                self.no(path, dtype, node, "only null values, and the union has no null")
                return None
            return UnionEnc(path, null_index, 0, None)
        others = [(i, b) for i, b in enumerate(node.branches) if b.kind != "null"]
        if len(others) == 1:
            index, branch = others[0]
            inner = self.fit(dtype, branch, path)
            return None if inner is None else UnionEnc(path, null_index, index, inner)
        for index, branch in others:
            scratch: list[Misfit] = []
            inner = _Fitter(scratch).fit(dtype, branch, path)
            if inner is not None and not scratch:
                return UnionEnc(path, null_index, index, inner)
        self.no(path, dtype, node, "no branch fits")
        return None

    def record(self, dtype: pa.DataType, node: Record, path: str) -> Enc | None:
        if not pa.types.is_struct(dtype):
            self.no(path, dtype, node)
            return None
        names = [dtype.field(i).name for i in range(dtype.num_fields)]
        before = len(self.misfits)
        for name in {n for n in names if names.count(n) > 1}:
            self.misfits.append((_join(path, name), "the data has two fields of this name"))
        wanted = {f.name for f in node.fields}
        for name in names:
            if name not in wanted:
                self.misfits.append((_join(path, name), f"not a field of {node.name}"))
        fields: list[tuple[int | None, Enc]] = []
        for f in node.fields:
            where = _join(path, f.name)
            if f.name in names:
                i = names.index(f.name)
                enc = self.fit(dtype.field(i).type, f.type, where)
                if enc is not None:
                    fields.append((i, enc))
            else:
                fields.append((None, self.default(f, where)))
        return RecordEnc(path, fields) if len(self.misfits) == before else None

    def default(self, f: Field, path: str) -> Enc:
        if f.default is NO_DEFAULT:
            self.misfits.append((path, "missing from the data, and the schema gives no default"))
            return NullEnc(path)
        try:
            dtype = avro_arrow_type(f.type)
            value = default_array(f, dtype, path=path)
            scratch: list[Misfit] = []
            enc = fit_encoder(dtype, f.type, scratch, path)
            if scratch:
                raise ValueError(scratch[0][1])
            data = join(enc.encode(value), 1).data.tobytes()
        except (SchemaError, ValueError, pa.ArrowException) as exc:
            self.misfits.append((path, f"missing from the data, and its default fails: {exc}"))
            return NullEnc(path)
        return ConstEnc(path, data)


def _decimal(precision: int, scale: int) -> pa.DataType:
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
