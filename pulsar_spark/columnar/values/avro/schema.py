"""Avro schemas parsed into a tree of types: named types resolved, logical types checked.

:func:`parse_avro` reads a schema (JSON text or parsed JSON) as the Avro
specification defines it: names and namespaces (a reference to a named type
becomes the same :class:`Record`, :class:`Enum` or :class:`Fixed` object, so a
recursive record refers to itself), field defaults and aliases, and logical
types. A logical type that does not fit its underlying type (``date`` on a
string, a decimal whose precision exceeds its fixed size...) is ignored, as the
specification asks: the value reads as the underlying type.

Every node has a ``kind``: a primitive name (``null``, ``boolean``, ``int``,
``long``, ``float``, ``double``, ``bytes``, ``string``) or ``record``, ``enum``,
``fixed``, ``array``, ``map``, ``union``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeAlias

from ..errors import UnmappableSchema

__all__ = [
    "NO_DEFAULT",
    "PRIMITIVES",
    "Array",
    "AvroType",
    "Enum",
    "Field",
    "Fixed",
    "Map",
    "Primitive",
    "Record",
    "Union",
    "non_null",
    "parse_avro",
]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
#: The logical types of each underlying kind (decimal is checked further).
_LOGICAL = {
    "int": {"date", "time-millis"},
    "long": {
        "time-micros",
        "timestamp-millis",
        "timestamp-micros",
        "timestamp-nanos",
        "local-timestamp-millis",
        "local-timestamp-micros",
        "local-timestamp-nanos",
    },
    "string": {"uuid"},
    "bytes": {"decimal"},
}


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


#: The default of a field that has none.
NO_DEFAULT = _NoDefault()


@dataclass(eq=False)
class Primitive:
    kind: str
    logical: str | None = None
    precision: int = 0
    scale: int = 0


@dataclass(eq=False)
class Fixed:
    name: str
    size: int
    logical: str | None = None
    precision: int = 0
    scale: int = 0
    aliases: tuple[str, ...] = ()
    kind: str = "fixed"


@dataclass(eq=False)
class Enum:
    name: str
    symbols: tuple[str, ...]
    default: str | None = None
    aliases: tuple[str, ...] = ()
    kind: str = "enum"
    logical: None = None


@dataclass(eq=False)
class Array:
    items: AvroType
    kind: str = "array"
    logical: None = None


@dataclass(eq=False)
class Map:
    values: AvroType
    kind: str = "map"
    logical: None = None


@dataclass(eq=False)
class Union:
    branches: tuple[AvroType, ...]
    kind: str = "union"
    logical: None = None


@dataclass(eq=False)
class Field:
    name: str
    type: AvroType
    default: object = NO_DEFAULT
    aliases: tuple[str, ...] = ()


@dataclass(eq=False)
class Record:
    name: str
    fields: list[Field] = field(default_factory=list)
    aliases: tuple[str, ...] = ()
    kind: str = "record"
    logical: None = None


AvroType: TypeAlias = Primitive | Fixed | Enum | Array | Map | Union | Record


def non_null(node: AvroType) -> tuple[AvroType | None, bool]:
    """``(T, nullable)`` for a union of null and one type T (either order) or a one-branch
    union; ``(node, False)`` for any other type; ``(None, True)`` for ``["null"]``.
    A union of several non-null types stays as it is (``(node, has null)``)."""
    if not isinstance(node, Union):
        return node, False
    others = [b for b in node.branches if b.kind != "null"]
    nullable = len(others) < len(node.branches)
    if not others:
        return None, True
    if len(others) == 1:
        return others[0], nullable
    return node, nullable


def parse_avro(schema: str | bytes | object, *, topic: str = "") -> AvroType:
    """The type tree of an Avro schema.

    Args:
        schema: the schema as JSON text (str or UTF-8 bytes) or as parsed JSON.
        topic: named in errors.

    Raises:
        UnmappableSchema: text that is not JSON, or JSON that is not an Avro schema
            (unknown type name, a field without a name, a duplicate name...).
    """
    if isinstance(schema, bytes | bytearray | memoryview):
        try:
            schema = bytes(schema).decode()
        except UnicodeDecodeError:
            msg = "the Avro schema is not UTF-8 text"
            raise UnmappableSchema(msg, topic=topic) from None
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            msg = f"the Avro schema is not JSON: {exc}"
            raise UnmappableSchema(msg, topic=topic) from None
    return _Parser(topic).parse(schema, "", "")


class _Parser:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.named: dict[str, AvroType] = {}

    def fail(self, path: str, reason: str) -> UnmappableSchema:
        return UnmappableSchema(reason, topic=self.topic, field=path)

    def parse(self, node: object, namespace: str, path: str) -> AvroType:
        if isinstance(node, str):
            return self.reference(node, namespace, path)
        if isinstance(node, list):
            branches = tuple(self.parse(b, namespace, path) for b in node)
            return Union(branches)
        if not isinstance(node, Mapping):
            msg = f"{json.dumps(node)} is not an Avro schema"
            raise self.fail(path, msg)
        kind = node.get("type")
        if isinstance(kind, list | Mapping):  # {"type": {...}} wraps a schema
            return self.parse(kind, namespace, path)
        if not isinstance(kind, str):
            msg = f"a schema object without a type: {json.dumps(node)}"
            raise self.fail(path, msg)
        if kind in PRIMITIVES:
            return self.primitive(kind, node)
        if kind == "array":
            return Array(self.parse(self.require(node, "items", path), namespace, path + "[]"))
        if kind == "map":
            return Map(self.parse(self.require(node, "values", path), namespace, path + "{}"))
        if kind in ("record", "error", "enum", "fixed"):
            return self.named_type(kind, node, namespace, path)
        return self.reference(kind, namespace, path)

    def require(self, node: Mapping[str, object], key: str, path: str) -> object:
        if key not in node:
            msg = f"a {node.get('type')} schema without {key!r}"
            raise self.fail(path, msg)
        return node[key]

    def reference(self, name: str, namespace: str, path: str) -> AvroType:
        if name in PRIMITIVES:
            return Primitive(name)
        for full in (_full_name(name, namespace), name):
            if full in self.named:
                return self.named[full]
        msg = f"unknown type {name!r}"
        raise self.fail(path, msg)

    def primitive(self, kind: str, node: Mapping[str, object]) -> Primitive:
        logical = node.get("logicalType")
        if not isinstance(logical, str) or logical not in _LOGICAL.get(kind, ()):
            return Primitive(kind)
        if logical == "decimal":
            precision, scale = _decimal(node, None)
            if precision == 0:
                return Primitive(kind)
            return Primitive(kind, logical, precision, scale)
        return Primitive(kind, logical)

    def named_type(
        self, kind: str, node: Mapping[str, object], namespace: str, path: str
    ) -> AvroType:
        name = node.get("name")
        if not isinstance(name, str) or not name:
            msg = f"a {kind} without a name"
            raise self.fail(path, msg)
        space = node.get("namespace")
        full = _full_name(name, space if isinstance(space, str) else namespace)
        if full in self.named or name in PRIMITIVES:
            msg = f"the name {full!r} is defined twice"
            raise self.fail(path, msg)
        inner_space = full.rpartition(".")[0]
        aliases = tuple(_full_name(a, inner_space) for a in _strings(node.get("aliases")))
        result: AvroType
        if kind == "fixed":
            size = node.get("size")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                msg = f"fixed {full!r} has no valid size"
                raise self.fail(path, msg)
            result = _fixed(full, size, node, aliases)
        elif kind == "enum":
            symbols = self.require(node, "symbols", path)
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                msg = f"enum {full!r}: symbols must be a list of strings"
                raise self.fail(path, msg)
            if len(set(symbols)) != len(symbols):
                msg = f"enum {full!r} repeats a symbol"
                raise self.fail(path, msg)
            default = node.get("default")
            result = Enum(
                full, tuple(symbols), default if isinstance(default, str) else None, aliases
            )
        else:
            record = Record(full, aliases=aliases)
            self.named[full] = record  # before its fields: they may refer to it
            record.fields = self.fields(node, inner_space, path, full)
            return record
        self.named[full] = result
        return result

    def fields(
        self, node: Mapping[str, object], namespace: str, path: str, name: str
    ) -> list[Field]:
        raw = self.require(node, "fields", path)
        if not isinstance(raw, list):
            msg = f"record {name!r}: fields must be a list"
            raise self.fail(path, msg)
        fields: list[Field] = []
        seen: set[str] = set()
        for entry in raw:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
                msg = f"record {name!r}: a field without a name"
                raise self.fail(path, msg)
            fname = str(entry["name"])
            fpath = f"{path}.{fname}" if path else fname
            if fname in seen:
                msg = f"record {name!r} has two fields named {fname!r}"
                raise self.fail(fpath, msg)
            seen.add(fname)
            ftype = self.parse(self.require(entry, "type", fpath), namespace, fpath)
            default = entry.get("default", NO_DEFAULT)
            fields.append(Field(fname, ftype, default, _strings(entry.get("aliases"))))
        return fields


def _full_name(name: str, namespace: str) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, list):
        return tuple(v for v in value if isinstance(v, str))
    return ()


def _decimal(node: Mapping[str, object], size: int | None) -> tuple[int, int]:
    """(precision, scale) of a valid decimal; (0, 0) when it is not one."""
    precision, scale = node.get("precision"), node.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int):
        return 0, 0
    if precision <= 0 or scale < 0 or scale > precision:
        return 0, 0
    if size is not None and precision > math.floor(math.log10(2.0 ** (8 * size - 1) - 1)):
        return 0, 0
    return precision, scale


def _fixed(name: str, size: int, node: Mapping[str, object], aliases: tuple[str, ...]) -> Fixed:
    logical = node.get("logicalType")
    if logical == "decimal" and size > 0:
        precision, scale = _decimal(node, size)
        if precision:
            return Fixed(name, size, "decimal", precision, scale, aliases)
    if (logical == "duration" and size == 12) or (logical == "uuid" and size == 16):
        return Fixed(name, size, str(logical), aliases=aliases)
    return Fixed(name, size, aliases=aliases)
