"""The write side's entry points: the schema a sink registers for a DataFrame's columns, and
encoders of values (and KEY_VALUE keys and values) into payloads for a schema.

::

    info = writer_schema(value_type)                       # AVRO / JSON / primitive / BYTES
    enc = PayloadEncoder(value_type, topic_info)           # SchemaMismatch now, if unfit
                                                           # (PROTOBUF_NATIVE too: encode_proto)
    payloads = enc.encode(batch.column("value"))           # binary, null -> null_value

    kv = key_value_writer_schema(key_type, value_type, KeyValueEncoding.SEPARATED)
    pairs = KeyValueEncoder(key_type, value_type, kv).encode(keys, values)
    pairs.payloads, pairs.keys                             # keys: None for INLINE

Every check happens when the encoder is built (names, types; before anything
is sent) or when a batch is encoded (values the schema cannot hold), and
raises :class:`~.encode_errors.SchemaMismatch` naming the fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, NamedTuple

import pyarrow as pa

from pulsar_spark.protocol.schemas.info import (
    KeyValueEncoding,
    SchemaInfo,
    key_value_schema,
    split_key_value,
)
from pulsar_spark.protocol.schemas.types import SchemaType

from .encode_errors import SchemaMismatch

if TYPE_CHECKING:  # each schema type's encoder loads with the first encoder of that type
    from .avro.encode import AvroEncoder, Values
    from .json.encode import JsonEncoder
    from .proto.encode import ProtoEncoder

__all__ = [
    "KeyValueEncoder",
    "KeyValuePayloads",
    "PayloadEncoder",
    "StructKind",
    "key_value_writer_schema",
    "writer_schema",
]

#: The schema type a struct is written as.
StructKind = Literal["AVRO", "JSON"]


def writer_schema(
    dtype: pa.DataType,
    struct: StructKind = "AVRO",
    *,
    name: str = "topLevelRecord",
    namespace: str = "",
    topic: str = "",
) -> SchemaInfo:
    """The schema a sink registers for values of ``dtype``: a struct (or a list, a map...)
    is AVRO, or JSON with ``struct="JSON"`` (the data is the derived Avro schema either way,
    :func:`~pulsar_spark.columnar.values.avro.encode.avro_schema_json`, a record named ``name`` in
    ``namespace``); a
    primitive type its primitive schema (:func:`~.arrow_types.primitive_schema_type`;
    binary is BYTES).

    Raises:
        UnmappableSchema: a type Avro cannot hold, naming the field.
    """
    from .arrow_types import primitive_schema_type

    kind = primitive_schema_type(dtype)
    if kind is not None:
        return SchemaInfo.primitive(kind)
    from .avro.encode import avro_schema_json

    definition = avro_schema_json(dtype, name=name, namespace=namespace, topic=topic)
    return SchemaInfo.json(definition) if struct == "JSON" else SchemaInfo.avro(definition)


def key_value_writer_schema(
    key: pa.DataType,
    value: pa.DataType,
    encoding: KeyValueEncoding = KeyValueEncoding.INLINE,
    struct: StructKind = "AVRO",
    *,
    name: str = "value",
    namespace: str = "",
    topic: str = "",
) -> SchemaInfo:
    """The KEY_VALUE schema of a key type and a value type, each half as
    :func:`writer_schema` makes it: the value's record named ``name``, the key's ``key``,
    both in ``namespace``."""
    return key_value_schema(
        writer_schema(key, struct, name="key", namespace=namespace, topic=topic),
        writer_schema(value, struct, name=name, namespace=namespace, topic=topic),
        encoding,
    )


class PayloadEncoder:
    """Values of one Arrow type encoded as payloads of one (non KEY_VALUE) schema.

    Args:
        dtype: the values' Arrow type.
        info: the schema to write with: the topic's, or :func:`writer_schema`'s.
        topic: named in errors.

    Raises:
        SchemaMismatch: ``dtype`` does not fit ``info``, naming the fields; a schema type
            that cannot be written (KEY_VALUE: use :class:`KeyValueEncoder`).
        UnmappableSchema: schema data that does not parse (Avro, protobuf descriptors).
    """

    def __init__(self, dtype: pa.DataType, info: SchemaInfo, *, topic: str = "") -> None:
        self.dtype = dtype
        self.info = info
        self.topic = topic
        kind = info.type
        self._struct: AvroEncoder | JsonEncoder | ProtoEncoder | None = None
        if kind is SchemaType.AVRO:
            from .avro.encode import AvroEncoder

            self._struct = AvroEncoder(dtype, info.data, topic=topic)
        elif kind is SchemaType.JSON:
            from .json.encode import JsonEncoder

            self._struct = JsonEncoder(dtype, info.data, topic=topic)
        elif kind in (SchemaType.PROTOBUF_NATIVE, SchemaType.PROTOBUF):
            from .proto.encode import ProtoEncoder

            self._struct = ProtoEncoder(dtype, info, topic=topic)
        elif kind.is_primitive:
            from .primitive.encode import check_primitive

            charset = info.properties.get("__charset", "UTF-8")
            if kind is SchemaType.STRING and charset.upper().replace("-", "") != "UTF8":
                reason = f"STRING values in charset {charset} are not supported, only UTF-8"
                raise SchemaMismatch.of([("", reason)], topic=topic, schema=kind.name)
            check_primitive(dtype, kind, topic=topic)
        else:
            reason = f"writing values with a {info.describe()} schema is not supported"
            raise SchemaMismatch.of([("", reason)], topic=topic, schema=kind.name)

    def encode(self, values: Values) -> pa.Array:
        """One payload per row: a binary array, null where the value is null (to be sent
        with ``null_value``).

        Raises:
            SchemaMismatch: values the schema cannot hold, naming the field.
        """
        if self._struct is not None:
            return self._struct.encode(values)
        from .primitive.encode import encode_primitive

        return encode_primitive(values, self.info.type, topic=self.topic)


class KeyValuePayloads(NamedTuple):
    """KEY_VALUE messages: ``payloads`` (null where a SEPARATED value is null) and, for
    SEPARATED, ``keys``: the encoded keys (binary, null where the key is null), which go
    in the message key as Base64 with ``partition_key_b64_encoded`` (a binary ``key``
    column of the producer's rows does both); None for INLINE."""

    payloads: pa.Array
    keys: pa.Array | None


class KeyValueEncoder:
    """Keys and values encoded for a KEY_VALUE schema, each half by its own schema.

    Raises:
        SchemaMismatch: a half's type does not fit its schema (fields named ``key.x``,
            ``value.y``); a schema that is not KEY_VALUE.
        InvalidSchema: KEY_VALUE data or properties that do not parse.
    """

    def __init__(
        self, key: pa.DataType, value: pa.DataType, info: SchemaInfo, *, topic: str = ""
    ) -> None:
        if info.type is not SchemaType.KEY_VALUE:
            reason = f"a {info.describe()} schema has no key and value halves"
            raise SchemaMismatch.of([("", reason)], topic=topic, schema=info.type.name)
        self.info = info
        halves = split_key_value(info)
        self.encoding = halves.encoding
        self.key = _half("key", key, halves.key, topic)
        self.value = _half("value", value, halves.value, topic)

    def encode(self, keys: Values, values: Values) -> KeyValuePayloads:
        """The payloads (and for SEPARATED the message keys) of each row's key and value.

        Raises:
            SchemaMismatch: values a half's schema cannot hold; keys and values of
                different lengths.
        """
        from .avro.encode import value_array
        from .key_value import inline_payloads

        key_array, value_array_ = value_array(keys), value_array(values)
        if len(key_array) != len(value_array_):
            reason = f"{len(key_array)} keys but {len(value_array_)} values"
            raise SchemaMismatch.of([("", reason)], topic=self.value.topic, schema="KEY_VALUE")
        encoded_keys = _encode_half("key", self.key, key_array)
        encoded_values = _encode_half("value", self.value, value_array_)
        if self.encoding is KeyValueEncoding.SEPARATED:
            return KeyValuePayloads(encoded_values, encoded_keys)
        return KeyValuePayloads(inline_payloads(encoded_keys, encoded_values), None)


def _half(which: str, dtype: pa.DataType, info: SchemaInfo, topic: str) -> PayloadEncoder:
    try:
        return PayloadEncoder(dtype, info, topic=topic)
    except SchemaMismatch as exc:
        raise _prefixed(which, exc) from None


def _encode_half(which: str, enc: PayloadEncoder, array: pa.Array) -> pa.Array:
    try:
        return enc.encode(array)
    except SchemaMismatch as exc:
        raise _prefixed(which, exc) from None


def _prefixed(which: str, exc: SchemaMismatch) -> SchemaMismatch:
    """The error with its fields under ``key`` or ``value``."""
    fields = ", ".join(which if f == "<value>" else f"{which}.{f}" for f in exc.fields)
    reason = f"{which}: {exc.reason}"
    return SchemaMismatch(reason, topic=exc.topic, field=fields)
