"""StreamNative's row layout: the columns its connector's reads give (``rowLayout=streamnative``)
and the DataFrames its sink takes, so that a job written for it runs unchanged.

Reads. StreamNative's ``pulsar-spark`` (``SchemaUtils.pulsarSourceSchema``,
``PulsarDeserializer``) lays a message out as its value, then six metadata columns::

    a record's fields      AVRO and JSON topics: each field of the record a top-level
                           column (here PROTOBUF_NATIVE and PROTOBUF records too)
    value                  every other topic: the primitive's type; binary without a
                           schema, for BYTES, and with allowDifferentTopicSchemas
                           (schemaMode=raw)
    __key                  binary: the message key's bytes (a base64 key decoded);
                           null without a key
    __topic                string: the topic the message was read from, a partition's
                           own name (``...-partition-2``) for a partitioned topic
    __messageId            binary: ``MessageId.toByteArray()``, the MessageIdData
                           protobuf (:mod:`~pulsar_spark.columnar.rows.message_ids`)
    __publishTime          timestamp
    __eventTime            timestamp; null when the message has none (0)
    __messageProperties    map<string,string>; empty when there are none

:func:`streamnative_schema` makes those columns from the read's own row schema (a
``decodeError`` column, in dead-letter mode, stays last) and :func:`streamnative_batch`
each batch from the decoded one: the value struct flattened, the metadata renamed, the
ids' bytes made for the whole column at once. Where StreamNative fails, so does this,
with a message saying what to do: a KEY_VALUE topic (read it with the default layout,
where ``key`` and ``value`` are typed), and a record field named like one of the
metadata columns (StreamNative's DataFrame then has two columns of that name, neither
of which a query can name). Every column is nullable: StreamNative declares ``value`` and
a record's non-union fields non-nullable, but a tombstone, or a dead-letter row, has
none.

Writes (both layouts). StreamNative's sink (``PulsarSinks``, ``PulsarRowWriter``) takes
``__topic`` (string: where each row goes when there is no ``topic`` option), ``__key``
(string or binary: sent as key bytes), ``__eventTime`` (long epoch milliseconds or
timestamp; none unless positive) and ``__messageProperties`` (map<string,string>), and
leaves out ``__messageId`` and ``__publishTime`` with a WARNING. Every other column is
the value: one column that is not a struct is the value as it is; several, or one
struct, are the fields of a record (written as AVRO, record ``topLevelRecord``).
:func:`sink_columns` maps a DataFrame's columns so: the four into ``topic``, ``key``,
``eventTime`` and ``properties``, and, when the DataFrame has no ``value`` column but
others than ours (``key``, ``topic``...), the remaining columns into ``value``
(:attr:`SinkColumns.packed`). A DataFrame with ``value`` keeps this connector's shape (a
struct ``value`` is the record itself, where StreamNative would nest it in a record of
one field named ``value``), and one with only our columns and no ``value`` is refused as
before. Packed columns are written only with ``rowLayout=streamnative`` on the write, or
into a topic whose record schema they fit (:func:`.write_schema.check_packed`): a
misspelt ``value`` column is refused rather than registered as a record of its own.
Nothing here imports pyspark.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.columnar.rows.schema import TIMESTAMP
from pulsar_spark.protocol.topics import PARTITION_SUFFIX

from .errors import PulsarOptionError, PulsarWriteError, TopicSchemaError

__all__ = [
    "META_COLUMNS",
    "PULSAR_SPARK",
    "STREAMNATIVE",
    "WRITTEN_META",
    "SinkColumns",
    "row_layout",
    "sink_columns",
    "streamnative_batch",
    "streamnative_schema",
]

log = logging.getLogger(__name__)

#: ``rowLayout`` values: this connector's columns, and StreamNative's.
PULSAR_SPARK, STREAMNATIVE = "pulsar-spark", "streamnative"

#: StreamNative's metadata columns, in its order, with their types.
META_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("__key", pa.binary()),
    pa.field("__topic", pa.string()),
    pa.field("__messageId", pa.binary()),
    pa.field("__publishTime", TIMESTAMP),
    pa.field("__eventTime", TIMESTAMP),
    pa.field("__messageProperties", pa.map_(pa.string(), pa.string())),
)
_META_NAMES = frozenset(f.name for f in META_COLUMNS)
#: Our column each metadata column is made from (``__topic`` and ``__messageId`` are made).
_FROM_OURS = {
    "__key": "key",
    "__publishTime": "publishTime",
    "__eventTime": "eventTime",
    "__messageProperties": "properties",
}
#: The metadata columns a write takes (:func:`_check_meta` says which column of ours each
#: becomes: topic, key, eventTime, properties).
WRITTEN_META = frozenset({"__topic", "__key", "__eventTime", "__messageProperties"})
#: The metadata columns a write leaves out (with a WARNING), as StreamNative's sink does.
_LEFT_OUT = ("__messageId", "__publishTime")


def row_layout(name: str, value: str) -> str:
    """The ``rowLayout`` option: ``pulsar-spark`` or ``streamnative`` (any case)."""
    found = {PULSAR_SPARK: PULSAR_SPARK, STREAMNATIVE: STREAMNATIVE}.get(value.strip().lower())
    if found is None:
        msg = f"expected one of {PULSAR_SPARK}, {STREAMNATIVE}, got {value!r}"
        raise PulsarOptionError(name, msg)
    return found


# -- reads -------------------------------------------------------------------------------


def streamnative_schema(arrow: pa.Schema, *, key_value: bool, origin: str) -> pa.Schema:
    """StreamNative's columns of a read whose own row schema is ``arrow`` (``value`` typed,
    perhaps ``decodeError`` last); ``origin`` (the schema's) names it in errors.

    Raises:
        TopicSchemaError: a KEY_VALUE schema, or a record field named like a metadata column.
    """
    if key_value:
        msg = (
            f"rowLayout streamnative cannot lay out KEY_VALUE values ({origin}): StreamNative's "
            "connector refuses such topics. Read them with the default rowLayout (typed `key` "
            "and `value` columns), or with schemaMode=raw (binary `value`, the key in `__key`)"
        )
        raise TopicSchemaError(msg)
    value = arrow.field("value")
    if pa.types.is_struct(value.type):
        fields = [pa.field(f.name, f.type) for f in value.type]
    else:
        fields = [pa.field("value", value.type)]
    extra = [f for f in arrow if f.name not in ROW_SCHEMA.names]  # decodeError
    clash = sorted({f.name for f in fields} & (_META_NAMES | {f.name for f in extra}))
    if clash:
        msg = (
            f"rowLayout streamnative: the record of {origin} has field(s) {clash}, named like "
            "the metadata columns it puts beside them (StreamNative's DataFrame would hold "
            "two columns of each name). Read with the default rowLayout and select "
            '"value.*" with the metadata columns renamed'
        )
        raise TopicSchemaError(msg)
    return pa.schema([*fields, *META_COLUMNS, *extra])


def _topic_names(batch: pa.RecordBatch) -> pa.Array:
    """Each row's topic as the Java client names it: a partition's own name."""
    import pyarrow.compute as pc  # loaded with the first batch, not by a plan

    topics = batch.column("topic")
    partitions = batch.column("partition")
    if not len(partitions) or pc.max(partitions).as_py() < 0:
        return topics
    suffix = pc.binary_join_element_wise(PARTITION_SUFFIX, pc.cast(partitions, pa.string()), "")
    suffix = pc.if_else(pc.less(partitions, 0), "", suffix)
    return pc.binary_join_element_wise(topics, suffix, "")


def streamnative_batch(
    decoded: pa.RecordBatch, built: pa.Schema, names: Sequence[str]
) -> pa.RecordBatch:
    """The columns ``names`` (of :func:`streamnative_schema`) of ``decoded``, a batch in the
    read's own row schema; ``built``: the schema of the batch as it was read, which holds
    the ids' batch sizes and first chunks."""
    value = decoded.column("value")
    flat: dict[str, pa.Array] = {}
    if pa.types.is_struct(value.type):
        flat = dict(zip([f.name for f in value.type], value.flatten(), strict=True))
    else:
        flat["value"] = value
    columns: list[pa.Array] = []
    for name in names:
        if name in flat:
            columns.append(flat[name])
        elif name in _FROM_OURS:
            columns.append(decoded.column(_FROM_OURS[name]))
        elif name == "__topic":
            columns.append(_topic_names(decoded))
        elif name == "__messageId":
            from pulsar_spark.columnar.rows.message_ids import (
                id_bytes_column,
                id_parts,
                parse_message_ids,
            )

            ids = parse_message_ids(decoded.column("messageId"))
            columns.append(id_bytes_column(ids, id_parts(built, decoded.num_rows)))
        else:
            columns.append(decoded.column(name))  # decodeError
    return pa.RecordBatch.from_arrays(columns, names=list(names))


# -- writes ------------------------------------------------------------------------------


def _is_text(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_string(dtype) or pa.types.is_large_string(dtype))


def _is_binary(dtype: pa.DataType) -> bool:
    return bool(pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype))


