"""Rows of an Arrow table as the items of Pulsar batch payloads, built column by column.

One item per row, byte for byte as :func:`.encode.encode_items` lays out a queued
message (protobuf's field-number order)::

    item = smm_size:u32  smm[smm_size]  payload
    smm  = properties(1)*  [partition_key(2)]  payload_size(3)  [event_time(5)]
           [partition_key_b64_encoded(6)]  [null_partition_key(10)]  sequence_id(8)
           [null_value(9)]

(null_partition_key: the null keys of a key column of SEPARATED KEY_VALUE keys,
:data:`.encode.SEPARATED_KEYS`; before field 8, as :mod:`.encode` places it.)

Every field is a piece (:mod:`pulsar_spark.columnar.pieces`) for all rows at once, and the
items lie one after another in one buffer (:class:`ItemBlock`), so a Pulsar
batch of consecutive rows is a slice of it. Rows whose headers (``smm_size``
and ``smm``) are equally long and whose values are equally long (fixed-size
records, the common case) are put together as a matrix, header columns then
value columns, in two NumPy copies per run of such rows; other rows go through
Arrow's ``take`` (:func:`pulsar_spark.columnar.pieces.join`). No step loops over rows in Python.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import Bytes, Int64s, Mask
from ..pieces import (
    Piece,
    base64_piece,
    binary_piece,
    constant,
    expand,
    fixed,
    group,
    join,
    varint_piece,
)
from .encode import ALLOWED_COLUMNS, NULL_KEY, InvalidRows, check_columns, separated_keys

__all__ = ["ItemBlock", "check_items", "columnar_rows", "item_block"]

#: Millisecond factors of a timestamp unit: (multiply, floor-divide).
_TO_MILLIS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
#: Most runs of equally shaped rows assembled as matrices before Arrow's take is cheaper.
_RUNS_PER_ROW = 1 / 256


@dataclass(slots=True)
class ItemBlock:
    """The items of ``n`` rows: row ``r`` is ``data[starts[r]:starts[r + 1]]``."""

    data: Bytes
    starts: Int64s

    @property
    def n(self) -> int:
        return len(self.starts) - 1


def _binaryish(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
    )


def columnar_rows(table: pa.Table | pa.RecordBatch) -> bool:
    """Whether :func:`item_block` takes the table's columns: a binary or string ``value``
    and ``key``, ``properties`` a map of strings, ``eventTime`` integers or timestamps
    (anything else goes the per-row way, :class:`.encode.Rows`, which says what is wrong).
    """
    schema = table.schema
    names = set(schema.names)
    if "value" not in names or not names <= ALLOWED_COLUMNS:
        return False
    for field in schema:
        kind = field.type
        if field.name in ("value", "key"):
            ok = _binaryish(kind)
        elif field.name == "properties":
            ok = pa.types.is_map(kind) and _binaryish(kind.key_type)
            ok = ok and _binaryish(kind.item_type)
        else:
            ok = pa.types.is_integer(kind) or pa.types.is_timestamp(kind)
        if not ok:
            return False
    return True


def _column(table: pa.Table | pa.RecordBatch, name: str) -> pa.Array:
    column = table.column(name)
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks)
    return column


def _valid(array: pa.Array) -> Mask | None:
    """Which rows are not null (None: all)."""
    if not array.null_count:
        return None
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), np.bool_)


def _varint(values: Int64s) -> Piece:
    return varint_piece(np.asarray(values, np.int64).view(np.uint64))


def _field(tag: bytes, body: Piece) -> list[Piece]:
    """A length-delimited field: tag, length, bytes."""
    return [constant(body.rows, tag), _varint(body.lens), body]


def _values(array: pa.Array) -> tuple[Piece, Mask | None]:
    """The payloads (empty for a tombstone) and which rows are tombstones (None: none)."""
    valid = _valid(array)
    if valid is not None:
        array = array.fill_null(b"" if pa.types.is_binary(array.type) else "")
    return binary_piece(array), None if valid is None else ~valid


def _key(array: pa.Array, n: int, separated: bool) -> tuple[list[Piece], list[Piece]]:
    """partition_key (2), and the flags: partition_key_b64_encoded (6) for binary keys,
    null_partition_key (10) for the null keys of ``separated`` (KEY_VALUE) keys."""
    valid = _valid(array)
    kept = array if valid is None else array.filter(pa.array(valid))
    text = binary_piece(kept)
    b64 = not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type))
    if b64:
        text = base64_piece(text)
    pieces = _field(b"\x12", text)
    flags = [constant(len(kept), b"\x30\x01")] if b64 else []
    if valid is not None:
        pieces = [expand(p, valid) for p in pieces]
        flags = [expand(p, valid) for p in flags]
        if separated:
            nulls = ~valid
            flags.append(expand(constant(int(nulls.sum()), NULL_KEY), nulls))
    return pieces, flags


def _properties(array: pa.Array, n: int) -> Piece:
    """properties (1): one KeyValue field per map entry, in the map's order.

    Raises:
        InvalidRows: a property whose value is null.
    """
    offsets = np.asarray(array.offsets, np.int64)
    lo, hi = int(offsets[0]), int(offsets[-1])
    keys, items = array.keys[lo:hi], array.items[lo:hi]
    offsets = offsets - lo
    valid = _valid(array)
    if valid is not None:  # a null map may still span entries: drop them
        lens = np.diff(offsets) * valid
        keep = np.repeat(valid, np.diff(offsets))
        keys, items = keys.filter(pa.array(keep)), items.filter(pa.array(keep))
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(lens, out=offsets[1:])
    if items.null_count:
        entry = int(np.flatnonzero(~np.asarray(items.is_valid().to_numpy(zero_copy_only=False)))[0])
        row = int(np.searchsorted(offsets, entry, side="right")) - 1
        msg = f"row {row}: property {keys[entry].as_py()!r} has a null value"
        raise InvalidRows(msg, row=row)
    entries = len(keys)
    key_field = _field(b"\x0a", binary_piece(keys))
    value_field = _field(b"\x12", binary_piece(items))
    pair = join([*key_field, *value_field], entries)
    return group(join(_field(b"\x0a", pair), entries), offsets)


def _event_times(array: pa.Array) -> Int64s:
    """Event times as epoch ms (0 for none).

    Raises:
        InvalidRows: a negative event time, naming the row.
    """
    kind = array.type
    if pa.types.is_timestamp(kind):
        times = pc.cast(array, pa.timestamp(kind.unit), safe=False).cast(pa.int64())
        times = times.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
        multiply, divide = _TO_MILLIS[kind.unit]
        times = times * multiply if multiply > 1 else np.floor_divide(times, divide)
    else:
        times = array.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64)
    if len(times) and int(times.min()) < 0:
        row = int(np.argmax(times < 0))
        msg = f"row {row}: event time {int(times[row])} is negative"
        raise InvalidRows(msg, row=row)
    return np.asarray(times, np.int64)


def _as_fixed(piece: Piece) -> Piece:
    """A piece whose rows are all equally long, as a matrix (others as they are)."""
    if piece.width is not None or not piece.rows:
        return piece
    width = int(piece.lens[0])
    if not bool((piece.lens == width).all()):
        return piece
    return fixed(np.asarray(piece.data).reshape(piece.rows, width))


def _sized(fields: list[Piece], n: int) -> list[Piece]:
    """``smm_size`` then the metadata fields, each field as a matrix where it can be."""
    smm = np.zeros(n, np.int64)
    for piece in fields:
        smm += piece.lens
    return [fixed(smm.astype(">u4").view(np.uint8).reshape(n, 4)), *map(_as_fixed, fields)]


def check_items(table: pa.Table | pa.RecordBatch) -> None:
    """Raise for what :func:`item_block` refuses in the values of a table
    :func:`columnar_rows` takes (a negative event time, a property with a null value),
    without building the items.

    Raises:
        InvalidRows: naming the row.
    """
    names = table.schema.names
    if "eventTime" in names:
        _event_times(_column(table, "eventTime"))
    if "properties" in names:
        column = _column(table, "properties")
        if column.items.null_count:  # maybe only under null maps: look closer
            _properties(column, int(table.num_rows))


def item_block(table: pa.Table | pa.RecordBatch, seqs: Int64s) -> ItemBlock:
    """The items of the table's rows, row ``r`` with sequence id ``seqs[r]``.

    Raises:
        InvalidRows: columns :func:`columnar_rows` refuses, a negative event time or a
            property with a null value (naming the row).
    """
    names = check_columns(table)
    n = int(table.num_rows)
    if len(seqs) != n:
        msg = f"{len(seqs)} sequence ids for {n} rows"
        raise ValueError(msg)
    value, tombstones = _values(_column(table, "value"))
    fields: list[Piece] = []
    if "properties" in names:
        fields.append(_properties(_column(table, "properties"), n))
    flags: list[Piece] = []
    if "key" in names:
        key_pieces, flags = _key(_column(table, "key"), n, separated_keys(table))
        fields += key_pieces
    fields += [constant(n, b"\x18"), _varint(value.lens)]
    if "eventTime" in names:
        times = _event_times(_column(table, "eventTime"))
        present = times > 0
        if present.all():
            fields += [constant(n, b"\x28"), _varint(times)]
        elif present.any():
            kept = times[present]
            tag = constant(len(kept), b"\x28")
            fields += [expand(tag, present), expand(_varint(kept), present)]
    fields += flags
    fields += [constant(n, b"\x40"), _varint(seqs)]
    if tombstones is not None and tombstones.any():
        fields.append(expand(constant(int(tombstones.sum()), b"\x48\x01"), tombstones))
    return _assemble(_sized(fields, n), value, n)


def _assemble(pieces: list[Piece], value: Piece, n: int) -> ItemBlock:
    """Each row's header pieces then its value, rows one after another."""
    lens = value.lens.copy()
    for piece in pieces:
        lens += piece.lens
    starts = np.zeros(n + 1, np.int64)
    np.cumsum(lens, out=starts[1:])
    if not n:
        return ItemBlock(np.zeros(0, np.uint8), starts)
    if all(p.matrix is not None for p in pieces):
        # Runs of rows where no piece changes length: each a matrix.
        change = np.zeros(n - 1, np.bool_)
        for piece in [*pieces, value]:
            if piece.width is None:
                change |= piece.lens[1:] != piece.lens[:-1]
        shape = np.flatnonzero(change) + 1
        if len(shape) <= max(8, n * _RUNS_PER_ROW):
            return ItemBlock(_runs(pieces, value, starts, [0, *shape.tolist(), n]), starts)
    both = join([join(pieces, n), value], n)
    return ItemBlock(np.asarray(both.data), starts)


def _runs(pieces: list[Piece], value: Piece, starts: Int64s, bounds: list[int]) -> Bytes:
    """The items of rows laid out alike between each two ``bounds``: piece after piece
    into the columns of a matrix of the run's rows, then the values."""
    data = np.empty(int(starts[-1]), np.uint8)
    values = np.asarray(value.data)
    value_at = np.zeros(len(value.lens) + 1, np.int64)
    np.cumsum(value.lens, out=value_at[1:])
    for a, b in itertools.pairwise(bounds):
        rows = data[starts[a] : starts[b]].reshape(b - a, -1)
        at = 0
        for piece in pieces:
            width = int(piece.lens[a])
            if width:
                rows[:, at : at + width] = piece.matrix[a:b, :width]  # type: ignore[index]
                at += width
        if at < rows.shape[1]:
            first = int(value_at[a])
            rows[:, at:] = values[first : int(value_at[b])].reshape(b - a, -1)
    return data
