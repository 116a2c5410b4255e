"""Pulsar schemas as values: :class:`SchemaInfo`, :class:`SchemaType`, the KEY_VALUE layout
and schema version bytes (no I/O).

A topic's schema travels in the protocol's ``Schema`` message (name, data,
type, properties), in PRODUCER and SUBSCRIBE and in the answers to GET_SCHEMA.
:class:`SchemaType` (:mod:`.types`, re-exported here) numbers the types
as the Java client does.

A KEY_VALUE schema holds its two halves in its data and properties
(Java's KeyValueSchemaInfo)::

    data        int32 BE len(key data)   key data   int32 BE len(value data)   value data
                (an empty half: length 0 as Java writes it, or -1 as the C++ client does)
    properties  key.schema.name / key.schema.type / key.schema.properties (JSON object),
                the same three with ``value.``, and kv.encoding.type INLINE | SEPARATED

A schema version is an 8-byte big-endian int64 (the first is 0); empty bytes
mean "no version" (:func:`version_from_bytes`, :func:`version_to_bytes`).
"""

from __future__ import annotations

import enum
import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from .. import PulsarApi_pb2 as pb
from .types import JAVA_NAMES, InvalidSchema, SchemaType

__all__ = [
    "KeyValueEncoding",
    "KeyValueSchemas",
    "SchemaInfo",
    "key_value_schema",
    "split_key_value",
    "version_from_bytes",
    "version_to_bytes",
]

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


#: The properties the Java client adds to AVRO and JSON schemas it derives.
_STRUCT_PROPERTIES = {"__alwaysAllowNull": "true", "__jsr310ConversionEnabled": "false"}


@dataclass(frozen=True)
class SchemaInfo:
    """A schema as the broker stores it: type, name, data and properties.

    ``data`` is what the type makes of it: an Avro schema as JSON for AVRO and
    JSON, the KEY_VALUE layout of the module, a descriptor for PROTOBUF_NATIVE,
    nothing for primitives. ``properties`` is copied into a dict of its own.
    """

    type: SchemaType
    name: str = ""
    data: bytes = b""
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "type", SchemaType(self.type))
        object.__setattr__(self, "data", bytes(self.data))
        object.__setattr__(self, "properties", dict(self.properties))

    def __hash__(self) -> int:
        return hash((self.type, self.name, self.data, frozenset(self.properties.items())))

    # -- construction ------------------------------------------------------------------

    @classmethod
    def primitive(cls, kind: SchemaType) -> SchemaInfo:
        """The SchemaInfo the Java client uses for a primitive (or BYTES) type.

        Raises:
            InvalidSchema: a type that is not primitive.
        """
        if not kind.is_primitive:
            msg = f"{kind.name} is not a primitive schema type"
            raise InvalidSchema(msg)
        return cls(kind, JAVA_NAMES[kind])

    @classmethod
    def avro(cls, definition: str | Mapping[str, object], *, name: str = "") -> SchemaInfo:
        """An AVRO schema from its definition (JSON text, or a parsed JSON object),
        with the properties the Java client adds."""
        return cls(SchemaType.AVRO, name, _definition_bytes(definition), _STRUCT_PROPERTIES)

    @classmethod
    def json(cls, definition: str | Mapping[str, object], *, name: str = "") -> SchemaInfo:
        """A JSON schema: values are JSON documents, described by an Avro schema."""
        return cls(SchemaType.JSON, name, _definition_bytes(definition), _STRUCT_PROPERTIES)

    # -- the wire ------------------------------------------------------------------------

    def to_pb(self) -> pb.Schema:
        """The protocol's ``Schema`` message (properties sorted by key)."""
        schema = pb.Schema(name=self.name, schema_data=self.data)
        schema.type = self.type.pb_value  # type: ignore[assignment]
        for key in sorted(self.properties):
            schema.properties.add(key=key, value=self.properties[key])
        return schema

    @classmethod
    def from_pb(cls, schema: pb.Schema) -> SchemaInfo:
        """The SchemaInfo of a protocol ``Schema`` message (a repeated property key
        keeps its last value, as a Java map would)."""
        properties = {kv.key: kv.value for kv in schema.properties}
        return cls(SchemaType.from_pb(schema.type), schema.name, schema.schema_data, properties)

    # -- text ----------------------------------------------------------------------------

    def describe(self) -> str:
        """The type for messages: ``AVRO``, ``KEY_VALUE<STRING, AVRO> (SEPARATED)``..."""
        if self.type is not SchemaType.KEY_VALUE:
            return self.type.name
        try:
            key, value, encoding = split_key_value(self)
        except InvalidSchema:
            return self.type.name
        return f"KEY_VALUE<{key.describe()}, {value.describe()}> ({encoding.value})"


def _definition_bytes(definition: str | Mapping[str, object]) -> bytes:
    if isinstance(definition, str):
        return definition.encode()
    return json.dumps(definition, separators=(",", ":"), ensure_ascii=False).encode()


# ---------------------------------------------------------------------------
# KEY_VALUE
# ---------------------------------------------------------------------------


class KeyValueEncoding(enum.Enum):
    """Where a KEY_VALUE message keeps its key: INLINE, in the payload beside the
    value; SEPARATED, in the message key (base64), the payload holding the value."""

    INLINE = "INLINE"
    SEPARATED = "SEPARATED"


