"""What changed between two schemas of a topic, in words, for errors about schema versions.

:func:`describe_change` compares a writer schema (a message's version) with a
reader schema (the query's): the types when they differ, else, for AVRO and
JSON records, the top-level fields added, removed (saying whether the reader
has a default for it) and retyped; for PROTOBUF_NATIVE messages the same by
field number. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

__all__ = ["describe_change"]


def _fields(info: SchemaInfo) -> dict[str, Mapping[str, object]] | None:
    """The top-level fields of a record schema by name, or None."""
    if info.type not in (SchemaType.AVRO, SchemaType.JSON):
        return None
    try:
        parsed = json.loads(info.data)
    except ValueError:
        return None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        return None
    fields = parsed.get("fields")
    if not isinstance(fields, list):
        return None
    return {str(f.get("name")): f for f in fields if isinstance(f, dict)}


def _type_text(node: object) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "[" + ", ".join(_type_text(n) for n in node) + "]"
    if isinstance(node, dict):
        if "logicalType" in node:
            return f"{node.get('type')}/{node['logicalType']}"
        if node.get("type") in ("record", "enum", "fixed"):
            return f"{node.get('type')} {node.get('name')}"
        if node.get("type") == "array":
            return f"array<{_type_text(node.get('items'))}>"
        if node.get("type") == "map":
            return f"map<{_type_text(node.get('values'))}>"
        return _type_text(node.get("type"))
    return repr(node)


def describe_change(writer: SchemaInfo, reader: SchemaInfo) -> str:
    """How ``writer`` differs from ``reader``: ``type JSON -> AVRO``, or ``field qty
    (int) added; field note removed, no default in the query's schema; field id: long
    -> string``; ``no field changed at the top level`` when only nested ones did."""
    if writer.type is not reader.type:
        written, read = writer.describe(), reader.describe()
        return f"the schema type is {written} in the messages, {read} in the query"
    if reader.type is SchemaType.PROTOBUF_NATIVE:
        return _proto_change(writer, reader)
    ours, theirs = _fields(reader), _fields(writer)
    if ours is None or theirs is None:
        return f"a {writer.describe()} schema with other data"
    changes = []
    for name, field in theirs.items():
        if name not in ours:
            changes.append(f"field {name} ({_type_text(field.get('type'))}) added")
    for name, field in ours.items():
        if name not in theirs:
            has_default = "default" in field
            note = (
                "the query's schema has a default"
                if has_default
                else "no default in the query's schema"
            )
            changes.append(f"field {name} removed, {note}")
        elif _type_text(field.get("type")) != _type_text(theirs[name].get("type")):
            was, now = _type_text(field.get("type")), _type_text(theirs[name].get("type"))
            changes.append(f"field {name}: {was} in the query's schema, {now} in the messages")
    return (
        "; ".join(changes) if changes else "no field changed at the top level (a nested type did)"
    )


def _proto_change(writer: SchemaInfo, reader: SchemaInfo) -> str:
    """The top-level fields of two protobuf messages compared by number."""
    from pulsar_spark.columnar import SchemaError
    from pulsar_spark.columnar.values.proto.schema import ProtoField, parse_native

    try:
        ours, theirs = parse_native(reader.data), parse_native(writer.data)
    except SchemaError:
        return f"a {writer.describe()} schema with other data"

    def text(f: ProtoField) -> str:
        kind = f.message.name if f.message is not None and f.kind == "message" else f.kind
        return ("repeated " if f.repeated and f.kind != "map" else "") + kind

    mine = {f.number: f for f in ours.fields}
    other = {f.number: f for f in theirs.fields}
    changes = []
    if ours.name != theirs.name:
        changes.append(f"message {theirs.name} in the messages, {ours.name} in the query")
    for number, f in other.items():
        if number not in mine:
            changes.append(f"field {f.name} = {number} ({text(f)}) added")
    for number, f in mine.items():
        if number not in other:
            changes.append(f"field {f.name} = {number} removed (read as its default)")
        elif text(f) != text(other[number]):
            changes.append(
                f"field {f.name} = {number}: {text(f)} in the query's schema, "
                f"{text(other[number])} in the messages"
            )
    return (
        "; ".join(changes) if changes else "no field changed at the top level (a nested type did)"
    )
