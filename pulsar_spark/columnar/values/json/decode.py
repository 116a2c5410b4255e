"""Values of JSON schemas (one JSON object per message, described by an Avro schema)
decoded into Arrow columns with Arrow's JSON reader.

Pulsar's JSON schema carries an Avro schema of the JSON values (the Java
client writes them with Jackson, the Python client with ``json.dumps``):
numbers for ints, longs, floats, doubles, decimals and the date/time logical
types (their underlying number: days, milliseconds...), strings for strings,
enums and uuids, base64 strings for bytes, objects for records and maps.

The values are joined into one newline-separated buffer and parsed by
``pyarrow.json`` with an explicit schema (the numbers' storage types), then
cast to the mapped types. Objects may span lines (the Python client
pretty-prints them). A value that is not one JSON object of that schema makes
the parse fail or yield another number of rows: the values are then split in
halves until the bad rows are found, so the error names the row. Schemas with
maps or bytes (which Arrow's reader cannot build) are decoded per value with
Python's ``json`` module instead: correct, but not columnar.

Dates, times and timestamps written as ISO-8601 text (producers that format
them themselves), and floats that JSON has no number for (the Java client
writes NaN and infinities as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"``; the Python client as the bare tokens ``NaN``...) make the
columnar parse fail: such a batch is decoded per value in Python, where
:func:`.iso_time.iso_ticks` reads the times. The Java client's ``java.time``
fields (Jackson writes an ``Instant`` as decimal seconds, a ``LocalDate`` as
``[y, m, d]``...), which our encoder writes too, are parsed columnar in a
second layout (:mod:`.jackson`; the plan tries first the layout that read
its last batch); a batch that fits neither layout (forms mixed in a field,
plain integers among decimal seconds) goes per value, where
:func:`.iso_time.jackson_ticks` reads them.

Fields missing from a value read as null (Jackson omits nulls), so every
field of the result is nullable; fields the schema does not name are ignored.
"""

from __future__ import annotations

import base64
import binascii
import functools
import io
import json
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from ...arrays import Ints, Mask
from ..avro.arrow_types import EnumMode, avro_arrow_type
from ..avro.lanes import expand
from ..avro.schema import AvroType, parse_avro
from ..errors import SchemaDecodeError
from .iso_time import iso_ticks, jackson_ticks
from .jackson import has_jackson, jackson_storage, number_storage, read_jackson

__all__ = ["JsonPlan", "decode_json", "nullable_type"]


