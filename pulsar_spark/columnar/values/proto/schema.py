"""Protobuf message descriptions for typed reads: PROTOBUF_NATIVE schema data (a
FileDescriptorSet) parsed into :class:`ProtoMessage` trees, and their Arrow types.

PROTOBUF_NATIVE schema data is JSON (Java's ``ProtobufNativeSchemaData``, the
Python client's ``ProtobufNativeSchema`` alike)::

    {"fileDescriptorSet": "<base64 FileDescriptorSet: the root file and its
                            dependencies>",
     "rootMessageTypeName": "pkg.Msg", "rootFileDescriptorName": "dir/f.proto"}

The files are built with ``google.protobuf``'s descriptor pool (which resolves
type names, syntax and field presence); the message is then copied into plain
frozen dataclasses that pickle small and hash, the decoder's input.

=======================================  =========================================
Protobuf                                 Arrow
=======================================  =========================================
int32, sint32, sfixed32                  int32
int64, sint64, sfixed64                  int64
uint32, fixed32                          int64 (every value fits)
uint64, fixed64                          decimal128(20, 0) (every value fits)
float / double / bool                    float32 / float64 / bool
string / bytes                           string / binary
enum                                     string: the value's name; a number the
                                         enum does not declare: the number as text
message                                  struct, null when absent
google.protobuf.Timestamp                timestamp[us, UTC], null when absent
google.protobuf.*Value (wrappers)        the wrapped scalar, null when absent
repeated T                               list<T> (empty when absent, never null)
map<K, V>                                map<K, V> (the last entry of a key wins)
oneof                                    its fields, each null unless it is the
                                         one set
=======================================  =========================================

Absent fields: proto3 scalars without presence read as their default (0, "",
false, the enum's first value); fields with presence (proto3 ``optional``,
proto2 ``optional``, oneof members) read as null, unless the descriptor
declares a default (proto2 ``[default = ...]``), which is then the value.
Groups, and a message that contains itself, raise :class:`UnmappableSchema`
naming the field and the topic.

Where this differs from google.protobuf's parse: enum numbers a proto2 (closed)
enum does not declare read as their text, where protobuf keeps them as unknown
fields and leaves the field unset; a missing proto2 ``required`` field is null,
not an error; a well-formed unknown group is an error, where protobuf skips it.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from ..errors import UnmappableSchema

__all__ = [
    "ProtoField",
    "ProtoMessage",
    "descriptor_pool_of",
    "parse_native",
    "proto_arrow_type",
    "well_known_file",
]

#: The Arrow type of each scalar kind.
SCALAR_TYPES: dict[str, pa.DataType] = {
    "int32": pa.int32(),
    "sint32": pa.int32(),
    "sfixed32": pa.int32(),
    "int64": pa.int64(),
    "sint64": pa.int64(),
    "sfixed64": pa.int64(),
    "uint32": pa.int64(),
    "fixed32": pa.int64(),
    "uint64": pa.decimal128(20, 0),
    "fixed64": pa.decimal128(20, 0),
    "float": pa.float32(),
    "double": pa.float64(),
    "bool": pa.bool_(),
    "string": pa.string(),
    "bytes": pa.binary(),
    "enum": pa.string(),
}
#: Wire type of each scalar kind when not packed.
WIRE = {
    **dict.fromkeys(["int32", "sint32", "int64", "sint64", "uint32", "uint64", "bool", "enum"], 0),
    **dict.fromkeys(["fixed64", "sfixed64", "double"], 1),
    **dict.fromkeys(["fixed32", "sfixed32", "float"], 5),
    **dict.fromkeys(["string", "bytes", "message", "map"], 2),
}
_WRAPPERS = {
    f"google.protobuf.{name}Value": kind
    for name, kind in (
        ("Double", "double"),
        ("Float", "float"),
        ("Int64", "int64"),
        ("UInt64", "uint64"),
        ("Int32", "int32"),
        ("UInt32", "uint32"),
        ("Bool", "bool"),
        ("String", "string"),
        ("Bytes", "bytes"),
    )
}
_TIMESTAMP = "google.protobuf.Timestamp"


@dataclass(frozen=True)
class ProtoField:
    """One field of a message.

    ``kind`` is a scalar kind (a key of :data:`SCALAR_TYPES`), ``message``,
    ``timestamp``, ``wrapper`` or ``map``. ``presence``: an absent value is
    null (else ``default``). A map has ``entry`` (its key field number 1, value 2).
    """

    name: str
    number: int
    kind: str
    repeated: bool = False
    presence: bool = False
    default: object = None
    oneof: str = ""
    message: ProtoMessage | None = None
    #: Enum values as (number, name), first declared first.
    enum: tuple[tuple[int, str], ...] = ()

    @property
    def wire(self) -> int:
        """The wire type of one (unpacked) value."""
        return WIRE.get(self.kind, 2)


@dataclass(frozen=True)
class ProtoMessage:
    """A message type: its full name and fields (in declaration order)."""

    name: str
    fields: tuple[ProtoField, ...]


def parse_native(data: bytes | str, *, topic: str = "") -> ProtoMessage:
    """The root message of PROTOBUF_NATIVE schema data (see the module docstring).

    Raises:
        UnmappableSchema: data that is not such JSON, a descriptor set that does not
            build, a missing root type, or a type without an Arrow type.
    """
    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    try:
        parsed = json.loads(data)
        files = base64.b64decode(parsed["fileDescriptorSet"], validate=True)
        root = str(parsed["rootMessageTypeName"])
        fds = descriptor_pb2.FileDescriptorSet.FromString(files)
    except (ValueError, KeyError, TypeError, binascii.Error, DecodeError) as exc:
        msg = (
            "PROTOBUF_NATIVE schema data is not JSON with a base64 fileDescriptorSet and a "
            f"rootMessageTypeName: {type(exc).__name__}: {exc}"
        )
        raise UnmappableSchema(msg, topic=topic) from None
    return describe(descriptor_pool_of(fds, topic), root, topic=topic)


def descriptor_pool_of(fds: object, topic: str) -> object:
    """A descriptor pool holding the set's files, dependencies first (well-known types
    the set leaves out come from protobuf's own copies)."""
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    by_name = {f.name: f for f in fds.file}  # type: ignore[attr-defined]
    added: set[str] = set()

    def add(name: str, trail: tuple[str, ...]) -> None:
        if name in added:
            return
        if name in trail:
            msg = f"the descriptor files import each other ({' -> '.join((*trail, name))})"
            raise UnmappableSchema(msg, topic=topic)
        proto: Any = by_name.get(name) or well_known_file(name)
        if proto is None:
            which = f"{trail[-1]} imports it" if trail else "the set names it"
            msg = f"the descriptor set lacks the file {name} ({which})"
            raise UnmappableSchema(msg, topic=topic)
        for dep in proto.dependency:
            add(dep, (*trail, name))
        try:
            pool.Add(proto)
        except (TypeError, ValueError) as exc:
            msg = f"the descriptor file {name} does not build: {exc}"
            raise UnmappableSchema(msg, topic=topic) from None
        added.add(name)

    for name in by_name:
        add(name, ())
    return pool


