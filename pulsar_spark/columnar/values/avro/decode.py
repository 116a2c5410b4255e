"""Avro values (binary Arrow arrays of datums, no header) decoded into Arrow columns, with
plans compiled once per (writer, reader) schema pair.

::

    plan = avro_plan(writer_schema_json)              # cached per schema
    plan.type                                         # the Arrow type of the values
    column = plan.decode(values)                      # raises SchemaDecodeError
    column, errors = plan.decode_collect(values)      # dead-letter: null + error text

Every value is read at once, field by field (:mod:`.lanes`): no Python
step per message. Null values (``null_value`` messages) stay null. Bytes after
a complete datum are ignored, as the Java client and fastavro ignore them.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from ...arrays import Mask
from .arrow_types import EnumMode, avro_arrow_field
from .lanes import Failures, Lanes, collected, expand
from .nodes import Node
from .plan import compile_plan
from .schema import AvroType, parse_avro

__all__ = ["AvroPlan", "DatumPlan", "avro_plan", "datum_lanes"]

SchemaText = str | bytes


class DatumPlan:
    """Decodes binary values (Arrow arrays of serialized datums), all at once, into
    :attr:`type`: one value per datum, null where the value is null. A subclass reads
    the lanes of the non-null values (:meth:`read`)."""

    topic: str
    type: pa.DataType

    def decode(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """One Arrow value per datum (null where ``values`` is null).

        Raises:
            SchemaDecodeError: a value that does not decode (the lowest row among the
                values that failed at the first field that failed), naming the field.
        """
        return self._decode(values, Failures(len(values), topic=self.topic))

    def decode_collect(self, values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
        """Like :meth:`decode`, but a value that does not decode comes out null, and the
        second column holds its error text (null for the rows that decoded)."""
        return collected(self._decode, values, self.topic)

    def read(self, lanes: Lanes, failures: Failures) -> pa.Array:
        """The values of the datums of ``lanes`` (their failures in ``failures``)."""
        raise NotImplementedError

    def _decode(self, values: pa.Array | pa.ChunkedArray, failures: Failures) -> pa.Array:
        lanes, valid = datum_lanes(values, failures)
        column = self.read(lanes, failures)
        return column if valid is None else expand(column, valid)


class AvroPlan(DatumPlan):
    """How to decode values written with ``writer`` into ``reader``'s Arrow type.

    Args:
        writer: the writer's Avro schema (JSON text).
        reader: the reader's schema; None reads as the writer.
        topic: named in errors.
        enums: enums as strings, or as dictionary arrays.

    Raises:
        UnmappableSchema: a schema that is not valid, or whose reader has no Arrow type.
        SchemaResolutionError: data of the writer cannot be read as the reader.
    """

    def __init__(
        self,
        writer: SchemaText | AvroType,
        reader: SchemaText | AvroType | None = None,
        *,
        topic: str = "",
        enums: EnumMode = "string",
    ) -> None:
        self.topic = topic
        self.writer = _parsed(writer, topic)
        self.reader = self.writer if reader is None else _parsed(reader, topic)
        #: The Arrow field of a value (nullable when the schema is a union with null).
        self.field = avro_arrow_field("value", self.reader, topic=topic, enums=enums)
        self.type: pa.DataType = self.field.type
        self.root: Node = compile_plan(self.writer, self.reader, topic=topic, enums=enums)

    def read(self, lanes: Lanes, failures: Failures) -> pa.Array:
        return self.root.read(lanes)


def datum_lanes(
    values: pa.Array | pa.ChunkedArray, failures: Failures
) -> tuple[Lanes, Mask | None]:
    """Lanes over the non-null values of a binary (or string) array, and the mask of
    those values (None when none is null)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    kind = values.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        values = values.view(pa.binary() if pa.types.is_string(kind) else pa.large_binary())
    elif not (pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
        values = values.cast(pa.binary())
    n = len(values)
    width = 8 if pa.types.is_large_binary(values.type) else 4
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], f"<i{width}", n + 1, width * values.offset).astype(np.int64)
    data = np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    if not len(data):
        data = np.zeros(1, np.uint8)  # the varint reads take a byte
    valid = None
    rows = np.arange(n, dtype=np.int64)
    if values.null_count:
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        rows = rows[valid]
    pos = offsets[:-1][rows] if valid is not None else offsets[:-1].copy()
    end = offsets[1:][rows] if valid is not None else offsets[1:].copy()
    return Lanes(data, pos, end, rows, failures), valid


def _parsed(schema: SchemaText | AvroType, topic: str) -> AvroType:
    if isinstance(schema, str | bytes):
        return parse_avro(schema, topic=topic)
    return schema


@functools.lru_cache(maxsize=256)
def avro_plan(
    writer: SchemaText,
    reader: SchemaText | None = None,
    *,
    topic: str = "",
    enums: EnumMode = "string",
) -> AvroPlan:
    """The :class:`AvroPlan` of a writer (and reader) schema, compiled once and cached."""
    return AvroPlan(writer, reader, topic=topic, enums=enums)
