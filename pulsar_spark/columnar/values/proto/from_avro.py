"""PROTOBUF (non-native) schemas as protobuf message descriptions: the field numbers and
types of ``__PARSING_INFO__``.

The Java client's ``Schema.PROTOBUF(cls)`` stores an Avro schema made by
avro-protobuf (which has no field numbers) and, in the property
``__PARSING_INFO__``, a JSON list of the message's top-level fields::

    [{"number": 1, "name": "id", "type": "INT64", "label": "LABEL_OPTIONAL",
      "definition": null}, ...]

That is enough for scalar, string and bytes fields, repeated or not. Nested
messages and enums are not described (their field numbers, enum numbers are
not in the schema): such a field, or a schema without the property, raises
:class:`UnmappableSchema` saying to read with PROTOBUF_NATIVE or raw bytes.
"""

from __future__ import annotations

import json

from pulsar_spark.protocol.schemas.info import SchemaInfo

from ..errors import UnmappableSchema
from .schema import SCALAR_TYPES, ProtoField, ProtoMessage

__all__ = ["PARSING_INFO", "parse_parsing_info"]

#: The property holding the field numbers.
PARSING_INFO = "__PARSING_INFO__"
_DEFAULTS: dict[str, object] = {"bool": False, "string": "", "bytes": b"", "float": 0.0}
_DEFAULTS["double"] = 0.0


def parse_parsing_info(info: SchemaInfo, *, topic: str = "") -> ProtoMessage:
    """The top-level message of a PROTOBUF schema (see the module docstring).

    Raises:
        UnmappableSchema: no ``__PARSING_INFO__``, or a field it cannot describe.
    """
    text = info.properties.get(PARSING_INFO)
    if not text:
        msg = (
            f"this PROTOBUF schema has no {PARSING_INFO} property (the field numbers the "
            "Java client writes), so its values cannot be decoded; read the topic with "
            "schemaMode=raw"
        )
        raise UnmappableSchema(msg, topic=topic)
    try:
        entries = json.loads(text)
        if not isinstance(entries, list):
            msg = "not a list"
            raise TypeError(msg)
        fields = tuple(_field(e, topic) for e in entries)
    except UnmappableSchema:
        raise
    except (ValueError, TypeError, KeyError) as exc:
        msg = f"the {PARSING_INFO} property is not a list of fields: {exc}"
        raise UnmappableSchema(msg, topic=topic) from None
    name = "record"
    try:
        parsed = json.loads(info.data)
        if isinstance(parsed, dict):
            name = ".".join(str(p) for p in (parsed.get("namespace"), parsed["name"]) if p)
    except (ValueError, KeyError):
        pass
    return ProtoMessage(name, fields)


def _field(entry: dict[str, object], topic: str) -> ProtoField:
    name = str(entry["name"])
    number = entry["number"]
    if not isinstance(number, int) or number < 1:
        msg = f"field {name} has no field number"
        raise TypeError(msg)
    kind = str(entry["type"]).lower()
    if kind not in SCALAR_TYPES or kind == "enum":
        msg = (
            f"a {entry['type']} field of a PROTOBUF schema has no field numbers in the "
            "schema (only the top level has); read with a PROTOBUF_NATIVE schema, or "
            "schemaMode=raw"
        )
        raise UnmappableSchema(msg, topic=topic, field=name)
    repeated = entry.get("label") == "LABEL_REPEATED"
    default = None if repeated else _DEFAULTS.get(kind, 0)
    return ProtoField(name, number, kind, repeated=repeated, default=default)