def well_known_file(name: str) -> object:
    """protobuf's own FileDescriptorProto of a google/protobuf/ file, or None."""
    if not name.startswith("google/protobuf/"):
        return None
    import importlib

    from google.protobuf import descriptor_pb2

    module = name.removeprefix("google/protobuf/").removesuffix(".proto").replace("/", ".")
    try:
        found = importlib.import_module(f"google.protobuf.{module}_pb2")
    except ImportError:
        return None
    proto = descriptor_pb2.FileDescriptorProto()
    found.DESCRIPTOR.CopyToProto(proto)
    return proto


def describe(pool: object, root: str, *, topic: str = "") -> ProtoMessage:
    """The :class:`ProtoMessage` of type ``root`` in a descriptor pool.

    Raises:
        UnmappableSchema: no such type, a group, or a message that contains itself.
    """
    try:
        descriptor = pool.FindMessageTypeByName(root)  # type: ignore[attr-defined]
    except KeyError:
        msg = f"the descriptor set has no message type {root}"
        raise UnmappableSchema(msg, topic=topic) from None
    return _message(descriptor, "", (), topic)


def from_descriptor(descriptor: object, *, topic: str = "") -> ProtoMessage:
    """The :class:`ProtoMessage` of a message descriptor (``Msg.DESCRIPTOR``)."""
    return _message(descriptor, "", (), topic)


def _message(d: object, path: str, inside: tuple[str, ...], topic: str) -> ProtoMessage:
    name = d.full_name  # type: ignore[attr-defined]
    if name in inside:
        msg = f"message {name} contains itself: a recursive message has no Arrow type"
        raise UnmappableSchema(msg, topic=topic, field=path or "<value>")
    inner = (*inside, name)
    fields = tuple(
        _field(f, f"{path}.{f.name}" if path else f.name, inner, topic)
        for f in d.fields  # type: ignore[attr-defined]
    )
    return ProtoMessage(name, fields)