def _check_meta(field: pa.Field) -> pa.Field:
    """The column of ours a metadata column becomes (its type checked).

    Raises:
        PulsarWriteError: naming the column and the types it takes.
    """
    name, dtype = field.name, field.type
    if name == "__topic":
        ok, wanted, ours = _is_text(dtype), "string", pa.field("topic", dtype)
    elif name == "__key":
        ok, wanted = _is_text(dtype) or _is_binary(dtype), "string or binary"
        ours = pa.field("key", pa.binary())
    elif name == "__eventTime":
        ok = pa.types.is_int64(dtype) or pa.types.is_timestamp(dtype)
        wanted, ours = "long (epoch milliseconds) or timestamp", pa.field("eventTime", TIMESTAMP)
    else:
        ok = pa.types.is_map(dtype) and _is_text(dtype.key_type) and _is_text(dtype.item_type)
        wanted, ours = "map<string,string>", pa.field("properties", dtype)
    if not ok:
        msg = (
            f"column {name!r} has type {dtype}; the pulsar sink takes {wanted} there (as "
            f"StreamNative's sink does), written as the message's {ours.name}"
        )
        raise PulsarWriteError(msg)
    return ours


@dataclass(frozen=True)
class SinkColumns:
    """How a DataFrame's columns become the sink's (see the module docstring): ``renamed``
    (their metadata column, ours), ``grouped`` (the columns that make up ``value``; empty:
    ``value`` is a column of the DataFrame), whether they make a struct, ``dropped``
    (left out), ``schema``, the columns the sink then gets, and ``frame``, the DataFrame's
    own."""

    renamed: tuple[tuple[str, str], ...]
    grouped: tuple[str, ...]
    struct: bool
    dropped: tuple[str, ...]
    schema: pa.Schema
    frame: tuple[str, ...] = ()

    @property
    def packed(self) -> tuple[str, ...]:
        """The DataFrame's columns when it has no ``value`` and some of them make it up
        (to be allowed: :func:`.write_schema.check_packed`); empty otherwise."""
        return self.frame if self.grouped else ()

    @property
    def maps(self) -> bool:
        """Whether the DataFrame's columns are mapped at all."""
        return bool(self.renamed or self.grouped or self.dropped)

    def apply(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """``batch`` (the DataFrame's columns) as the sink's columns."""
        if not self.maps:
            return batch
        columns: dict[str, pa.Array] = {}
        renamed = dict(self.renamed)
        left = set(self.dropped) | set(self.grouped)
        for name, column in zip(batch.schema.names, batch.columns, strict=True):
            if name in left:
                continue
            ours = renamed.get(name, name)
            columns[ours] = _converted(ours, column)
        if self.grouped:
            if self.struct:
                fields = [batch.schema.field(name) for name in self.grouped]
                parts = [batch.column(name) for name in self.grouped]
                columns["value"] = pa.StructArray.from_arrays(parts, fields=fields)
            else:
                columns["value"] = batch.column(self.grouped[0])
        arrays = [columns[f.name] for f in self.schema]
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _converted(ours: str, column: pa.Array) -> pa.Array:
    """A metadata column's values as our column takes them: a key's bytes; an event time
    (epoch ms, or a timestamp) unless it is not positive, which StreamNative leaves unset."""
    import pyarrow.compute as pc  # loaded with the first batch, not by a plan

    dtype = column.type
    if ours == "key" and _is_text(dtype):
        return pc.cast(column, pa.binary())
    if ours == "eventTime":
        if pa.types.is_int64(dtype):
            millis = column
            stamps = pc.cast(column, pa.timestamp("ms", tz="UTC"))
        else:
            stamps = pc.cast(column, pa.timestamp(dtype.unit, tz="UTC"))
            millis = pc.cast(stamps, pa.int64())
        return pc.cast(pc.if_else(pc.greater(millis, 0), stamps, None), TIMESTAMP)
    return column


def sink_columns(schema: pa.Schema) -> SinkColumns:
    """How a DataFrame with ``schema`` (its Arrow types) is written (see :class:`SinkColumns`).

    Raises:
        PulsarWriteError: a metadata column of a type it cannot have, or, in our shape,
            one that also comes under our name (``__key`` and ``key``), naming the columns.
    """
    names = schema.names
    dropped = tuple(n for n in names if n in _LEFT_OUT)
    if dropped:
        log.warning(
            "pulsar sink: column(s) %s are left out: the broker sets a message's id and "
            "publish time (StreamNative's sink leaves them out too); drop or rename them to "
            "write them as fields",
            list(dropped),
        )
    mapped = {f.name: _check_meta(f) for f in schema if f.name in WRITTEN_META}
    renamed = tuple((theirs, ours.name) for theirs, ours in mapped.items())
    rest = [f for f in schema if f.name not in mapped and f.name not in dropped]
    # The columns of our own shape (with ``value``, or refused without it, as before).
    from pulsar_spark.columnar.rows.encode import ALLOWED_COLUMNS

    own_shape = ALLOWED_COLUMNS | {"topic"}
    if "value" in names or all(f.name in own_shape for f in rest):
        for theirs, ours in renamed:
            if ours in names:
                msg = (
                    f"columns {theirs!r} and {ours!r} are both there: the pulsar sink writes "
                    f"either as the message's {ours}; drop one"
                )
                raise PulsarWriteError(msg)
        fields = [mapped.get(f.name, f) for f in schema if f.name not in dropped]
        return SinkColumns(renamed, (), False, dropped, pa.schema(fields), tuple(names))
    struct = len(rest) > 1 or pa.types.is_struct(rest[0].type)
    value = pa.field("value", pa.struct(rest) if struct else rest[0].type)
    grouped = tuple(f.name for f in rest)
    written = pa.schema([value, *mapped.values()])
    return SinkColumns(renamed, grouped, struct, dropped, written, tuple(names))
