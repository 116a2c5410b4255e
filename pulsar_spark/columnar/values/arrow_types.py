"""The schema mapping: a Pulsar schema to an Arrow type, and an Arrow column type to the
primitive schema it is written as.

=====================================  ==========================================
Pulsar schema                          Arrow type
=====================================  ==========================================
NONE, BYTES                            binary
STRING                                 string
BOOLEAN                                bool
INT8, INT16, INT32, INT64              int8, int16, int32, int64
FLOAT, DOUBLE                          float32, float64
DATE (ms since the epoch)              date32 (the UTC day; the time of day is dropped)
TIME (ms since the epoch)              time32[ms] (the UTC time of day)
TIMESTAMP (ms since the epoch)         timestamp[ms, UTC]
INSTANT (seconds + nanoseconds)        timestamp[us, UTC] (sub-microsecond digits dropped)
LOCAL_DATE (epoch day)                 date32
LOCAL_TIME (nanosecond of day)         time64[ns]
LOCAL_DATE_TIME (epoch day + ns)       timestamp[us] (no time zone)
AVRO, JSON (data: an Avro schema)      the record's type (:mod:`.avro.arrow_types`)
PROTOBUF_NATIVE (a FileDescriptorSet)  the root message's struct
(:mod:`pulsar_spark.columnar.values.proto.schema`)
PROTOBUF (Avro schema + field numbers) the same, from ``__PARSING_INFO__``
KEY_VALUE                              struct<key: K, value: V>, each half mapped alone
=====================================  ==========================================

A type without an Arrow type (see the format's own mapping), and a PROTOBUF
schema without field numbers, raise :class:`UnmappableSchema` naming the field
and topic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from pulsar_spark.protocol.schemas.info import SchemaInfo, split_key_value
from pulsar_spark.protocol.schemas.types import SchemaType

from .errors import UnmappableSchema

if TYPE_CHECKING:  # the Avro mapping loads with the first AVRO or JSON schema
    from .avro.arrow_types import EnumMode

__all__ = [
    "PRIMITIVE_TYPES",
    "arrow_type",
    "primitive_schema_type",
]

#: The Arrow type of each primitive schema type's values.
PRIMITIVE_TYPES: dict[SchemaType, pa.DataType] = {
    SchemaType.NONE: pa.binary(),
    SchemaType.BYTES: pa.binary(),
    SchemaType.STRING: pa.string(),
    SchemaType.BOOLEAN: pa.bool_(),
    SchemaType.INT8: pa.int8(),
    SchemaType.INT16: pa.int16(),
    SchemaType.INT32: pa.int32(),
    SchemaType.INT64: pa.int64(),
    SchemaType.FLOAT: pa.float32(),
    SchemaType.DOUBLE: pa.float64(),
    SchemaType.DATE: pa.date32(),
    SchemaType.TIME: pa.time32("ms"),
    SchemaType.TIMESTAMP: pa.timestamp("ms", tz="UTC"),
    SchemaType.INSTANT: pa.timestamp("us", tz="UTC"),
    SchemaType.LOCAL_DATE: pa.date32(),
    SchemaType.LOCAL_TIME: pa.time64("ns"),
    SchemaType.LOCAL_DATE_TIME: pa.timestamp("us"),
}


def arrow_type(info: SchemaInfo, *, topic: str = "", enums: EnumMode = "string") -> pa.DataType:
    """The Arrow type of the values of a topic with this schema (see the module's tables).

    Raises:
        UnmappableSchema: a type without an Arrow type, naming the field and ``topic``.
    """
    kind = info.type
    if kind in PRIMITIVE_TYPES:
        return PRIMITIVE_TYPES[kind]
    if kind in (SchemaType.AVRO, SchemaType.JSON):
        from .avro.arrow_types import avro_arrow_type
        from .avro.schema import parse_avro

        return avro_arrow_type(parse_avro(info.data, topic=topic), topic=topic, enums=enums)
    if kind in (SchemaType.PROTOBUF_NATIVE, SchemaType.PROTOBUF):
        from .proto.decode import proto_plan

        return proto_plan(info, topic=topic).type
    if kind is SchemaType.KEY_VALUE:
        halves = split_key_value(info)
        return pa.struct(
            [
                pa.field("key", arrow_type(halves.key, topic=topic, enums=enums)),
                pa.field("value", arrow_type(halves.value, topic=topic, enums=enums)),
            ]
        )
    msg = f"{kind.name} schemas have no Arrow mapping here"
    raise UnmappableSchema(msg, topic=topic)


# ---------------------------------------------------------------------------
# Arrow -> primitive schema (writes)
# ---------------------------------------------------------------------------


def primitive_schema_type(dtype: pa.DataType) -> SchemaType | None:
    """The primitive schema type whose values a single column of ``dtype`` is written as,
    or None when it has none (a struct, a list...). Timestamps with a time zone become
    INSTANT (seconds and nanoseconds: TIMESTAMP would keep milliseconds only), without one
    LOCAL_DATE_TIME; dates LOCAL_DATE; times LOCAL_TIME."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if pa.types.is_timestamp(dtype):
        return SchemaType.INSTANT if dtype.tz else SchemaType.LOCAL_DATE_TIME
    if pa.types.is_date(dtype):
        return SchemaType.LOCAL_DATE
    if pa.types.is_time(dtype):
        return SchemaType.LOCAL_TIME
    for kind, mapped in _WRITE_PRIMITIVES:
        if mapped(dtype):
            return kind
    return None


_WRITE_PRIMITIVES = [
    (SchemaType.STRING, lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
    (SchemaType.BYTES, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
    (SchemaType.BOOLEAN, pa.types.is_boolean),
    (SchemaType.INT8, pa.types.is_int8),
    (SchemaType.INT16, pa.types.is_int16),
    (SchemaType.INT32, pa.types.is_int32),
    (SchemaType.INT64, pa.types.is_int64),
    (SchemaType.FLOAT, pa.types.is_float32),
    (SchemaType.DOUBLE, pa.types.is_float64),
]
