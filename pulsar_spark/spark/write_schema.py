"""Typed writes: the schema a sink registers for a DataFrame, and its rows encoded for it.

:func:`plan_write` decides, per topic, from the ``value`` (and ``key``) Arrow
types, the options and the topic's latest schema (None on pulsar-lite)::

    a DataFrame without ``value``, its     refused (PulsarWriteError naming the topic, the
    columns packed into one (packed)       columns and a near-miss like ``valeu``) unless
                                           rowLayout=streamnative, or the topic has a
                                           record schema they fit: a misspelt ``value``
                                           never registers a schema of its own
    schemaMode=raw, or a binary value      no schema, payloads as given (as before
                                           schemas; a string value is sent as UTF-8)
    avroSchema, protobufSchema             that AVRO / PROTOBUF_NATIVE schema (the broker
                                           checks it)
    keyValueEncoding                       KEY_VALUE of the key's and value's types, or
                                           the topic's KEY_VALUE schema when they fit it
                                           (another encoding than the topic's: an error)
    a KEY_VALUE topic, a key and a value   the topic's KEY_VALUE schema, when they fit it
    that is not binary
    the topic has a schema                 that schema, when the DataFrame fits it; else
                                           PulsarWriteError naming the fields
    otherwise                              derived: a struct is AVRO (valueSchemaType=json:
                                           JSON) named by recordName/recordNamespace, a
                                           primitive its primitive schema; under
                                           keyValueEncoding the value's record is named so
                                           and the key's ``key``

A topic whose schema is PROTOBUF_NATIVE takes a struct ``value`` whose fields
are the message's (as reads give them), encoded by
:mod:`~pulsar_spark.columnar.values.proto.encode`.

The producer sends the schema with PRODUCER: the broker registers it or
refuses it (``IncompatibleSchemaError`` naming the topic and type), before
any message is sent. :class:`RowEncoder` turns each batch's ``value`` (and
``key``) into payloads with the columnar encoders. Nothing here imports
pyspark.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from pulsar_spark.columnar import ROW_SCHEMA, SchemaError, SchemaMismatch
from pulsar_spark.columnar.rows.encode import ALLOWED_COLUMNS
from pulsar_spark.columnar.values.encode import (
    KeyValueEncoder,
    PayloadEncoder,
    StructKind,
    key_value_writer_schema,
    writer_schema,
)
from pulsar_spark.protocol.schemas.info import SchemaInfo, split_key_value
from pulsar_spark.protocol.schemas.types import SchemaType

from .errors import PulsarWriteError
from .options.schema import RAW
from .streamnative_rows import META_COLUMNS, STREAMNATIVE, WRITTEN_META

if TYPE_CHECKING:
    from pulsar_spark.client import VersionedSchema

    from .options.parse import PulsarOptions

__all__ = ["RECORD_TYPES", "RowEncoder", "WritePlan", "check_packed", "near_misses", "plan_write"]

#: The schema types whose values are records: those a DataFrame's columns can be packed into.
RECORD_TYPES = frozenset(
    {SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF, SchemaType.PROTOBUF_NATIVE}
)
#: The column names a sink writes, ours and StreamNative's, that a near miss is matched to.
_KNOWN_COLUMNS = (*sorted(ALLOWED_COLUMNS), "topic", *sorted(WRITTEN_META))
#: Names that are no near miss: those, and the other columns reads give (either layout).
_NOT_MISSES = frozenset(_KNOWN_COLUMNS) | set(ROW_SCHEMA.names) | {f.name for f in META_COLUMNS}


@dataclass(frozen=True)
class WritePlan:
    """What a topic's rows are written with: ``schema`` (None: none, payloads as given)
    and whether it is a KEY_VALUE of the ``key`` and ``value`` columns."""

    topic: str
    schema: SchemaInfo | None
    key_value: bool = False


def typed_value(dtype: pa.DataType) -> bool:
    """Whether a ``value`` column of this type is encoded (not binary or string)."""
    return not (pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or _is_text(dtype))


def _is_text(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_string(dtype) or pa.types.is_large_string(dtype))


def _failed(topic: str, exc: SchemaError, what: str) -> PulsarWriteError:
    return PulsarWriteError(f"writing to {topic} {what}: {exc}")


def _existing(latest: VersionedSchema | None) -> SchemaInfo | None:
    """The topic's schema as writes see it: None when it has none, or only BYTES."""
    return None if latest is None or latest.info.type.is_bytes else latest.info


