"""Arrow values encoded as JSON documents (Pulsar's JSON schema), one UTF-8 payload per row,
built column by column with pyarrow.compute and NumPy (no Python step per row).

::

    enc = json_encoder(batch_type)               # schema derived: the Avro schema of the type
    enc = json_encoder(batch_type, topic_schema) # the topic's (an Avro schema, as Pulsar's
                                                 # JSON schema data is): SchemaMismatch if unfit
    payloads = enc.encode(batch)                 # binary array, null where the row is null

A record is a compact object (``{"a":1,"b":"x"}``) with its fields in the
schema's order; null fields are left out, as Java's ``JSONSchema`` (Jackson,
``NON_NULL``) leaves them, and so are schema fields the data lacks (readers
take their defaults). Arrays and maps keep null items as ``null``. Values
are as the Java client's JSON schema (Jackson) writes the Java types Pulsar's
reflection maps to the schema's types, so a Java consumer with
``Schema.JSON(Pojo.class)`` reads them: dates, times and timestamps in
Jackson's ``java.time`` forms (:mod:`.encode_time`: an ``Instant`` as
decimal seconds, a ``LocalDate`` as ``[y,m,d]``...), decimals as JSON
numbers, enums as their symbol, bytes and fixed as Base64 strings. Which Arrow types fit
which schema types is :mod:`pulsar_spark.columnar.values.avro.encode_fit`'s table.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from ...arrays import list_parts, valid_mask
from ...pieces import Piece, binary_piece, choice, constant, expand, group, join, to_arrow
from ..avro.encode import Values, value_array, writer_schema
from ..avro.encode_fit import fit_encoder
from ..avro.encode_nodes import (
    BoolEnc,
    BytesEnc,
    DecimalEnc,
    Enc,
    EnumEnc,
    FixedEnc,
    FloatEnc,
    LongEnc,
)
from ..avro.schema import AvroType, Record, Union
from ..encode_errors import Misfit, SchemaMismatch
from .encode_text import base64_text, bool_text, float_text, integer_text, string_text
from .encode_time import time_text

__all__ = ["JsonEncoder", "encode_json", "json_encoder"]

_Text = Callable[[pa.Array], list[Piece]]


class _Json:
    """The JSON text of a column without nulls (its parent handles them)."""

    def pieces(self, array: pa.Array) -> list[Piece]:
        raise NotImplementedError


class _Scalar(_Json):
    def __init__(self, text: _Text) -> None:
        self.text = text

    def pieces(self, array: pa.Array) -> list[Piece]:
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        return self.text(array)


class _Null(_Json):
    def pieces(self, array: pa.Array) -> list[Piece]:
        return [constant(len(array), b"null")]


def _items(enc: _Json, array: pa.Array) -> list[Piece]:
    """Items of an array or map: null ones as ``null``."""
    if not array.null_count:
        return enc.pieces(array)
    valid = valid_mask(array)
    inner = enc.pieces(array.filter(pa.array(valid))) if valid.any() else []
    return [choice((b"null", b""), valid.astype(np.int64)), *(expand(p, valid) for p in inner)]


class _Record(_Json):
    def __init__(self, fields: Sequence[tuple[int, bytes, _Json]]) -> None:
        self.fields = list(fields)

    def pieces(self, array: pa.Array) -> list[Piece]:
        rows = len(array)
        if pa.types.is_dictionary(array.type):
            array = array.dictionary_decode()
        out = [constant(rows, b"{")]
        before = np.zeros(rows, bool)  # whether a field was written before, per row
        for index, key, enc in self.fields:
            child = array.field(index)
            if child.null_count == rows:
                continue
            comma = (key, b"," + key, b"")
            if child.null_count == 0:
                if before.all() or not before.any():
                    out.append(constant(rows, comma[int(before.all()) if rows else 0]))
                else:
                    out.append(choice(comma[:2], before.astype(np.int64)))
                out += enc.pieces(child)
                before[:] = True
                continue
            valid = valid_mask(child)
            out.append(choice(comma, np.where(valid, before.astype(np.int64), 2)))
            out += [expand(p, valid) for p in enc.pieces(child.filter(pa.array(valid)))]
            before |= valid
        out.append(constant(rows, b"}"))
        return out


def _listed(rows: int, offsets: np.ndarray, items: list[Piece], ends: bytes) -> list[Piece]:
    """Items joined with commas, grouped into their rows between ``ends``."""
    count = int(offsets[-1])
    first = np.zeros(count, np.int64)
    starts = offsets[:-1][np.diff(offsets) > 0]
    first[starts] = 1
    body = group(join([choice((b",", b""), first), *items], count), offsets)
    return [constant(rows, ends[:1]), body, constant(rows, ends[1:])]


class _List(_Json):
    def __init__(self, items: _Json) -> None:
        self.items = items

    def pieces(self, array: pa.Array) -> list[Piece]:
        offsets, elements = list_parts(array)
        return _listed(len(array), offsets, _items(self.items, elements), b"[]")


class _Map(_Json):
    def __init__(self, values: _Json) -> None:
        self.values = values

    def pieces(self, array: pa.Array) -> list[Piece]:
        offsets, entries = list_parts(array)
        keys = entries.field(0)
        if pa.types.is_dictionary(keys.type):
            keys = keys.dictionary_decode()
        colon = constant(len(entries), b":")
        items = [*string_text(keys), colon, *_items(self.values, entries.field(1))]
        return _listed(len(array), offsets, items, b"{}")


def _leaf(enc: Enc, node: AvroType) -> _Text:
    """The text of a scalar, from the Avro encoder that checks and converts it."""
    if isinstance(enc, LongEnc):
        temporal = time_text(node.logical)
        if temporal is not None:
            return lambda a: temporal(enc.convert(a), enc.path)
        return lambda a: [integer_text(enc.convert(a))]
    if isinstance(enc, FloatEnc):
        kind = pa.float32() if enc.dtype.itemsize == 4 else pa.float64()
        return lambda a: float_text(a, kind)
    if isinstance(enc, BoolEnc):
        return bool_text
    if isinstance(enc, DecimalEnc):
        return lambda a: [binary_piece(a.cast(enc.target).cast(pa.string()))]
    if isinstance(enc, EnumEnc | FixedEnc):
        text = string_text if isinstance(enc, EnumEnc) else base64_text

        def checked(array: pa.Array) -> list[Piece]:
            enc.encode(array)  # raises for a symbol the enum lacks, a size not the fixed's
            return text(array)

        return checked
    if isinstance(enc, BytesEnc) and node.kind == "string":
        return string_text
    return base64_text


def _compile(dtype: pa.DataType, node: AvroType, path: str) -> _Json:
    value_type = dtype.value_type if pa.types.is_dictionary(dtype) else dtype
    if isinstance(node, Union):
        others = [b for b in node.branches if b.kind != "null"]
        if pa.types.is_null(value_type) or not others:
            return _Null()
        for branch in others:
            scratch: list[Misfit] = []
            fit_encoder(dtype, branch, scratch, path)
            if not scratch:
                return _compile(dtype, branch, path)
    if pa.types.is_null(value_type) or node.kind == "null":
        return _Null()
    if isinstance(node, Record):
        names = [value_type.field(i).name for i in range(value_type.num_fields)]
        fields = [
            (
                names.index(f.name),
                json.dumps(f.name, ensure_ascii=False).encode() + b":",
                _compile(
                    value_type.field(names.index(f.name)).type,
                    f.type,
                    f"{path}.{f.name}" if path else f.name,
                ),
            )
            for f in node.fields
            if f.name in names
        ]
        return _Record(fields)
    if node.kind == "array":
        return _List(_compile(value_type.value_type, node.items, path + "[]"))  # type: ignore[union-attr]
    if node.kind == "map":
        return _Map(_compile(value_type.item_type, node.values, path + "{}"))  # type: ignore[union-attr]
    misfits: list[Misfit] = []
    return _Scalar(_leaf(fit_encoder(dtype, node, misfits, path), node))


class JsonEncoder:
    """Values of one Arrow type encoded as JSON documents described by an Avro schema.

    Args:
        dtype: the values' Arrow type.
        writer: the topic's schema data (Avro schema JSON); None derives it from ``dtype``.
        topic: named in errors.

    Raises:
        SchemaMismatch: ``dtype`` does not fit ``writer``, naming every field at fault.
        UnmappableSchema: ``writer`` is not an Avro schema, or ``dtype`` has no Avro type.
    """

    def __init__(
        self, dtype: pa.DataType, writer: str | bytes | object | None = None, *, topic: str = ""
    ) -> None:
        self.dtype = dtype
        self.topic = topic
        #: The schema (Avro schema JSON text, as the JSON SchemaInfo's data), and parsed.
        self.schema, self.node = writer_schema(dtype, writer, topic=topic)
        self.root = self._fit(dtype)
        self._others: dict[pa.DataType, _Json] = {}

    def _fit(self, dtype: pa.DataType) -> _Json:
        misfits: list[Misfit] = []
        fit_encoder(dtype, self.node, misfits)
        if misfits:
            raise SchemaMismatch.of(misfits, topic=self.topic, schema="JSON")
        return _compile(dtype, self.node, "")

    def encode(self, values: Values) -> pa.Array:
        """One UTF-8 JSON document per row: a binary array, null where the value is null.

        Raises:
            SchemaMismatch: values the schema cannot hold (an unknown enum symbol, a
                decimal that does not fit...), naming the field; values of a type that
                does not fit (another type than the encoder's is checked first).
        """
        array = value_array(values)
        root = self.root
        if array.type != self.dtype:  # another nullability, say: checked again
            if array.type not in self._others:
                self._others[array.type] = self._fit(array.type)
            root = self._others[array.type]
        rows = len(array)
        valid = valid_mask(array)
        try:
            if array.null_count:
                kept = array.filter(pa.array(valid))
                pieces = [expand(p, valid) for p in root.pieces(kept)]
            else:
                pieces = root.pieces(array)
        except SchemaMismatch as exc:
            raise SchemaMismatch(exc.reason, topic=self.topic, field=exc.field) from None
        return to_arrow(join(pieces, rows), valid if array.null_count else None)


@functools.lru_cache(maxsize=64)
def json_encoder(dtype: pa.DataType, writer: str | None = None, *, topic: str = "") -> JsonEncoder:
    """The :class:`JsonEncoder` of an Arrow type and schema text (cached)."""
    return JsonEncoder(dtype, writer, topic=topic)


def encode_json(values: Values, writer: str | None = None, *, topic: str = "") -> pa.Array:
    """``json_encoder(value_type(values), writer).encode(values)``."""
    array = value_array(values)
    return json_encoder(array.type, writer, topic=topic).encode(array)
