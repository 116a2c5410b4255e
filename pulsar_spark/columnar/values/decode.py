"""The decode switch: values of one schema (the writer's) read as another (the reader's),
each format by its decoder, and the Arrow type a schema's values decode into.

Each format's decoder is imported by its branch, so that a worker loads what it reads
(a raw read loads none). A writer schema whose values cannot be read as the reader's
(another format, or an Avro, JSON or protobuf schema that does not resolve) raises
:class:`~.errors.SchemaResolutionError`; a value that does not decode raises
:class:`~.errors.SchemaDecodeError` naming its row, or, when collecting, leaves the row
null and gives the reason in the errors column.
"""

from __future__ import annotations

import pyarrow as pa

from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

from .errors import SchemaResolutionError

__all__ = ["Decoded", "decode_values", "decoded_type"]

#: A decoded column and, when collecting, the error text of each row (null: decoded).
Decoded = tuple[pa.Array, pa.Array | None]


def decoded_type(info: SchemaInfo, *, topic: str = "") -> pa.DataType:
    """The Arrow type values of a (non KEY_VALUE) schema decode into: the schema mapping's,
    with every nested field nullable for JSON (a JSON document may leave any field out).

    Raises:
        UnmappableSchema: naming the field and ``topic``.
    """
    from .arrow_types import arrow_type

    mapped = arrow_type(info, topic=topic)
    if info.type is not SchemaType.JSON:
        return mapped
    from .json.decode import nullable_type

    return nullable_type(mapped)


def decode_values(
    writer: SchemaInfo,
    reader: SchemaInfo,
    values: pa.Array,
    *,
    topic: str,
    collect: bool,
    reader_type: pa.DataType | None = None,
) -> Decoded:
    """``values`` (binary payloads written with ``writer``) decoded as ``reader``'s type.

    Args:
        topic: the topic read, for errors.
        collect: whether a value that does not decode becomes a null row with its reason
            (else it raises).
        reader_type: ``decoded_type(reader)`` when the caller keeps it (JSON needs it).

    Raises:
        SchemaResolutionError: the writer's values cannot be read as the reader's.
        SchemaDecodeError: a value that does not decode (not collecting).
    """
    kind = reader.type
    if kind is SchemaType.AVRO:
        from .avro.decode import avro_plan

        if writer.type is not SchemaType.AVRO:
            raise _cannot(writer, "AVRO", topic)
        plan = avro_plan(writer.data, reader.data, topic=topic)
        if collect:
            return plan.decode_collect(values)
        return plan.decode(values), None
    if kind is SchemaType.JSON:
        from .avro.decode import avro_plan
        from .json.decode import decode_json

        if writer.type is SchemaType.JSON and writer is not reader:
            avro_plan(writer.data, reader.data, topic=topic)  # resolves, or raises
        elif writer.type not in (SchemaType.JSON, SchemaType.STRING) and not writer.type.is_bytes:
            raise _cannot(writer, "JSON", topic)
        dtype = reader_type if reader_type is not None else decoded_type(reader, topic=topic)
        return decode_json(dtype, values, topic=topic, collect=collect)
    if kind in (SchemaType.PROTOBUF_NATIVE, SchemaType.PROTOBUF):
        from .proto.decode import proto_plan, proto_resolve

        if writer.type is not kind:
            raise _cannot(writer, kind.name, topic)
        proto = proto_plan(reader, topic=topic)
        if writer is not reader and writer != reader:
            proto_resolve(proto_plan(writer, topic=topic), proto)  # or raises
        if collect:
            return proto.decode_collect(values)
        return proto.decode(values), None
    if kind.is_primitive:
        from .primitive.decode import decode_primitive, decode_primitive_collect

        if writer.type is not kind and not writer.type.is_bytes:
            raise _cannot(writer, kind.name, topic)
        charset = reader.properties.get("__charset")
        if collect:
            return decode_primitive_collect(values, kind, topic=topic, charset=charset)
        return decode_primitive(values, kind, topic=topic, charset=charset), None
    msg = f"{reader.describe()} values cannot be decoded here"
    raise SchemaResolutionError(msg, topic=topic)


def _cannot(writer: SchemaInfo, kind: str, topic: str) -> SchemaResolutionError:
    return SchemaResolutionError(
        f"{writer.describe()} values cannot be read as {kind}", topic=topic
    )