def near_misses(names: Sequence[str]) -> str:
    """``'value' for 'valeu'``, for each of ``names`` that looks like a misspelt column
    name the sink knows (ours or StreamNative's), joined by commas; empty when none does."""
    known = {name.lower(): name for name in _KNOWN_COLUMNS}
    found = []
    for name in names:
        if name in _NOT_MISSES:
            continue
        close = difflib.get_close_matches(name.lower(), list(known), n=1, cutoff=0.66)
        if close:
            found.append(f"{known[close[0]]!r} for {name!r}")
    return ", ".join(found)


def check_packed(
    topic: str,
    packed: Sequence[str],
    value: pa.DataType,
    options: PulsarOptions,
    latest: VersionedSchema | None,
) -> None:
    """A DataFrame without a ``value`` column, whose columns ``packed`` make up the value
    (:func:`.streamnative_rows.sink_columns`), is written only with
    ``rowLayout=streamnative`` or into a topic whose record schema the packed ``value``
    fits; ``latest`` is the topic's schema (not asked for with ``schemaMode=raw``).

    Raises:
        PulsarWriteError: naming the topic, the DataFrame's columns and a near miss of
            ``value``, and saying what to do.
    """
    if not packed or options.row_layout == STREAMNATIVE:
        return
    existing = _existing(latest)
    if options.schema_mode == RAW:
        why = "schemaMode=raw writes no schema"
    elif existing is None:
        why = "the topic has no schema"
    elif existing.type not in RECORD_TYPES:
        why = f"the topic's schema is {existing.describe()}, not a record"
    else:
        try:
            PayloadEncoder(value, existing, topic=topic)
        except SchemaError as exc:
            why = f"they do not fit the topic's schema ({existing.describe()}): {exc}"
        else:
            return  # the topic's own record: its fields are the columns
    hint = near_misses(packed)
    msg = (
        f"writing to {topic}: the DataFrame has no 'value' column (its columns: "
        f"{', '.join(packed)}).{f' Did you mean {hint}?' if hint else ''} Columns are packed "
        "into a record only with rowLayout=streamnative or into a topic whose record schema "
        f"they fit, and {why}. Add a 'value' column (the message's value), or set "
        "rowLayout=streamnative to pack the columns into a record (as StreamNative's sink "
        "does, registering a schema made from them)"
    )
    raise PulsarWriteError(msg)


def plan_write(
    topic: str,
    value: pa.DataType,
    key: pa.DataType | None,
    options: PulsarOptions,
    latest: VersionedSchema | None,
    packed: Sequence[str] = (),
) -> WritePlan:
    """The :class:`WritePlan` of ``topic`` (see the module's table), checked: the encoders
    are built once here, so a DataFrame that does not fit fails before anything is sent.
    ``packed``: the DataFrame's columns when it has no ``value`` and they make it up
    (:func:`check_packed`).

    Raises:
        PulsarWriteError: the DataFrame does not fit the topic's schema (or its own),
            naming the fields; a DataFrame without ``value`` that is not to be packed.
    """
    check_packed(topic, packed, value, options, latest)
    if options.schema_mode == RAW:
        return WritePlan(topic, None)
    struct: StructKind = "JSON" if options.value_schema_type == "JSON" else "AVRO"
    existing = _existing(latest)
    topic_kv = existing is not None and existing.type is SchemaType.KEY_VALUE
    # A KEY_VALUE topic takes a key and a (non-binary) value without the option; binary
    # values stay payloads as given, as before schemas.
    binary = pa.types.is_binary(value) or pa.types.is_large_binary(value)
    typed_pair = topic_kv and key is not None and not binary
    if options.key_value_encoding is not None or typed_pair:
        if key is None:
            msg = f"writing to {topic}: keyValueEncoding needs a 'key' column"
            raise PulsarWriteError(msg)
        if existing is not None and existing.type is SchemaType.KEY_VALUE:
            _same_encoding(topic, existing, options)
            try:
                KeyValueEncoder(key, value, existing, topic=topic)
            except SchemaError as exc:
                raise _failed(topic, exc, f"with its schema ({existing.describe()})") from None
            return WritePlan(topic, existing, key_value=True)
        assert options.key_value_encoding is not None
        named = "recordName" in options.given
        try:
            info = key_value_writer_schema(
                key,
                value,
                options.key_value_encoding,
                struct,
                name=options.record_name if named else "value",
                namespace=options.record_namespace or "",
            )
            KeyValueEncoder(key, value, info, topic=topic)
        except SchemaError as exc:
            raise _failed(topic, exc, "as KEY_VALUE") from None
        return WritePlan(topic, info, key_value=True)
    if pa.types.is_binary(value) or pa.types.is_large_binary(value):
        return WritePlan(topic, None)
    if options.avro_schema is not None:
        info, what = options.avro_schema, "with the avroSchema option's schema"
    elif options.protobuf_schema is not None:
        what = "with the protobufSchema option's schema"
        from pulsar_spark.columnar.values.proto.encode import native_writer_schema

        try:
            info = native_writer_schema(options.protobuf_schema, topic=topic)
        except SchemaError as exc:
            raise _failed(topic, exc, what) from None
    elif existing is not None:
        info, what = existing, f"with its schema ({existing.describe()})"
    elif _is_text(value) and existing is None:
        info, what = SchemaInfo.primitive(SchemaType.STRING), "as STRING"
    else:
        try:
            info = _derived(value, struct, options, topic)
        except SchemaError as exc:
            raise _failed(topic, exc, "with a schema derived from the DataFrame") from None
        what = f"as {info.type.name}"
    try:
        PayloadEncoder(value, info, topic=topic)
    except SchemaError as exc:
        raise _failed(topic, exc, what) from None
    return WritePlan(topic, info)