class JsonPlan:
    """How to decode JSON values of a JSON schema (its data: an Avro schema as JSON text).

    Raises:
        UnmappableSchema: a schema that is not valid or has no Arrow type.
    """

    def __init__(
        self,
        schema: str | bytes | AvroType | pa.DataType,
        *,
        topic: str = "",
        enums: EnumMode = "string",
    ) -> None:
        self.topic = topic
        if isinstance(schema, pa.DataType):
            mapped = schema
        else:
            node = parse_avro(schema, topic=topic) if isinstance(schema, str | bytes) else schema
            mapped = avro_arrow_type(node, topic=topic, enums=enums)
        #: The Arrow type of the values: the mapped type, every field nullable.
        self.type: pa.DataType = nullable_type(mapped)
        self.columnar = pa.types.is_struct(self.type) and _arrow_readable(self.type)
        if self.columnar:
            self.parse_schema = pa.schema(list(number_storage(self.type)))
        #: Whether dates and times may come in Jackson's forms (a second columnar layout).
        self.jackson = self.columnar and has_jackson(self.type)
        if self.jackson:
            self.jackson_schema = pa.schema(list(jackson_storage(self.type)))
        self._jackson_first = False  # whether the last batch read in Jackson's layout
        #: Whether the type has fields whose values may come as text or as tokens Arrow's
        #: reader refuses: dates, times, timestamps (ISO-8601), floats (NaN, Infinity).
        self.lenient = _has_lenient(self.type)

    def decode(self, values: pa.Array | pa.ChunkedArray) -> pa.Array:
        """One struct per JSON object (null where ``values`` is null).

        Raises:
            SchemaDecodeError: a value that is not a JSON object of the schema.
        """
        return self._decode(values, collect=False)[0]

    def decode_collect(self, values: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, pa.Array]:
        """Like :meth:`decode`, but a value that does not decode comes out null, and the
        second column holds its error text (null for the rows that decoded)."""
        column, errors = self._decode(values, collect=True)
        texts: list[str | None] = [None] * len(column)
        for row, text in errors.items():
            texts[row] = text
        return column, pa.array(texts, pa.string())

    def _decode(
        self, values: pa.Array | pa.ChunkedArray, *, collect: bool
    ) -> tuple[pa.Array, dict[int, str]]:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        if not pa.types.is_binary(values.type):
            values = values.cast(pa.binary())
        valid: Mask = (
            values.is_valid().to_numpy(zero_copy_only=False)
            if values.null_count
            else np.ones(len(values), bool)
        )
        rows = np.flatnonzero(valid)
        present = values.filter(pa.array(valid)) if values.null_count else values
        errors: dict[int, str] = {}
        if self.columnar:
            column = self._arrow(present, rows, errors, collect)
        else:
            column = self._python(present, rows, errors, collect)
        column = expand(column, valid)
        if errors:
            bad = np.zeros(len(values), bool)
            bad[list(errors)] = True
            column = column.take(pa.array(np.arange(len(values)), mask=bad))
        return column, errors

    def _fail(self, row: int, reason: str, errors: dict[int, str], collect: bool) -> None:
        if not collect:
            raise SchemaDecodeError(reason, row=row, topic=self.topic)
        errors[row] = reason

    # -- Arrow's JSON reader -------------------------------------------------------------

    def _arrow(
        self, values: pa.Array, rows: Ints, errors: dict[int, str], collect: bool
    ) -> pa.Array:
        parsed = self._fast(values)
        if parsed is not None:
            return parsed
        if self.lenient:  # ISO-8601 times, NaN or Infinity, perhaps: each value in Python
            return self._python(values, rows, errors, collect)
        # Find the bad values: halves until each part parses or is one value.
        good = np.ones(len(values), bool)
        stack = [(0, len(values))]
        while stack:
            lo, hi = stack.pop()
            if self._parse(values.slice(lo, hi - lo)) is not None:
                continue
            if hi - lo == 1:
                good[lo] = False
                self._fail(int(rows[lo]), _why(values[lo].as_py()), errors, collect)
                continue
            mid = (lo + hi) // 2
            stack += [(mid, hi), (lo, mid)]  # the first half first: lowest row first
        column = self._parse(values.filter(pa.array(good)))
        assert column is not None
        return expand(column, good)

    def _fast(self, values: pa.Array) -> pa.Array | None:
        """The values parsed in the numbers' layout or Jackson's, or None."""
        if not self.jackson:
            return self._parse(values)
        first, second = (self._jackson, self._parse)[:: 1 if self._jackson_first else -1]
        parsed = first(values)
        if parsed is None:
            parsed = second(values)
            if parsed is not None:
                self._jackson_first = not self._jackson_first
        return parsed

    def _jackson(self, values: pa.Array) -> pa.Array | None:
        """The values parsed with dates and times in Jackson's forms, or None."""
        if not len(values):
            return pa.array([], self.type)
        storage = self._read(values, self.jackson_schema)
        if storage is None:
            return None
        return read_jackson(storage, self.type, values)

    def _parse(self, values: pa.Array) -> pa.Array | None:
        """The values parsed (None when they do not parse into as many rows)."""
        if not len(values):
            return pa.array([], self.type)
        storage = self._read(values, self.parse_schema)
        return None if storage is None else storage.cast(self.type)

    def _read(self, values: pa.Array, schema: pa.Schema) -> pa.StructArray | None:
        """The values read in ``schema``'s layout (None when they do not parse into as
        many rows)."""
        offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1, 4 * values.offset)
        if not np.diff(offsets).all():  # an empty value would vanish
            return None
        one_list = pa.ListArray.from_arrays(pa.array([0, len(values)], pa.int32()), values)
        buffer = pc.binary_join(one_list, b"\n")[0].as_buffer()
        options = pj.ParseOptions(
            explicit_schema=schema,
            unexpected_field_behavior="ignore",
            newlines_in_values=True,
        )
        size = max(1 << 20, min(len(buffer) + 1, 2**31 - 1))  # one block: one thread
        read = pj.ReadOptions(use_threads=False, block_size=size)
        try:
            table = pj.read_json(io.BytesIO(buffer), read_options=read, parse_options=options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(values):
            return None
        return pa.StructArray.from_arrays(
            [table.column(i).combine_chunks() for i in range(table.num_columns)],
            fields=list(schema),
        )

    # -- Python's json (maps, bytes) -----------------------------------------------------

    def _python(
        self, values: pa.Array, rows: Ints, errors: dict[int, str], collect: bool
    ) -> pa.Array:
        out: list[Any] = []
        for index, raw in enumerate(values.to_pylist()):
            value, exc = _loaded(raw, self.type)
            if exc is not None:
                self._fail(int(rows[index]), _why(raw, exc), errors, collect)
            out.append(value)
        try:
            return pa.array(out, self.type)
        except _REFUSED:
            pass
        for index, value in enumerate(out):  # error path: the values Arrow refuses
            exc = _refused(value, self.type)
            if exc is not None:
                self._fail(int(rows[index]), _why(values[index].as_py(), exc), errors, collect)
                out[index] = None
        return pa.array(out, self.type)


_REFUSED = (pa.ArrowException, ValueError, TypeError, ArithmeticError)


def _loaded(raw: bytes, dtype: pa.DataType) -> tuple[Any, Exception | None]:
    try:
        return _convert(json.loads(raw, parse_float=Decimal), dtype), None
    except (ValueError, TypeError, ArithmeticError) as exc:
        return None, exc


def _refused(value: Any, dtype: pa.DataType) -> Exception | None:
    try:
        pa.array([value], dtype)
    except _REFUSED as exc:
        return exc
    return None


def decode_json(
    dtype: pa.DataType, values: pa.Array, *, topic: str = "", collect: bool = False
) -> tuple[pa.Array, pa.Array | None]:
    """JSON objects (one per value) as ``dtype`` (the schema mapping's type of a JSON
    schema), and with ``collect`` the error text of each row (else None); the plan of a
    type is made once.

    Raises:
        SchemaDecodeError: a value that does not decode (without ``collect``).
    """
    plan = _plan_of(dtype, topic)
    if collect:
        column, errors = plan.decode_collect(values)
    else:
        column, errors = plan.decode(values), None
    return (column if column.type == dtype else _retyped(column, dtype)), errors


def _retyped(column: pa.Array, dtype: pa.DataType) -> pa.Array:
    """``column`` as ``dtype``, which differs from its type in nullability flags only."""
    mask = column.is_null() if column.null_count else None
    if pa.types.is_struct(dtype):
        children = [_retyped(column.field(i), f.type) for i, f in enumerate(dtype)]
        return pa.StructArray.from_arrays(children, fields=list(dtype), mask=mask)
    if pa.types.is_list(dtype):
        values = _retyped(column.values, dtype.value_type)
        return pa.ListArray.from_arrays(column.offsets, values, type=dtype, mask=mask)
    if pa.types.is_map(dtype):
        items = _retyped(column.items, dtype.item_type)
        return pa.MapArray.from_arrays(column.offsets, column.keys, items, type=dtype, mask=mask)
    return column


@functools.lru_cache(maxsize=256)
def _plan_of(dtype: pa.DataType, topic: str) -> JsonPlan:
    return JsonPlan(dtype, topic=topic)


def nullable_type(dtype: pa.DataType) -> pa.DataType:
    """``dtype`` with every struct field, list item and map value nullable."""
    if pa.types.is_struct(dtype):
        return pa.struct([pa.field(f.name, nullable_type(f.type)) for f in dtype])
    if pa.types.is_list(dtype):
        return pa.list_(pa.field(dtype.value_field.name, nullable_type(dtype.value_type)))
    if pa.types.is_map(dtype):
        return pa.map_(dtype.key_type, nullable_type(dtype.item_type))
    return dtype


def _arrow_readable(dtype: pa.DataType) -> bool:
    """Whether Arrow's JSON reader can build the type (no maps, no base64 bytes, no lists
    of nulls)."""
    if pa.types.is_map(dtype) or pa.types.is_binary(dtype):
        return False
    if pa.types.is_struct(dtype):
        return all(_arrow_readable(f.type) for f in dtype)
    if pa.types.is_list(dtype):  # (Arrow 26 builds broken lists of nulls)
        return not pa.types.is_null(dtype.value_type) and _arrow_readable(dtype.value_type)
    return True


def _has_lenient(dtype: pa.DataType) -> bool:
    if pa.types.is_struct(dtype):
        return any(_has_lenient(f.type) for f in dtype)
    if pa.types.is_list(dtype):
        return _has_lenient(dtype.value_type)
    if pa.types.is_map(dtype):
        return _has_lenient(dtype.item_type)
    return bool(pa.types.is_temporal(dtype) or pa.types.is_floating(dtype))


#: How Jackson writes the floats JSON has no numbers for (Java's JSON schema).
_FLOAT_TEXTS = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _why(raw: bytes | None, exc: Exception | None = None) -> str:
    """Why one value does not decode."""
    try:
        document = json.loads(raw or b"")
    except ValueError as error:
        return f"not JSON: {error}"
    if not isinstance(document, dict):
        return f"a JSON {type(document).__name__} where an object is expected"
    if exc is not None:
        return f"a JSON object that does not fit the schema: {exc}"
    return "a JSON object that does not fit the schema"


def _convert(value: Any, dtype: pa.DataType) -> Any:
    """A parsed JSON value as the Python value Arrow builds ``dtype`` from."""
    if value is None:
        return None
    if pa.types.is_struct(dtype):
        if not isinstance(value, dict):
            msg = f"a JSON {type(value).__name__} for a record"
            raise TypeError(msg)
        return {f.name: _convert(value.get(f.name), f.type) for f in dtype}
    if pa.types.is_map(dtype):
        if not isinstance(value, dict):
            msg = f"a JSON {type(value).__name__} for a map"
            raise TypeError(msg)
        return [(k, _convert(v, dtype.item_type)) for k, v in value.items()]
    if pa.types.is_list(dtype):
        if not isinstance(value, list):
            msg = f"a JSON {type(value).__name__} for an array"
            raise TypeError(msg)
        return [_convert(v, dtype.value_type) for v in value]
    if pa.types.is_binary(dtype):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError):
            msg = "bytes that are not base64 text"
            raise ValueError(msg) from None
    if isinstance(value, str) and pa.types.is_temporal(dtype):
        return iso_ticks(value, dtype)
    if pa.types.is_temporal(dtype) and isinstance(value, list | Decimal):
        ticks = jackson_ticks(value, dtype)
        if ticks is not None:
            return ticks
        if isinstance(value, list):
            msg = f"an array that is not a date or time of {dtype} as Jackson writes them: {value}"
            raise ValueError(msg)
    if isinstance(value, str) and pa.types.is_floating(dtype) and value in _FLOAT_TEXTS:
        return _FLOAT_TEXTS[value]
    if isinstance(value, bool) != pa.types.is_boolean(dtype):
        msg = f"a JSON {type(value).__name__} for {dtype}"
        raise TypeError(msg)
    if pa.types.is_decimal(dtype) and isinstance(value, int):
        return Decimal(value)
    if pa.types.is_floating(dtype) and isinstance(value, Decimal):
        return float(value)  # numbers with a fraction parse as Decimal (exact for decimals)
    return value
