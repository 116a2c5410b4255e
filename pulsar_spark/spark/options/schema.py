"""Parsers of the schema options: ``schemaMode``, ``avroSchema``, ``jsonSchema``,
``protobufSchema``, ``decodeErrorMode``, ``valueSchemaType`` and ``keyValueEncoding``.

Each takes ``(option name, text)`` like the parsers of :mod:`.values`
and raises :class:`PulsarOptionError` naming the option. A user-given schema
is checked here, once, when Spark creates the source: it must parse and map
to Spark types. Nothing here imports pyspark.
"""

from __future__ import annotations

import json

from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo

from ..errors import PulsarOptionError

__all__ = [
    "DEAD_LETTER",
    "RAW",
    "avro_schema",
    "decode_error_mode",
    "json_schema",
    "key_value_encoding",
    "protobuf_schema",
    "schema_mode",
    "value_schema_type",
]

#: ``schemaMode`` values.
AUTO, RAW = "auto", "raw"
#: ``decodeErrorMode`` values.
FAIL, DEAD_LETTER = "fail", "deadLetter"


def _choice(name: str, value: str, choices: dict[str, str]) -> str:
    found = choices.get(value.strip().lower())
    if found is None:
        names = ", ".join(dict.fromkeys(choices.values()))
        raise PulsarOptionError(name, f"expected one of {names}, got {value!r}")
    return found


def schema_mode(name: str, value: str) -> str:
    """``auto`` (typed reads and writes) or ``raw`` (bytes, no schema)."""
    return _choice(name, value, {"auto": AUTO, "raw": RAW})


def decode_error_mode(name: str, value: str) -> str:
    """``fail`` or ``deadLetter`` (Spark's ``FAILFAST`` and ``PERMISSIVE`` too)."""
    choices = {"fail": FAIL, "failfast": FAIL, "deadletter": DEAD_LETTER, "permissive": DEAD_LETTER}
    return _choice(name, value, choices)


def value_schema_type(name: str, value: str) -> str:
    """The schema type struct values are written with: ``AVRO`` or ``JSON``."""
    return _choice(name, value, {"avro": "AVRO", "json": "JSON"})


def key_value_encoding(name: str, value: str) -> KeyValueEncoding:
    """``inline`` or ``separated``: write a KEY_VALUE schema laid out so."""
    found = _choice(name, value, {"inline": "INLINE", "separated": "SEPARATED"})
    return KeyValueEncoding(found)


def _checked(name: str, info: SchemaInfo) -> SchemaInfo:
    """``info`` once its values are known to map to Arrow (and so to Spark) types."""
    from pulsar_spark.columnar import SchemaError, arrow_type

    try:
        arrow_type(info)
    except SchemaError as exc:
        raise PulsarOptionError(name, str(exc)) from None
    return info


def _avro_json(name: str, value: str) -> object:
    text = value.strip()
    if not text:
        raise PulsarOptionError(name, "is empty")
    try:
        return json.loads(text)
    except ValueError as exc:
        msg = f'is not JSON (an Avro schema, e.g. {{"type": "record", ...}}): {exc}'
        raise PulsarOptionError(name, msg) from None


def avro_schema(name: str, value: str) -> SchemaInfo:
    """An Avro schema given as JSON: the AVRO SchemaInfo of values."""
    definition = _avro_json(name, value)
    return _checked(name, SchemaInfo.avro(json.dumps(definition, separators=(",", ":"))))


def json_schema(name: str, value: str) -> SchemaInfo:
    """JSON values described by a Spark DDL string or by an Avro schema (JSON, as in
    Pulsar's JSON schemas): the JSON SchemaInfo of values (a DDL becomes the Avro
    schema that Pulsar would hold for it)."""
    text = value.strip()
    if text[:1] in ("{", "[", '"'):
        definition = _avro_json(name, text)
        return _checked(name, SchemaInfo.json(json.dumps(definition, separators=(",", ":"))))
    from pulsar_spark.columnar import SchemaError, avro_schema_for

    from ..ddl import DdlError, parse_ddl

    try:
        dtype = parse_ddl(text)
        definition = avro_schema_for(dtype)
    except (DdlError, SchemaError) as exc:
        raise PulsarOptionError(name, str(exc)) from None
    return _checked(name, SchemaInfo.json(json.dumps(definition, separators=(",", ":"))))


def protobuf_schema(name: str, value: str) -> SchemaInfo:
    """A protobuf message for values: the PROTOBUF_NATIVE schema data as the registry
    holds it, JSON ``{"fileDescriptorSet": "<base64 FileDescriptorSet>",
    "rootMessageTypeName": "pkg.Msg"}`` (``rootFileDescriptorName`` may be left out),
    or the short form ``pkg.Msg:<base64 FileDescriptorSet>`` (e.g. of ``protoc
    --include_imports --descriptor_set_out``)."""
    text = value.strip()
    if not text:
        raise PulsarOptionError(name, "is empty")
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            raise PulsarOptionError(name, f"is not JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise PulsarOptionError(name, "is not a JSON object")
    else:
        root, sep, encoded = text.partition(":")
        if not sep or not root or not encoded:
            msg = (
                'expected {"fileDescriptorSet": ..., "rootMessageTypeName": ...} or '
                "pkg.Msg:<base64 FileDescriptorSet>"
            )
            raise PulsarOptionError(name, msg)
        parsed = {"fileDescriptorSet": encoded.strip(), "rootMessageTypeName": root.strip()}
    for key in ("fileDescriptorSet", "rootMessageTypeName"):
        if not isinstance(parsed.get(key), str):
            raise PulsarOptionError(name, f"has no {key} (a string)")
    parsed.setdefault("rootFileDescriptorName", "")
    from pulsar_spark.protocol.schemas.types import SchemaType

    data = json.dumps(parsed, separators=(",", ":")).encode()
    return _checked(name, SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", data))
