"""Arrow values encoded as Avro binary datums (no header), one payload per row, columnar:
the writer schema derived from the Arrow type, or the topic's, checked before anything is sent.

::

    enc = avro_encoder(batch_type)                  # schema derived (avro_schema_json)
    enc = avro_encoder(batch_type, topic_schema)    # the topic's: SchemaMismatch if it does not fit
    payloads = enc.encode(batch)                    # binary array, null where the row is null
    enc.schema                                      # the writer schema (JSON text)

A null row (the whole value null) gives a null payload: the producer sends it
with ``null_value`` and no bytes. Every other row is one datum, as
``fastavro.schemaless_writer`` and Java's ``AvroWriter`` write it (decimals in
the fewest bytes, as Java's ``BigInteger.toByteArray``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from ...arrays import valid_mask
from ...pieces import Piece, expand, join, to_arrow
from ..encode_errors import Misfit, SchemaMismatch
from .arrow_types import avro_schema_for
from .encode_fit import fit_encoder
from .encode_nodes import Enc
from .schema import AvroType, parse_avro

__all__ = [
    "AvroEncoder",
    "Values",
    "avro_encoder",
    "avro_schema_json",
    "encode_avro",
    "encode_rows",
    "value_array",
    "value_type",
]

#: What encoders take: a column of values, or a table/batch whose rows are the values.
Values: TypeAlias = pa.Array | pa.ChunkedArray | pa.RecordBatch | pa.Table


def value_type(values: Values) -> pa.DataType:
    """The Arrow type of the values: a table or batch is a struct of its columns."""
    if isinstance(values, pa.RecordBatch | pa.Table):
        return pa.struct(list(values.schema))
    return values.type


def value_array(values: Values) -> pa.Array:
    """The values as one array (chunks concatenated; a table's rows as a struct array)."""
    if isinstance(values, pa.RecordBatch):
        return values.to_struct_array()
    if isinstance(values, pa.Table):
        values = values.combine_chunks().to_struct_array()
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return values.chunk(0)
        if values.num_chunks == 0:
            return pa.array([], values.type)
        return pa.concat_arrays(values.chunks)
    return values


def encode_rows(
    array: pa.Array, pieces_of: Callable[[pa.Array], Sequence[Piece]], *, topic: str
) -> pa.Array:
    """One payload per row of ``array``: the bytes of the pieces ``pieces_of`` makes of
    its valid rows, null where the row is null (the Avro and protobuf encoders' last step).

    Raises:
        SchemaMismatch: what ``pieces_of`` raises, naming ``topic``.
    """
    rows = len(array)
    valid = valid_mask(array)
    nulls = rows - int(np.count_nonzero(valid))
    pieces: Sequence[Piece]
    try:
        if nulls:
            kept = array.filter(pa.array(valid))
            pieces = [expand(p, valid) for p in pieces_of(kept)]
        else:
            pieces = pieces_of(array)
    except SchemaMismatch as exc:
        raise SchemaMismatch(exc.reason, topic=topic, field=exc.field) from None
    return to_arrow(join(pieces, rows), valid if nulls else None)


def avro_schema_json(
    dtype: pa.DataType, *, name: str = "topLevelRecord", namespace: str = "", topic: str = ""
) -> str:
    """The Avro schema (compact JSON text) derived from an Arrow type by
    :func:`~.arrow_types.avro_schema_for`: a struct is a record named ``name``,
    nullable fields ``["null", T]`` with default null.

    Raises:
        UnmappableSchema: a type Avro cannot hold, naming the field.
    """
    schema = avro_schema_for(dtype, name=name, namespace=namespace, topic=topic)
    return json.dumps(schema, separators=(",", ":"))


def writer_schema(
    dtype: pa.DataType, writer: str | bytes | object | None, *, topic: str
) -> tuple[str, AvroType]:
    """The writer schema as JSON text and parsed: ``writer`` (JSON text, bytes or
    already parsed JSON), or the one :func:`avro_schema_json` derives from ``dtype``."""
    if writer is None:
        writer = avro_schema_json(dtype, topic=topic)
    if isinstance(writer, bytes | bytearray | memoryview):
        writer = bytes(writer).decode()
    text = writer if isinstance(writer, str) else json.dumps(writer)
    return text, parse_avro(writer, topic=topic)


class AvroEncoder:
    """Values of one Arrow type encoded with one writer schema.

    Args:
        dtype: the values' Arrow type (see :func:`value_type`).
        writer: the writer schema (JSON text, bytes or parsed); None derives it from
            ``dtype`` (:func:`avro_schema_json`).
        topic: named in errors.
        kind: the schema type named in errors (``AVRO``, ``JSON``).

    Raises:
        SchemaMismatch: ``dtype`` does not fit ``writer``; names every field at fault.
        UnmappableSchema: ``writer`` is not an Avro schema, or ``dtype`` has no Avro type.
    """

    def __init__(
        self,
        dtype: pa.DataType,
        writer: str | bytes | object | None = None,
        *,
        topic: str = "",
        kind: str = "AVRO",
    ) -> None:
        self.dtype = dtype
        self.topic = topic
        self.kind = kind
        #: The writer schema as JSON text, and parsed.
        self.schema, self.node = writer_schema(dtype, writer, topic=topic)
        self.enc = self._fit(dtype)
        self._fitted: dict[pa.DataType, Enc] = {dtype: self.enc}

    def _fit(self, dtype: pa.DataType) -> Enc:
        misfits: list[Misfit] = []
        enc = fit_encoder(dtype, self.node, misfits)
        if misfits:
            raise SchemaMismatch.of(misfits, topic=self.topic, schema=self.kind)
        return enc

    def encode(self, values: Values) -> pa.Array:
        """One payload per row: a binary array, null where the value is null.

        Values of another type than the encoder's are checked against the schema first
        (a DataFrame's batches may differ in nullability).

        Raises:
            SchemaMismatch: values the schema cannot hold (a null where it has no null,
                an unknown enum symbol...), naming the field; values of a type that does
                not fit.
        """
        array = value_array(values)
        enc = self._fitted.get(array.type)
        if enc is None:  # another nullability, say: checked again
            enc = self._fitted[array.type] = self._fit(array.type)
        return encode_rows(array, enc.encode, topic=self.topic)


@functools.lru_cache(maxsize=64)
def avro_encoder(
    dtype: pa.DataType, writer: str | None = None, *, topic: str = "", kind: str = "AVRO"
) -> AvroEncoder:
    """The :class:`AvroEncoder` of an Arrow type and writer schema text (cached)."""
    return AvroEncoder(dtype, writer, topic=topic, kind=kind)


def encode_avro(values: Values, writer: str | None = None, *, topic: str = "") -> pa.Array:
    """``avro_encoder(value_type(values), writer).encode(values)``."""
    return avro_encoder(value_type(values), writer, topic=topic).encode(values)
