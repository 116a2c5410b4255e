"""Schema types: :class:`SchemaType` numbered as the Java client numbers them, their wire
numbers and families, and :class:`InvalidSchema`.

The proto's ``Schema.Type`` numbers are Java's ``SchemaType`` values 0..20
(and 22); Java's negative client-side types go on the wire as the Java client
sends them (``Commands#getSchemaType``)::

    BYTES (-1), AUTO (-2), AUTO_PUBLISH (-4)   -> proto None (0)
    AUTO_CONSUME (-3)                          -> proto AutoConsume (21)
"""

from __future__ import annotations

import enum

from ..errors import InvalidArgument

__all__ = ["JAVA_NAMES", "InvalidSchema", "SchemaType"]


class InvalidSchema(InvalidArgument):
    """A schema that cannot be used as it is: malformed KEY_VALUE data or properties,
    an unknown type, bad version bytes (not retriable; also a ValueError)."""


class SchemaType(enum.IntEnum):
    """A schema type, numbered as Java's ``SchemaType`` (see the module for the wire)."""

    NONE = 0
    STRING = 1
    JSON = 2
    PROTOBUF = 3
    AVRO = 4
    BOOLEAN = 5
    INT8 = 6
    INT16 = 7
    INT32 = 8
    INT64 = 9
    FLOAT = 10
    DOUBLE = 11
    DATE = 12
    TIME = 13
    TIMESTAMP = 14
    KEY_VALUE = 15
    INSTANT = 16
    LOCAL_DATE = 17
    LOCAL_TIME = 18
    LOCAL_DATE_TIME = 19
    PROTOBUF_NATIVE = 20
    EXTERNAL = 22
    BYTES = -1
    AUTO = -2
    AUTO_CONSUME = -3
    AUTO_PUBLISH = -4

    @property
    def pb_value(self) -> int:
        """The proto ``Schema.Type`` number this type is sent as."""
        if self is SchemaType.AUTO_CONSUME:
            return _PB_AUTO_CONSUME
        return max(int(self), 0)

    @classmethod
    def from_pb(cls, value: int) -> SchemaType:
        """The type of a proto ``Schema.Type`` number (None reads as NONE).

        Raises:
            InvalidSchema: a number the proto does not define.
        """
        if value == _PB_AUTO_CONSUME:
            return cls.AUTO_CONSUME
        try:
            if value >= 0:
                return cls(value)
        except ValueError:
            pass
        msg = f"unknown schema type number {value}"
        raise InvalidSchema(msg)

    @classmethod
    def parse(cls, name: str) -> SchemaType:
        """The type named ``name`` as Java spells it (``"AVRO"``, ``"KEY_VALUE"``...).

        Raises:
            InvalidSchema: a name that is not a schema type.
        """
        try:
            return cls[name.strip().upper()]
        except KeyError:
            msg = f"unknown schema type {name!r}; expected one of {', '.join(cls.__members__)}"
            raise InvalidSchema(msg) from None

    @property
    def is_primitive(self) -> bool:
        """A type whose values need no schema data (Java's ``isPrimitiveType``)."""
        return self in _PRIMITIVES

    @property
    def is_struct(self) -> bool:
        """AVRO, JSON, PROTOBUF or PROTOBUF_NATIVE: records described by the data."""
        return self in _STRUCTS

    @property
    def is_bytes(self) -> bool:
        """NONE or BYTES: raw bytes, a topic without a schema."""
        return self in (SchemaType.NONE, SchemaType.BYTES)


_PB_AUTO_CONSUME = 21
_STRUCTS = frozenset(
    {SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF, SchemaType.PROTOBUF_NATIVE}
)
#: The name the Java client gives each primitive type's SchemaInfo.
JAVA_NAMES: dict[SchemaType, str] = {
    SchemaType.NONE: "Bytes",
    SchemaType.BYTES: "Bytes",
    SchemaType.STRING: "String",
    SchemaType.BOOLEAN: "Boolean",
    SchemaType.INT8: "INT8",
    SchemaType.INT16: "INT16",
    SchemaType.INT32: "INT32",
    SchemaType.INT64: "INT64",
    SchemaType.FLOAT: "Float",
    SchemaType.DOUBLE: "Double",
    SchemaType.DATE: "Date",
    SchemaType.TIME: "Time",
    SchemaType.TIMESTAMP: "Timestamp",
    SchemaType.INSTANT: "Instant",
    SchemaType.LOCAL_DATE: "LocalDate",
    SchemaType.LOCAL_TIME: "LocalTime",
    SchemaType.LOCAL_DATE_TIME: "LocalDateTime",
}
_PRIMITIVES = frozenset(JAVA_NAMES)