def _field(f: object, path: str, inside: tuple[str, ...], topic: str) -> ProtoField:
    from google.protobuf.descriptor import FieldDescriptor as FD

    kind = _KINDS.get(f.type)  # type: ignore[attr-defined]
    if kind is None:
        msg = "groups (proto2 TYPE_GROUP) have no Arrow type here"
        raise UnmappableSchema(msg, topic=topic, field=path)
    repeated = bool(f.is_repeated)  # type: ignore[attr-defined]
    oneof = f.containing_oneof  # type: ignore[attr-defined]
    real_oneof = oneof is not None and not _synthetic(oneof)
    presence = bool(f.has_presence) and not repeated  # type: ignore[attr-defined]
    default: object = None
    enum: tuple[tuple[int, str], ...] = ()
    message = None
    if f.type == FD.TYPE_ENUM:  # type: ignore[attr-defined]
        enum = tuple((v.number, v.name) for v in f.enum_type.values)  # type: ignore[attr-defined]
    if kind == "message":
        sub = f.message_type  # type: ignore[attr-defined]
        if sub.GetOptions().map_entry and repeated:
            kind = "map"
            entry = _message(sub, path + "{}", inside, topic)
            # Map keys and values are never absent: an entry without one has the default.
            message = ProtoMessage(
                entry.name, tuple(replace(e, presence=False) for e in entry.fields)
            )
        elif sub.full_name == _TIMESTAMP:
            kind = "timestamp"
        elif sub.full_name in _WRAPPERS:
            kind = "wrapper"
            message = _message(sub, path, inside, topic)
        else:
            message = _message(sub, path, inside, topic)
        presence = not repeated
    else:
        default = _default_of(f, kind, enum)
        if f.has_default_value and not real_oneof:  # type: ignore[attr-defined]
            presence = False
    return ProtoField(
        name=f.name,  # type: ignore[attr-defined]
        number=f.number,  # type: ignore[attr-defined]
        kind=kind,
        repeated=repeated,
        presence=presence,
        default=default,
        oneof=oneof.name if real_oneof else "",
        message=message,
        enum=enum,
    )


def _synthetic(oneof: object) -> bool:
    """A proto3 ``optional`` field's own oneof (not a user's oneof)."""
    fields = oneof.fields  # type: ignore[attr-defined]
    return len(fields) == 1 and oneof.name == "_" + fields[0].name  # type: ignore[attr-defined]


def _default_of(f: object, kind: str, enum: tuple[tuple[int, str], ...]) -> object:
    value = f.default_value  # type: ignore[attr-defined]
    if kind == "enum":
        names = dict(enum)
        if isinstance(value, int) and value in names:
            return names[value]
        return enum[0][1] if enum else str(value)
    if kind == "bytes" and isinstance(value, str):
        return value.encode("latin-1")
    return value


def _kinds() -> dict[int, str]:
    from google.protobuf.descriptor import FieldDescriptor as FD

    names = [
        "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
        "sfixed32", "sfixed64", "float", "double", "bool", "string", "bytes", "enum", "message",
    ]  # fmt: skip
    return {getattr(FD, f"TYPE_{n.upper()}"): n for n in names}


_KINDS = _kinds()


def proto_arrow_type(message: ProtoMessage) -> pa.DataType:
    """The Arrow type of values of a message (a struct; see the module's table)."""
    return pa.struct([proto_arrow_field(f) for f in message.fields])


def proto_arrow_field(field: ProtoField) -> pa.Field:
    """The Arrow field of a message field (nullable when it has presence)."""
    item = _item_type(field)
    if field.kind == "map":
        return pa.field(field.name, item, nullable=False)
    if field.repeated:
        return pa.field(field.name, pa.list_(pa.field("item", item, False)), nullable=False)
    return pa.field(field.name, item, nullable=field.presence)


def _item_type(field: ProtoField) -> pa.DataType:
    if field.kind == "map":
        assert field.message is not None
        key, value = _entry(field.message)
        value_type = (
            proto_arrow_type(value.message)
            if value.kind == "message" and value.message is not None
            else _item_type(value)
        )
        return pa.map_(_item_type(key), pa.field("value", value_type, nullable=False))
    if field.kind == "message":
        assert field.message is not None
        return proto_arrow_type(field.message)
    if field.kind == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if field.kind == "wrapper":
        assert field.message is not None
        return SCALAR_TYPES[field.message.fields[0].kind]
    return SCALAR_TYPES[field.kind]


def _entry(entry: ProtoMessage) -> tuple[ProtoField, ProtoField]:
    """The key and value fields of a map entry message."""
    numbers = {f.number: f for f in entry.fields}
    return numbers[1], numbers[2]
