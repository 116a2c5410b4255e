"""Arrow values encoded as protobuf messages (PROTOBUF_NATIVE, and PROTOBUF with field
numbers), one payload per row, columnar: the columns checked against the message first.

::

    enc = ProtoEncoder(struct_type, topic_schema_info)   # SchemaMismatch if it does not fit
    payloads = enc.encode(batch)                         # binary, null where the row is null
    info = native_writer_schema(info)                    # rootFileDescriptorName filled in

Columns map to fields as reads give them (:mod:`.schema`'s table; what
fits: :mod:`.encode_fit`), by name. Bytes are what protobuf itself
serializes for the same values: fields in field-number order, packed
repeated scalars where the descriptor packs them (proto3's default), proto3
fields without presence left out when they hold the default, a null field
with presence absent, map entries with both key and value. A null row gives
a null payload (sent with ``null_value``).

PROTOBUF (non-native) schemas describe their top-level scalar fields only
(``__PARSING_INFO__``, :mod:`.from_avro`); their values are written unpacked
and every non-null value explicitly, which proto2 and proto3 readers alike read
as given.
"""

from __future__ import annotations

import base64
import functools
import json

import pyarrow as pa

from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

from ..avro.encode import Values, encode_rows, value_array
from ..encode_errors import Misfit, SchemaMismatch
from ..errors import UnmappableSchema
from .encode_fields import MessageEnc
from .encode_fit import Layout, fit_message, layout_of
from .schema import (
    ProtoMessage,
    describe,
    descriptor_pool_of,
    parse_native,
    well_known_file,
)

__all__ = ["ProtoEncoder", "native_writer_schema", "proto_layout"]


@functools.lru_cache(maxsize=32)
def proto_layout(info: SchemaInfo, *, topic: str = "") -> tuple[ProtoMessage, Layout]:
    """The message of a PROTOBUF_NATIVE or PROTOBUF schema and how protobuf lays out its
    fields (:func:`~.encode_fit.layout_of`; empty for PROTOBUF: unpacked, explicit).

    Raises:
        UnmappableSchema: schema data that does not parse, or a message without an Arrow
            type.
    """
    if info.type is SchemaType.PROTOBUF:
        from .from_avro import parse_parsing_info

        return parse_parsing_info(info, topic=topic), {}
    if info.type is not SchemaType.PROTOBUF_NATIVE:
        msg = f"a {info.describe()} schema is not a protobuf schema"
        raise UnmappableSchema(msg, topic=topic)
    message = parse_native(info.data, topic=topic)  # checks the data
    from google.protobuf import descriptor_pb2

    parsed = json.loads(info.data)
    files = descriptor_pb2.FileDescriptorSet.FromString(
        base64.b64decode(parsed["fileDescriptorSet"])
    )
    pool = descriptor_pool_of(files, topic)
    root = str(parsed["rootMessageTypeName"])
    assert describe(pool, root, topic=topic) == message
    return message, layout_of(pool.FindMessageTypeByName(root))  # type: ignore[attr-defined]


def native_writer_schema(info: SchemaInfo, *, topic: str = "") -> SchemaInfo:
    """PROTOBUF_NATIVE schema data as a producer registers it, complete for the broker's
    checks and Java readers (which build the descriptors from the set alone): the
    ``rootFileDescriptorName`` (the file of the set that declares the root message)
    filled in when missing or empty, and the google/protobuf/ files the set imports but
    lacks added (protobuf's own copies). ``info`` itself when nothing is missing.

    Raises:
        UnmappableSchema: no file of the set declares the root message.
    """
    if info.type is not SchemaType.PROTOBUF_NATIVE:
        return info
    parse_native(info.data, topic=topic)  # checks the data
    from google.protobuf import descriptor_pb2

    parsed = json.loads(info.data)
    root = str(parsed["rootMessageTypeName"])
    files = descriptor_pb2.FileDescriptorSet.FromString(
        base64.b64decode(parsed["fileDescriptorSet"])
    )
    changed = False
    names = {f.name for f in files.file}
    todo = [dep for f in files.file for dep in f.dependency]
    while todo:
        name = todo.pop()
        if name in names:
            continue
        known = well_known_file(name)  # parse_native found every import, so it is one of these
        assert isinstance(known, descriptor_pb2.FileDescriptorProto)
        files.file.insert(0, known)
        names.add(name)
        todo += list(known.dependency)
        changed = True
    if not parsed.get("rootFileDescriptorName"):
        parsed["rootFileDescriptorName"] = _declaring_file(files, root, topic)
        changed = True
    if not changed:
        return info
    parsed["fileDescriptorSet"] = base64.b64encode(files.SerializeToString()).decode()
    data = json.dumps(parsed, separators=(",", ":")).encode()
    return SchemaInfo(info.type, info.name, data, dict(info.properties))


def _declaring_file(files: object, root: str, topic: str) -> str:
    """The name of the file of the set that declares message ``root``."""
    for file in files.file:  # type: ignore[attr-defined]
        prefix = f"{file.package}." if file.package else ""
        if any(root == prefix + m.name or root.startswith(prefix + m.name + ".")
               for m in file.message_type):  # fmt: skip
            return str(file.name)
    msg = f"no file of the descriptor set declares the message {root}"
    raise UnmappableSchema(msg, topic=topic)


class ProtoEncoder:
    """Values of one Arrow type (a struct) encoded as messages of one protobuf schema.

    Args:
        dtype: the values' Arrow type (see
        :func:`~pulsar_spark.columnar.values.avro.encode.value_type`).
        info: a PROTOBUF_NATIVE (or PROTOBUF) schema.
        topic: named in errors.

    Raises:
        SchemaMismatch: ``dtype`` does not fit the message; names every field at fault.
        UnmappableSchema: schema data that does not parse.
    """

    def __init__(self, dtype: pa.DataType, info: SchemaInfo, *, topic: str = "") -> None:
        self.dtype = dtype
        self.info = info
        self.topic = topic
        self.message, self.layout = proto_layout(info, topic=topic)
        self.kind = info.type.name
        self.enc = self._fit(dtype)
        self._fitted: dict[pa.DataType, MessageEnc] = {dtype: self.enc}

    def _fit(self, dtype: pa.DataType) -> MessageEnc:
        misfits: list[Misfit] = []
        enc = fit_message(dtype, self.message, self.layout, misfits)
        if misfits or enc is None:
            raise SchemaMismatch.of(misfits, topic=self.topic, schema=self.kind)
        return enc

    def encode(self, values: Values) -> pa.Array:
        """One payload per row: a binary array, null where the value is null.

        Raises:
            SchemaMismatch: values the message cannot hold (a null where the field has no
                presence, an integer out of range, an unknown enum name, two members of a
                oneof...), naming the field; values of a type that does not fit.
        """
        array = value_array(values)
        enc = self._fitted.get(array.type)
        if enc is None:  # another nullability, say: checked again
            enc = self._fitted[array.type] = self._fit(array.type)
        return encode_rows(array, enc.body, topic=self.topic)
