"""Avro types to Arrow types, and Arrow types back to Avro schemas (for writes).

=====================================  ==========================================
Avro                                   Arrow
=====================================  ==========================================
null / boolean / int / long            null / bool / int32 / int64
float / double                         float32 / float64
bytes / fixed                          binary
string                                 string (also with logicalType uuid)
record                                 struct (each field non-nullable unless a union with null)
enum                                   string, or dictionary<int32, string> (``enums="dictionary"``)
array / map                            list / map<string, V>
union of null and T; [T]               T, nullable
decimal(p, s) on bytes or fixed        decimal128(p, s); decimal256 when p > 38
date / time-millis / time-micros       date32 / time32[ms] / time64[us]
timestamp-millis / -micros / -nanos    timestamp[ms / us / ns, UTC]
local-timestamp-millis / ...           timestamp[ms / us / ns] (no time zone)
uuid on fixed(16), duration            binary
=====================================  ==========================================

A union of two or more non-null types and a recursive record raise
:class:`~..errors.UnmappableSchema` naming the field and topic.

:func:`avro_schema_for` goes the other way: the Avro schema (parsed JSON) that
holds values of an Arrow type, as AVRO and JSON schemas are written.
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa

from ..errors import UnmappableSchema
from .schema import AvroType, Enum, Fixed, Primitive, Record, non_null

__all__ = [
    "EnumMode",
    "avro_arrow_field",
    "avro_arrow_type",
    "avro_schema_for",
]

EnumMode = Literal["string", "dictionary"]

_PRIMITIVE_ARROW = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL_ARROW = {
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "timestamp-nanos": pa.timestamp("ns", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "local-timestamp-nanos": pa.timestamp("ns"),
}


def avro_arrow_type(
    node: AvroType, *, topic: str = "", path: str = "", enums: EnumMode = "string"
) -> pa.DataType:
    """The Arrow type of values of an Avro type (a union with null maps to its other type:
    nullability is the field's, see :func:`avro_arrow_field`)."""
    return _Mapper(topic, enums).type(node, path, ())


def avro_arrow_field(
    name: str, node: AvroType, *, topic: str = "", path: str = "", enums: EnumMode = "string"
) -> pa.Field:
    """An Arrow field for an Avro type: nullable when the type is a union with null."""
    return _Mapper(topic, enums).field(name, node, path, ())


class _Mapper:
    def __init__(self, topic: str, enums: EnumMode) -> None:
        self.topic = topic
        self.enums = enums

    def fail(self, path: str, reason: str) -> UnmappableSchema:
        return UnmappableSchema(reason, topic=self.topic, field=path or "<value>")

    def field(self, name: str, node: AvroType, path: str, records: tuple[str, ...]) -> pa.Field:
        inner, nullable = non_null(node)
        if inner is None or inner.kind == "null":
            return pa.field(name, pa.null())
        return pa.field(name, self.type(inner, path, records), nullable=nullable)

    def type(self, node: AvroType, path: str, records: tuple[str, ...]) -> pa.DataType:
        inner, _ = non_null(node)
        if inner is None:
            return pa.null()
        if inner.kind == "union":
            branches = inner.branches  # type: ignore[union-attr]
            names = ", ".join(_describe(b) for b in branches if b.kind != "null")
            msg = f"a union of several non-null types ({names}) has no Arrow type"
            raise self.fail(path, msg)
        node = inner
        if isinstance(node, Primitive):
            if node.logical == "decimal":
                return _decimal(node.precision, node.scale)
            if node.logical in _LOGICAL_ARROW:
                return _LOGICAL_ARROW[node.logical]
            return _PRIMITIVE_ARROW[node.kind]
        if isinstance(node, Fixed):
            if node.logical == "decimal":
                return _decimal(node.precision, node.scale)
            return pa.binary()
        if isinstance(node, Enum):
            if self.enums == "dictionary":
                return pa.dictionary(pa.int32(), pa.string())
            return pa.string()
        if isinstance(node, Record):
            if node.name in records:
                msg = f"record {node.name} contains itself: a recursive type has no Arrow type"
                raise self.fail(path, msg)
            inside = (*records, node.name)
            return pa.struct(
                [
                    self.field(f.name, f.type, f"{path}.{f.name}" if path else f.name, inside)
                    for f in node.fields
                ]
            )
        if node.kind == "array":
            item = self.field("item", node.items, path + "[]", records)  # type: ignore[union-attr]
            return pa.list_(item)
        if node.kind == "map":
            value = self.field("value", node.values, path + "{}", records)  # type: ignore[union-attr]
            return pa.map_(pa.string(), value)
        msg = f"the Avro type {node.kind} has no Arrow type"  # pragma: no cover
        raise self.fail(path, msg)


def _decimal(precision: int, scale: int) -> pa.DataType:
    if precision <= 38:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


def _describe(node: AvroType) -> str:
    return getattr(node, "name", None) or node.kind


# ---------------------------------------------------------------------------
# Arrow -> Avro (writes)
# ---------------------------------------------------------------------------


def avro_schema_for(
    dtype: pa.DataType,
    *,
    name: str = "topLevelRecord",
    namespace: str = "",
    nullable: bool = False,
    topic: str = "",
) -> object:
    """An Avro schema (as parsed JSON) whose values hold values of ``dtype``.

    A struct becomes a record named ``name`` (nested records are named after their
    field, in a namespace made of the path, so names never clash); nullable fields
    become ``["null", T]`` with default null. Decimals become ``bytes`` decimals;
    timestamps with a time zone ``timestamp-millis``/``-micros`` (nanoseconds become
    micros), without one ``local-timestamp-*``; dates ``int`` dates; times
    ``time-millis``/``time-micros``; dictionaries their value type.

    Raises:
        UnmappableSchema: a type Avro cannot hold (a map with non-string keys, unsigned
            64-bit integers, a union...), naming the field.
    """
    node = _avro_of(dtype, name, namespace, "", topic)
    return ["null", node] if nullable else node


def _avro_of(dtype: pa.DataType, name: str, namespace: str, path: str, topic: str) -> object:
    t = pa.types
    if t.is_dictionary(dtype):
        return _avro_of(dtype.value_type, name, namespace, path, topic)
    if t.is_struct(dtype):
        space = f"{namespace}.{name}" if namespace else name
        fields: list[dict[str, object]] = []
        for child in dtype:
            inner = _avro_of(child.type, child.name, space, _join(path, child.name), topic)
            if child.nullable and not t.is_null(child.type):
                fields.append({"name": child.name, "type": ["null", inner], "default": None})
            else:
                fields.append({"name": child.name, "type": inner})
        record: dict[str, object] = {"type": "record", "name": name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return record
    if t.is_list(dtype) or t.is_large_list(dtype) or t.is_fixed_size_list(dtype):
        item = dtype.value_field
        inner = _avro_of(item.type, name, namespace, path + "[]", topic)
        return {"type": "array", "items": ["null", inner] if item.nullable else inner}
    if t.is_map(dtype):
        if not (t.is_string(dtype.key_type) or t.is_large_string(dtype.key_type)):
            msg = f"Avro maps have string keys, not {dtype.key_type}"
            raise UnmappableSchema(msg, topic=topic, field=path or "<value>")
        item = dtype.item_field
        inner = _avro_of(item.type, name, namespace, path + "{}", topic)
        return {"type": "map", "values": ["null", inner] if item.nullable else inner}
    scalar = _avro_scalar(dtype)
    if scalar is None:
        msg = f"the Arrow type {dtype} has no Avro type"
        raise UnmappableSchema(msg, topic=topic, field=path or "<value>")
    return scalar


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _avro_scalar(dtype: pa.DataType) -> object:
    t = pa.types
    simple = [
        (t.is_null, "null"),
        (t.is_boolean, "boolean"),
        (lambda d: t.is_int8(d) or t.is_int16(d) or t.is_int32(d), "int"),
        (lambda d: t.is_uint8(d) or t.is_uint16(d), "int"),
        (lambda d: t.is_int64(d) or t.is_uint32(d), "long"),
        (lambda d: t.is_float16(d) or t.is_float32(d), "float"),
        (t.is_float64, "double"),
        (lambda d: t.is_string(d) or t.is_large_string(d) or t.is_string_view(d), "string"),
        (lambda d: t.is_binary(d) or t.is_large_binary(d) or t.is_binary_view(d), "bytes"),
    ]
    for test, avro in simple:
        if test(dtype):
            return avro
    if t.is_fixed_size_binary(dtype) and not t.is_decimal(dtype):
        return "bytes"
    if t.is_decimal(dtype):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": dtype.precision,
            "scale": dtype.scale,
        }
    if t.is_date(dtype):
        return {"type": "int", "logicalType": "date"}
    if t.is_time32(dtype):
        return {"type": "int", "logicalType": "time-millis"}
    if t.is_time64(dtype):
        return {"type": "long", "logicalType": "time-micros"}
    if t.is_timestamp(dtype):
        unit = "millis" if dtype.unit in ("s", "ms") else "micros"
        prefix = "timestamp" if dtype.tz else "local-timestamp"
        return {"type": "long", "logicalType": f"{prefix}-{unit}"}
    return None
