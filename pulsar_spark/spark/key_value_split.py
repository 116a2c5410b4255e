"""Adapters: a decoder of JSON values and the KEY_VALUE INLINE split, for the typed read
until the columnar layer has its own.

Every decoder takes a binary Arrow array of values (null: a ``null_value``
message, which stays null) and ``collect``: False raises
:class:`~pulsar_spark.columnar.schema_errors.SchemaDecodeError` for the first
value that does not decode (its ``row`` is the index in the array); True
makes such values null and returns, beside the column, a string array of
error texts (null where the value decoded).
"""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..columnar.arrays import Int64s, Mask
from ..columnar.gather import gather_binary
from ..columnar.schema_errors import SchemaDecodeError

__all__ = ["Decoded", "decode_json", "split_inline"]

#: A decoded column and, when collecting, the error text of each row (null: decoded).
Decoded = tuple[pa.Array, pa.Array | None]


class _Rows:
    """Offsets, lengths and validity of a binary array's values."""

    def __init__(self, values: pa.Array) -> None:
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not pa.types.is_binary(values.type):
            values = values.cast(pa.binary())
        self.values = values
        n = len(values)
        buffers = values.buffers()
        offsets = np.frombuffer(buffers[1], np.int32, n + 1, 4 * values.offset).astype(np.int64)
        self.starts: Int64s = offsets[:-1]
        self.lens: Int64s = offsets[1:] - offsets[:-1]
        self.data = (
            np.frombuffer(buffers[2], np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
        )
        self.valid: Mask = (
            values.is_valid().to_numpy(zero_copy_only=False)
            if values.null_count
            else np.ones(n, bool)
        )


def _fail_or_collect(
    column: pa.Array,
    bad: Mask,
    texts: list[str | None] | None,
    reason: str,
    collect: bool,
    field: str = "",
) -> Decoded:
    """The column with the ``bad`` rows null (collect) or the first one's error (raise)."""
    if not bad.any():
        return column, (pa.nulls(len(column), pa.string()) if collect else None)
    rows = np.flatnonzero(bad)
    if not collect:
        text = texts[rows[0]] if texts else None
        raise SchemaDecodeError(text or reason, row=int(rows[0]), field=field)
    errors: list[str | None] = [None] * len(column)
    for row in rows.tolist():
        errors[row] = (texts[row] if texts else None) or reason
    keep = pa.array(~bad & column.is_valid().to_numpy(zero_copy_only=False))
    return pc.if_else(keep, column, pa.nulls(len(column), column.type)), pa.array(
        errors, pa.string()
    )


def decode_json(dtype: pa.DataType, values: pa.Array, *, collect: bool = False) -> Decoded:
    """JSON documents (one per value) as ``dtype`` (a struct: the documents are objects),
    through Arrow's JSON reader; fields not in ``dtype`` are ignored, missing ones null."""
    rows = _Rows(values)
    if not pa.types.is_struct(dtype):
        return _json_each(dtype, rows, collect)
    ok = rows.valid & (rows.lens > 0)
    try:
        table = _read_json(dtype, rows, ok)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        return _json_each(dtype, rows, collect)
    column = pa.StructArray.from_arrays(
        [table.column(f.name).combine_chunks() for f in dtype], fields=list(dtype)
    )
    index = np.cumsum(ok) - 1
    index[~ok] = 0
    full = column.take(pa.array(index, mask=~ok)) if not ok.all() else column
    bad = rows.valid & ~ok
    return _fail_or_collect(full, bad, None, "an empty value is not a JSON document", collect)


def _read_json(dtype: pa.DataType, rows: _Rows, ok: Mask) -> pa.Table:
    from pyarrow import json as pj

    text = gather_binary(rows.data, rows.starts[ok], rows.lens[ok])
    # A document's own line breaks (JSON allows them only between tokens) become blanks.
    body = bytes(np.frombuffer(text.buffers()[2] or b"", np.uint8).copy().tobytes())
    body = body.replace(b"\r", b" ").replace(b"\n", b" ")
    starts = np.frombuffer(text.buffers()[1], np.int32)[: len(text) + 1]
    lines = b"\n".join(
        body[a:b] for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True)
    )
    schema = pa.schema(list(dtype))
    table = pj.read_json(
        io.BytesIO(lines),
        read_options=pj.ReadOptions(use_threads=False, block_size=max(len(lines) + 1, 1 << 20)),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )
    if table.num_rows != int(ok.sum()):
        msg = "a value holds more than one JSON document"
        raise ValueError(msg)
    return table


def _json_each(dtype: pa.DataType, rows: _Rows, collect: bool) -> Decoded:
    """One value at a time (after a batch failed): the error of each value that fails."""
    out: list[object] = []
    texts: list[str | None] = []
    for value in rows.values.to_pylist():
        if value is None:
            out.append(None)
            texts.append(None)
            continue
        try:
            document = json.loads(value)
            out.append(pa.array([document], dtype)[0].as_py())
            texts.append(None)
        except (ValueError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            out.append(None)
            texts.append(f"not a JSON value of type {dtype}: {exc}")
    bad = np.array([t is not None for t in texts], bool)
    column = pa.array(out, dtype)
    return _fail_or_collect(column, bad, texts, "", collect)


def split_inline(values: pa.Array) -> tuple[pa.Array, pa.Array, Mask]:
    """The key and value bytes of KEY_VALUE INLINE payloads (``int32 BE length`` + bytes,
    twice; length -1: null), and the mask of payloads that are not laid out so."""
    rows = _Rows(values)
    n = len(rows.lens)
    data = rows.data
    bad = np.zeros(n, bool)
    parts = []
    at = rows.starts.copy()
    end = rows.starts + rows.lens
    for _ in range(2):
        room = rows.valid & ~bad & (end - at >= 4)
        bad |= rows.valid & ~room
        length = np.zeros(n, np.int64)
        if room.any():
            index = at[room][:, None] + np.arange(4)
            length[room] = data[index].copy().view(">i4")[:, 0]
        null = room & (length == -1)
        bad |= room & ((length < -1) | (at + 4 + np.maximum(length, 0) > end))
        good = rows.valid & ~bad
        size = np.where(good & ~null, length, 0)
        parts.append((at + 4, size, good & ~null))
        at = at + 4 + size
    keys, vals = (
        gather_binary(data if len(data) else np.zeros(1, np.uint8), s, z, m) for s, z, m in parts
    )
    return keys, vals, bad
