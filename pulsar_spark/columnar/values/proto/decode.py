"""Protobuf values (binary Arrow arrays of serialized messages) decoded into Arrow structs,
with plans made once per schema.

::

    plan = proto_plan(schema_info)                   # PROTOBUF_NATIVE, cached
    plan.type                                        # the Arrow struct of the values
    column = plan.decode(values)                     # raises SchemaDecodeError
    column, errors = plan.decode_collect(values)     # dead-letter: null + error text

All the values are read at once, field by field and level by level
(:mod:`.wire`, :mod:`.columns`): no Python step per message.
Null values (``null_value`` messages) stay null; an empty value is a message
with every field absent. Values are read by field number with the plan's
(the reader's) descriptor, which is protobuf's own evolution rule: fields the
descriptor lacks are skipped, fields a message lacks take their defaults.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

from ..avro.decode import DatumPlan
from ..avro.lanes import Failures, Lanes
from ..errors import SchemaResolutionError, UnmappableSchema
from .columns import message_array
from .schema import ProtoField, ProtoMessage, parse_native, proto_arrow_type

__all__ = ["ProtoPlan", "proto_plan", "proto_resolve"]


class ProtoPlan(DatumPlan):
    """How to decode values of a protobuf message type into its Arrow struct.

    Args:
        message: the message type (see :func:`~.schema.parse_native`).
        topic: named in errors.
    """

    def __init__(self, message: ProtoMessage, *, topic: str = "") -> None:
        self.message = message
        self.topic = topic
        self.type: pa.DataType = proto_arrow_type(message)

    def read(self, lanes: Lanes, failures: Failures) -> pa.Array:
        n = len(lanes.pos)
        items = np.arange(n, dtype=np.int64)
        return message_array(
            lanes.data, self.message, lanes.pos, lanes.end, items, n, lanes.rows, failures
        )


@functools.lru_cache(maxsize=64)
def proto_plan(info: SchemaInfo, *, topic: str = "") -> ProtoPlan:
    """The :class:`ProtoPlan` of a PROTOBUF_NATIVE (or PROTOBUF) schema, made once and
    cached.

    Raises:
        UnmappableSchema: a schema that does not parse, or a message without an Arrow type.
    """
    if info.type is SchemaType.PROTOBUF:
        from .from_avro import parse_parsing_info

        return ProtoPlan(parse_parsing_info(info, topic=topic), topic=topic)
    if info.type is not SchemaType.PROTOBUF_NATIVE:
        msg = f"a {info.describe()} schema is not a protobuf schema"
        raise UnmappableSchema(msg, topic=topic)
    return ProtoPlan(parse_native(info.data, topic=topic), topic=topic)


#: Kinds one wire encoding carries, so that a field number may move between them.
_FAMILIES = [
    {"int32", "int64", "uint32", "uint64", "bool", "enum"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes"},
]


def proto_resolve(writer: ProtoPlan, reader: ProtoPlan) -> None:
    """Check that values written with ``writer`` read as ``reader``: every field number the
    two share carries a type the reader can decode (protobuf itself would skip the
    field, silently leaving the default: this says what changed instead).

    Raises:
        SchemaResolutionError: naming the first field whose type changed.
    """
    _resolve(writer.message, reader.message, "", reader.topic)


def _resolve(writer: ProtoMessage, reader: ProtoMessage, path: str, topic: str) -> None:
    theirs = {f.number: f for f in writer.fields}
    for field in reader.fields:
        other = theirs.get(field.number)
        if other is None:
            continue
        where = f"{path}.{field.name}" if path else field.name
        if other.kind == field.kind:
            if field.message is not None and other.message is not None:
                _resolve(other.message, field.message, where, topic)
            continue
        if any(other.kind in f and field.kind in f for f in _FAMILIES):
            continue
        msg = (
            f"field number {field.number} is {_kind(field)} in the query's schema, "
            f"{_kind(other)} in the messages"
        )
        raise SchemaResolutionError(msg, topic=topic, field=where)


def _kind(field: ProtoField) -> str:
    if field.message is not None and field.kind == "message":
        return f"message {field.message.name}"
    return ("repeated " if field.repeated and field.kind != "map" else "") + field.kind
