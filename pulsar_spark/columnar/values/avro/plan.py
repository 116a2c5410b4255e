"""Avro schemas compiled into decoding plans: the writer's encoding read as the reader's
Arrow type, by Avro's resolution rules.

:func:`compile_plan` walks the writer and reader schemas together once and
builds a tree of nodes (:mod:`.nodes`, :mod:`.blocks`). Resolution
(the Avro specification's "Schema Resolution") is part of the plan:

* record fields match by name (or a reader field's alias); writer fields the
  reader lacks are skipped; reader fields the writer lacks take their default;
* numbers promote int -> long -> float -> double, and string <-> bytes;
* enum symbols map by name; a symbol the reader lacks takes the reader's
  default symbol, or fails the value that has it;
* a writer union reads each branch as the reader's type; a branch the reader
  cannot take (or a null for a field that cannot be null) fails the values
  that use it, not the plan; a reader union with null takes a non-union writer.

Anything else (a long read as a string, a reader field without a default the
writer lacks) raises :class:`SchemaResolutionError` when the plan is made.
Names of records, enums and fixed types are not compared.
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import SchemaResolutionError, UnmappableSchema
from .arrow_types import EnumMode, avro_arrow_type
from .blocks import BlockNode
from .defaults import default_array
from .nodes import (
    BoolNode,
    BytesNode,
    ConstNode,
    EnumNode,
    FixedNode,
    IntNode,
    Node,
    NullNode,
    NumberNode,
    RecordNode,
    UnionNode,
)
from .schema import AvroType, Enum, Field, Fixed, Record, Union, non_null

__all__ = ["compile_plan"]

#: Writer kind -> the reader kinds it may be read as.
_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "double": {"double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
    "boolean": {"boolean"},
    "null": {"null"},
}
_SKIPPED = pa.null()  # the type of nodes that only skip


def compile_plan(
    writer: AvroType, reader: AvroType, *, topic: str = "", enums: EnumMode = "string"
) -> Node:
    """The plan that reads data written with ``writer`` as ``reader``'s Arrow type.

    Raises:
        UnmappableSchema: the reader has no Arrow type, or the writer is recursive.
        SchemaResolutionError: the writer's data cannot be read as the reader.
    """
    _check_not_recursive(writer, (), topic, "")
    return _Compiler(topic, enums).node(writer, reader, "")


def _check_not_recursive(node: AvroType, records: tuple[int, ...], topic: str, path: str) -> None:
    if isinstance(node, Record):
        if id(node) in records:
            msg = f"record {node.name} contains itself: recursive schemas are not supported"
            raise UnmappableSchema(msg, topic=topic, field=path or "<value>")
        for f in node.fields:
            _check_not_recursive(f.type, (*records, id(node)), topic, _join(path, f.name))
    elif isinstance(node, Union):
        for branch in node.branches:
            _check_not_recursive(branch, records, topic, path)
    elif node.kind == "array":
        _check_not_recursive(node.items, records, topic, path + "[]")  # type: ignore[union-attr]
    elif node.kind == "map":
        _check_not_recursive(node.values, records, topic, path + "{}")  # type: ignore[union-attr]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Compiler:
    def __init__(self, topic: str, enums: EnumMode) -> None:
        self.topic = topic
        self.enums = enums

    def out(self, reader: AvroType, path: str) -> pa.DataType:
        return avro_arrow_type(reader, topic=self.topic, path=path, enums=self.enums)

    def fail(self, path: str, reason: str) -> SchemaResolutionError:
        return SchemaResolutionError(reason, topic=self.topic, field=path or "<value>")

    def node(self, writer: AvroType, reader: AvroType, path: str) -> Node:
        if isinstance(writer, Union):
            return self.union(writer, reader, path)
        target, _ = non_null(reader)
        if target is None:
            if writer.kind == "null":
                return NullNode(path, pa.null())
            msg = f"the writer's {writer.kind} cannot be read as null"
            raise self.fail(path, msg)
        if writer.kind == "null":  # into a union with null: always null
            return ConstNode(path, self.out(reader, path), pa.nulls(1, self.out(reader, path)))
        return self.direct(writer, target, path)

    def union(self, writer: Union, reader: AvroType, path: str) -> UnionNode:
        out = self.out(reader, path)
        target, nullable = non_null(reader)
        branches: list[Node | str | None] = []
        for branch in writer.branches:
            if branch.kind == "null":
                ok = nullable or target is None
                branches.append(None if ok else "a null value for a field that cannot be null")
            elif target is None:
                branches.append(f"a {branch.kind} value where the reader expects null")
            else:
                try:
                    branches.append(self.direct(branch, target, path))
                except SchemaResolutionError as exc:
                    branches.append(exc.reason)
        return UnionNode(path, out, branches)

    def direct(self, writer: AvroType, reader: AvroType, path: str) -> Node:
        """Neither is a union; the reader is not null."""
        wk, rk = writer.kind, reader.kind
        out = self.out(reader, path)
        if wk in _PROMOTIONS:
            if rk not in _PROMOTIONS[wk]:
                msg = f"the writer's {wk} cannot be read as {rk}"
                raise self.fail(path, msg)
            if wk in ("int", "long"):
                return IntNode(path, out, is_int=wk == "int")
            if wk in ("float", "double"):
                return NumberNode(path, out, size=4 if wk == "float" else 8)
            if wk == "boolean":
                return BoolNode(path, out)
            return BytesNode(path, out)
        if wk != rk:
            msg = f"the writer's {wk} cannot be read as {rk}"
            raise self.fail(path, msg)
        if isinstance(writer, Fixed) and isinstance(reader, Fixed):
            if writer.size != reader.size:
                msg = f"a fixed of {writer.size} bytes cannot be read as one of {reader.size}"
                raise self.fail(path, msg)
            return FixedNode(path, out, size=writer.size)
        if isinstance(writer, Enum) and isinstance(reader, Enum):
            return self.enum(writer, reader, out, path)
        if isinstance(writer, Record) and isinstance(reader, Record):
            return self.record(writer, reader, out, path)
        if wk == "array":
            item = self.node(writer.items, reader.items, path + "[]")  # type: ignore[union-attr]
            return BlockNode(path, out, item)
        value = self.node(writer.values, reader.values, path + "{}")  # type: ignore[union-attr]
        return BlockNode(path, out, value, key=BytesNode(path + "{}", pa.string()))

    def enum(self, writer: Enum, reader: Enum, out: pa.DataType, path: str) -> EnumNode:
        index = {s: i for i, s in enumerate(reader.symbols)}
        fallback = index.get(reader.default, -1) if reader.default is not None else -1
        to_reader = [index.get(s, fallback) for s in writer.symbols]
        return EnumNode(path, out, to_reader=to_reader, symbols=reader.symbols)

    def record(self, writer: Record, reader: Record, out: pa.DataType, path: str) -> RecordNode:
        fields: list[Node] = []
        keep: list[bool] = []
        source: dict[int, int] = {}  # reader field -> writer field
        for i, wf in enumerate(writer.fields):
            j = _matching(wf, reader.fields)
            fpath = _join(path, wf.name)
            if j is None or j in source:
                fields.append(self.skipper(wf.type, fpath))
                keep.append(False)
            else:
                source[j] = i
                fields.append(
                    self.node(wf.type, reader.fields[j].type, _join(path, reader.fields[j].name))
                )
                keep.append(True)
        order: list[int | ConstNode] = []
        for j, rf in enumerate(reader.fields):
            if j in source:
                order.append(source[j])
                continue
            fpath = _join(path, rf.name)
            dtype = out.field(rf.name).type
            value = default_array(rf, dtype, topic=self.topic, path=fpath)
            order.append(ConstNode(fpath, dtype, value))
        return RecordNode(path, out, fields, keep, order)

    def skipper(self, writer: AvroType, path: str) -> Node:
        """A node that moves past the writer's values without building anything."""
        kind = writer.kind
        if kind == "null":
            return NullNode(path, _SKIPPED)
        if kind in ("int", "long"):
            return IntNode(path, _SKIPPED, is_int=False)
        if kind in ("float", "double"):
            return NumberNode(path, _SKIPPED, size=4 if kind == "float" else 8)
        if kind == "boolean":
            return BoolNode(path, _SKIPPED)
        if kind in ("bytes", "string"):
            return BytesNode(path, _SKIPPED)
        if isinstance(writer, Fixed):
            return FixedNode(path, _SKIPPED, size=writer.size)
        if isinstance(writer, Enum):
            return EnumNode(path, _SKIPPED, to_reader=[], symbols=[])
        if isinstance(writer, Union):
            return UnionNode(path, _SKIPPED, [self.skipper(b, path) for b in writer.branches])
        if isinstance(writer, Record):
            nodes = [self.skipper(f.type, _join(path, f.name)) for f in writer.fields]
            return RecordNode(path, _SKIPPED, nodes, [False] * len(nodes), [])
        if kind == "array":
            return BlockNode(path, _SKIPPED, self.skipper(writer.items, path + "[]"))  # type: ignore[union-attr]
        value = self.skipper(writer.values, path + "{}")  # type: ignore[union-attr]
        return BlockNode(path, _SKIPPED, value, key=BytesNode(path + "{}", _SKIPPED))


def _matching(writer_field: Field, reader_fields: list[Field]) -> int | None:
    for j, rf in enumerate(reader_fields):
        if rf.name == writer_field.name:
            return j
    for j, rf in enumerate(reader_fields):
        if writer_field.name in rf.aliases:
            return j
    return None
