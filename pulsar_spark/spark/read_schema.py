"""Planning a typed read: which schema decodes the values, and the columns the read gives.

:func:`plan_read_schema` runs once per query, where Spark asks the source for
its schema (``load()``). The reader schema is, in order:

1. none with ``schemaMode=raw``: binary ``value`` and ``key``, as before schemas;
2. the user's (``avroSchema``, ``jsonSchema``; ``protobufSchema`` once
   :class:`PulsarOptions` has a ``protobuf_schema`` field), which also decodes
   topics whose broker keeps no schema (pulsar-lite has no registry at all);
3. the topics' latest schema at planning time (``latest_schema``: answered at
   once, None, on pulsar-lite). Every topic read must have the same one;
   topics without a schema or with BYTES keep binary ``value`` (a topic that gains a
   typed schema after planning fails the read: the query reads it once restarted).

The :class:`ReadSchema` goes to every task (it pickles small): the reader
schema, its version, and the Arrow row schema of the read: :data:`ROW_SCHEMA`
with ``value`` of the decoded type (for KEY_VALUE, ``key`` too) and, in
dead-letter mode, a ``decodeError`` string column at the end; and the layout
of the columns Spark gets (``rowLayout``: those, or StreamNative's made of them,
:mod:`.streamnative_rows`). Nothing here imports pyspark.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import pyarrow as pa

from pulsar_spark.columnar import ROW_SCHEMA, SchemaError
from pulsar_spark.protocol.schemas.info import SchemaInfo, split_key_value
from pulsar_spark.protocol.schemas.types import SchemaType

from .errors import TopicSchemaError
from .options.schema import DEAD_LETTER, RAW
from .streamnative_rows import PULSAR_SPARK, STREAMNATIVE, streamnative_schema

if TYPE_CHECKING:
    from pulsar_spark.client import PulsarClient, VersionedSchema

    from .options.parse import PulsarOptions

__all__ = [
    "DECODE_ERROR",
    "ReadSchema",
    "check_unplanned",
    "plan_for",
    "plan_read_schema",
    "row_schema",
]

log = logging.getLogger(__name__)

#: The dead-letter column: why the row's value did not decode (null when it did).
DECODE_ERROR = "decodeError"


@dataclass(frozen=True)
class ReadSchema:
    """How a read decodes values (see the module docstring).

    ``reader`` is the schema values are decoded into (None: they stay binary);
    ``origin`` says where it came from for messages (``topic X, schema version 3``
    or ``option avroSchema``); ``version`` is its version in the topic (None for
    a schema given by the user); ``arrow`` the row schema of the read.
    """

    reader: SchemaInfo | None
    origin: str
    version: int | None
    dead_letter: bool
    arrow: pa.Schema
    #: The schema came from an option, not from the topic's registry.
    user_given: bool = False
    #: Planning could not reach the broker (why): the read declared bytes, and the
    #: reader plans again before reading (:func:`check_unplanned`).
    unplanned: str | None = None
    #: ``schemaMode=raw``: bytes whatever the topics' schemas, now or later.
    raw: bool = False
    #: ``rowLayout``: the columns Spark gets, :attr:`arrow`'s or StreamNative's.
    layout: str = PULSAR_SPARK

    @property
    def columns(self) -> pa.Schema:
        """The Arrow schema of the rows Spark gets: :attr:`arrow`, or under
        ``rowLayout=streamnative`` StreamNative's columns made of it.

        Raises:
            TopicSchemaError: values StreamNative's layout cannot hold (KEY_VALUE, a record
                field named like a metadata column).
        """
        if self.layout != STREAMNATIVE:
            return self.arrow
        key_value = self.reader is not None and self.reader.type is SchemaType.KEY_VALUE
        return streamnative_schema(self.arrow, key_value=key_value, origin=self.origin)

    @property
    def passes_through(self) -> bool:
        """Whether batches go to Spark as read: raw mode. A read planned without a
        schema still looks at each batch's schema versions (a topic may gain a typed
        schema after planning, :class:`~.value_decode.ValueDecoder`)."""
        return self.raw

    @property
    def decodes(self) -> bool:
        """Whether values are decoded at all (not raw, not bytes)."""
        return self.reader is not None


def row_schema(reader: SchemaInfo | None, *, dead_letter: bool, topic: str = "") -> pa.Schema:
    """:data:`ROW_SCHEMA` with ``value`` (and a KEY_VALUE ``key``) of the types ``reader``'s
    values decode into, and ``decodeError`` at the end in dead-letter mode.

    Raises:
        UnmappableSchema: the schema has no Arrow type, naming the field and ``topic``.
    """
    schema = ROW_SCHEMA
    if reader is not None:
        from pulsar_spark.columnar import decoded_type  # the decoders, for a typed read

        if reader.type is SchemaType.KEY_VALUE:
            halves = split_key_value(reader)
            key = decoded_type(halves.key, topic=topic)
            schema = schema.set(schema.get_field_index("key"), pa.field("key", key))
            value = decoded_type(halves.value, topic=topic)
        else:
            value = decoded_type(reader, topic=topic)
        schema = schema.set(schema.get_field_index("value"), pa.field("value", value))
    if dead_letter:
        schema = schema.append(pa.field(DECODE_ERROR, pa.string()))
    return schema


def _key(found: VersionedSchema | None) -> tuple[int, str] | None:
    """What makes two topics' schemas the same: type and data (JSON data parsed, so
    layout does not count; names and properties never do, as for the broker)."""
    if found is None or found.info.type.is_bytes:
        return None
    info = found.info
    data = info.data.decode("utf-8", "replace")
    if info.type in (SchemaType.AVRO, SchemaType.JSON, SchemaType.PROTOBUF_NATIVE):
        with contextlib.suppress(ValueError):
            data = json.dumps(json.loads(data), sort_keys=True)
    return (info.type.pb_value, data)


def _describe(found: VersionedSchema | None) -> str:
    if found is None:
        return "no schema"
    version = "" if found.version is None else f" (version {found.version})"
    return found.info.describe() + version


def _check_user_schema(
    user: SchemaInfo, name: str, found: Mapping[str, VersionedSchema | None]
) -> None:
    """A user schema reads bytes, and topics whose schema is of its own kind (JSON values
    also from STRING topics); any other registered type is an error."""
    fits = {user.type, SchemaType.STRING} if user.type is SchemaType.JSON else {user.type}
    clashes = {
        topic: _describe(schema)
        for topic, schema in found.items()
        if schema is not None and not schema.info.type.is_bytes and schema.info.type not in fits
    }
    if clashes:
        listed = "; ".join(f"{topic}: {kind}" for topic, kind in sorted(clashes.items()))
        msg = (
            f"option {name} describes {user.type.name} values, but the broker holds another "
            f"schema for {listed}. Drop the option to read with the topic's schema, or set "
            "schemaMode=raw to read bytes."
        )
        raise TopicSchemaError(msg)


def plan_read_schema(client: PulsarClient, options: PulsarOptions, topics: list[str]) -> ReadSchema:
    """The :class:`ReadSchema` of a read of ``topics`` (see the module docstring).

    Raises:
        TopicSchemaError: topics with different schemas, a schema that maps to no
            Spark type, or a user schema of another kind than a topic's.
    """
    dead = options.decode_error_mode == DEAD_LETTER
    if options.schema_mode == RAW:
        return ReadSchema(None, "schemaMode raw", None, False, ROW_SCHEMA, raw=True)
    found = {topic: client.latest_schema(topic) for topic in topics}
    user, name = options.avro_schema, "avroSchema"
    if user is None:
        user, name = options.json_schema, "jsonSchema"
    if user is None:
        user, name = options.protobuf_schema, "protobufSchema"
    if user is not None:
        _check_user_schema(user, name, found)
        return ReadSchema(
            user, f"option {name}", None, dead, row_schema(user, dead_letter=dead), True
        )
    kinds: dict[tuple[int, str] | None, list[str]] = {}
    for topic, schema in found.items():
        kinds.setdefault(_key(schema), []).append(topic)
    if len(kinds) > 1:
        listed = "; ".join(
            f"{topic}: {_describe(found[topic])}" for names in kinds.values() for topic in names
        )
        msg = (
            f"the topics read have different schemas ({listed}). Read them apart, give "
            "one schema (avroSchema or jsonSchema), or set schemaMode=raw to read bytes."
        )
        raise TopicSchemaError(msg)
    if not found or None in kinds:
        return ReadSchema(None, "no schema", None, dead, row_schema(None, dead_letter=dead))
    topic = next(iter(found))
    latest = found[topic]
    assert latest is not None
    origin = f"topic {topic}" + (
        "" if latest.version is None else f", schema version {latest.version}"
    )
    try:
        arrow = row_schema(latest.info, dead_letter=dead, topic=topic)
    except SchemaError as exc:
        msg = f"{exc}; set schemaMode=raw to read the {latest.info.describe()} values as bytes"
        raise TopicSchemaError(msg) from None
    return ReadSchema(latest.info, origin, latest.version, dead, arrow)


def plan_for(options: PulsarOptions) -> ReadSchema:
    """:func:`plan_read_schema` with a client of its own (none in raw mode, nor with a
    user schema of another kind than a broker could hold), in the ``rowLayout`` asked for.

    A broker that cannot be reached, or topics that cannot be listed, do not fail
    planning (``load()`` never reached the broker before schemas): the read declares
    binary values and :func:`check_unplanned` plans again when the read starts.
    """
    return replace(_plan_values(options), layout=options.row_layout)


def _plan_values(options: PulsarOptions) -> ReadSchema:
    from .connect import open_client
    from .ranges import resolve_topics

    if options.schema_mode == RAW:
        return ReadSchema(None, "schemaMode raw", None, False, ROW_SCHEMA, raw=True)
    try:
        with open_client(options) as client:
            return plan_read_schema(client, options, resolve_topics(client, options))
    except (TopicSchemaError, SchemaError):
        raise
    except Exception as exc:
        log.debug("pulsar source: planning the read's schema failed", exc_info=True)
        dead = options.decode_error_mode == DEAD_LETTER
        reason = f"{type(exc).__name__}: {exc}"
        return ReadSchema(None, "no schema", None, dead, row_schema(None, dead_letter=dead),
                          unplanned=reason)  # fmt: skip


def check_unplanned(client: PulsarClient, options: PulsarOptions, read: ReadSchema) -> None:
    """Before a read whose planning failed: plan again (raising what the broker raises)
    and fail when the values turn out typed, which the declared schema cannot hold.

    Raises:
        TopicSchemaError: the topics have a schema the read did not declare.
    """
    if read.unplanned is None:
        return
    from .ranges import resolve_topics

    again = plan_read_schema(client, options, resolve_topics(client, options))
    if again.reader is not None:
        msg = (
            f"the topics' schema could not be read when the query was planned "
            f"({read.unplanned}); they have one ({again.origin}): load() the DataFrame "
            "again (or set schemaMode=raw to read bytes)"
        )
        raise TopicSchemaError(msg)