def _same_encoding(topic: str, existing: SchemaInfo, options: PulsarOptions) -> None:
    """Refuses a keyValueEncoding other than the topic's: the broker tells KEY_VALUE schemas
    apart by their halves only, so the other layout would be registered as the same schema
    and its messages misread by every reader of the topic's."""
    asked, encoding = options.key_value_encoding, split_key_value(existing).encoding
    if asked is not None and asked is not encoding:
        msg = (
            f"writing to {topic}: keyValueEncoding={asked.name.lower()}, but the topic's schema "
            f"({existing.describe()}) lays its messages out {encoding.name}, as its readers "
            f"expect: use keyValueEncoding={encoding.name.lower()}, or leave the option out"
        )
        raise PulsarWriteError(msg)


def _derived(
    value: pa.DataType, struct: StructKind, options: PulsarOptions, topic: str
) -> SchemaInfo:
    """The schema derived from the value's type, a record named by the options."""
    return writer_schema(
        value,
        struct,
        name=options.record_name,
        namespace=options.record_namespace or "",
        topic=topic,
    )


class RowEncoder:
    """Encodes the rows of one topic for its :class:`WritePlan` (built on the first batch's
    types, again when they change).

    Raises:
        PulsarWriteError: values the schema cannot hold (a null where it has none...).
    """

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self._encoder: PayloadEncoder | KeyValueEncoder | None = None
        self._types: tuple[pa.DataType, pa.DataType | None] | None = None

    def encode(self, table: pa.Table) -> pa.Table:
        """``table`` (columns value, key, properties, eventTime) with ``value`` (and for
        KEY_VALUE, ``key``) replaced by the encoded payloads (and keys)."""
        plan, info = self.plan, self.plan.schema
        if info is None:
            return table
        value = table.column("value")
        key = table.column("key") if "key" in table.column_names else None
        types = (value.type, None if key is None else key.type)
        try:
            if self._encoder is None or types != self._types:
                self._types = types
                if plan.key_value:
                    assert key is not None
                    self._encoder = KeyValueEncoder(key.type, value.type, info, topic=plan.topic)
                else:
                    self._encoder = PayloadEncoder(value.type, info, topic=plan.topic)
            if isinstance(self._encoder, KeyValueEncoder):
                assert key is not None
                pairs = self._encoder.encode(key, value)
                table = table.set_column(table.column_names.index("value"), "value", pairs.payloads)
                if pairs.keys is None:  # INLINE: the key travels in the payload
                    return table.drop_columns(["key"])
                # SEPARATED: a null key goes with null_partition_key, as Java sends it
                from pulsar_spark.columnar.rows.encode import separated_keys_field

                field = separated_keys_field(pairs.keys.type)
                return table.set_column(table.column_names.index("key"), field, pairs.keys)
            payloads = self._encoder.encode(value)
        except (SchemaMismatch, SchemaError) as exc:
            raise _failed(plan.topic, exc, f"as {info.describe()}") from None
        return table.set_column(table.column_names.index("value"), "value", payloads)