class KeyValueSchemas(NamedTuple):
    """The halves of a KEY_VALUE schema and how its messages are laid out."""

    key: SchemaInfo
    value: SchemaInfo
    encoding: KeyValueEncoding


_KV_NAME = "KeyValue"
_KV_ENCODING = "kv.encoding.type"


def key_value_schema(
    key: SchemaInfo,
    value: SchemaInfo,
    encoding: KeyValueEncoding = KeyValueEncoding.INLINE,
    *,
    name: str = _KV_NAME,
    empty_length: int = 0,
) -> SchemaInfo:
    """The KEY_VALUE SchemaInfo of two halves, laid out as the Java client does.

    Args:
        empty_length: the length written for a half without data: 0 (Java) or
            -1 (the C++ client).

    Raises:
        InvalidSchema: ``empty_length`` other than 0 or -1.
    """
    if empty_length not in (0, -1):
        msg = f"empty_length must be 0 or -1, not {empty_length}"
        raise InvalidSchema(msg)
    data = bytearray()
    for half in (key, value):
        data += _INT32.pack(len(half.data) if half.data else empty_length)
        data += half.data
    properties = {**_half_properties("key", key), **_half_properties("value", value)}
    properties[_KV_ENCODING] = encoding.value
    return SchemaInfo(SchemaType.KEY_VALUE, name, bytes(data), properties)


def split_key_value(info: SchemaInfo) -> KeyValueSchemas:
    """The key and value SchemaInfo of a KEY_VALUE schema, and its encoding.

    A half's length of 0 or -1 means no data; a half without a ``*.schema.type``
    property is BYTES, and kv.encoding.type missing means INLINE (as in Java).
    Bytes after the value's data are ignored, as Java does.

    Raises:
        InvalidSchema: not KEY_VALUE, truncated data, a bad length, or properties
            that do not parse.
    """
    if info.type is not SchemaType.KEY_VALUE:
        msg = f"a {info.type.name} schema is not KEY_VALUE: it has no key and value halves"
        raise InvalidSchema(msg)
    data = info.data
    halves: list[bytes] = []
    offset = 0
    for half in ("key", "value"):
        if offset + 4 > len(data):
            msg = f"KEY_VALUE schema data ends before the {half} length ({len(data)} bytes)"
            raise InvalidSchema(msg)
        (length,) = _INT32.unpack_from(data, offset)
        offset += 4
        if length < -1 or offset + max(length, 0) > len(data):
            msg = (
                f"KEY_VALUE schema data: {half} length {length} at byte {offset - 4} "
                f"does not fit its {len(data)} bytes"
            )
            raise InvalidSchema(msg)
        halves.append(data[offset : offset + max(length, 0)])
        offset += max(length, 0)
    encoding_name = info.properties.get(_KV_ENCODING, KeyValueEncoding.INLINE.value)
    try:
        encoding = KeyValueEncoding(encoding_name.upper())
    except ValueError:
        msg = f"KEY_VALUE schema: {_KV_ENCODING} {encoding_name!r} is not INLINE or SEPARATED"
        raise InvalidSchema(msg) from None
    return KeyValueSchemas(
        _half_info("key", halves[0], info.properties),
        _half_info("value", halves[1], info.properties),
        encoding,
    )


def _half_properties(half: str, info: SchemaInfo) -> dict[str, str]:
    properties = json.dumps(
        dict(sorted(info.properties.items())), separators=(",", ":"), ensure_ascii=False
    )
    return {
        f"{half}.schema.name": info.name,
        f"{half}.schema.type": info.type.name,
        f"{half}.schema.properties": properties,
    }


def _half_info(half: str, data: bytes, properties: Mapping[str, str]) -> SchemaInfo:
    type_name = properties.get(f"{half}.schema.type", SchemaType.BYTES.name)
    try:
        kind = SchemaType[type_name]
    except KeyError:
        msg = f"KEY_VALUE schema: {half}.schema.type {type_name!r} is not a schema type"
        raise InvalidSchema(msg) from None
    text = properties.get(f"{half}.schema.properties", "")
    sub: dict[str, str] = {}
    if text:
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            msg = f"KEY_VALUE schema: {half}.schema.properties is not JSON: {exc}"
            raise InvalidSchema(msg) from None
        if not isinstance(parsed, dict):
            msg = f"KEY_VALUE schema: {half}.schema.properties is not a JSON object: {text!r}"
            raise InvalidSchema(msg)
        sub = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in parsed.items()}
    return SchemaInfo(kind, properties.get(f"{half}.schema.name", ""), data, sub)


# ---------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------


def version_to_bytes(version: int) -> bytes:
    """A schema version as the broker writes it: 8 bytes, big-endian int64.

    Raises:
        InvalidSchema: a number outside int64.
    """
    try:
        return _INT64.pack(version)
    except struct.error:
        msg = f"schema version {version} is not a 64-bit integer"
        raise InvalidSchema(msg) from None


def version_from_bytes(data: bytes) -> int | None:
    """The version in schema version bytes; None for empty bytes (no version).
    The broker reads the first 8 bytes; so does this.

    Raises:
        InvalidSchema: 1 to 7 bytes.
    """
    if not data:
        return None
    if len(data) < 8:
        msg = f"schema version bytes {bytes(data).hex()} are shorter than 8 bytes"
        raise InvalidSchema(msg)
    version: int = _INT64.unpack_from(data)[0]
    return version
