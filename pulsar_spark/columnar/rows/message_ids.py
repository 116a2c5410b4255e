"""Message ids as a column of bytes: the ``MessageIdData`` protobuf the Java client's
``MessageId.toByteArray()`` (and the Python client's ``MessageId.serialize()``) give a
received message, for whole columns at once, batch sizes included (one id at a time,
positions only: :mod:`pulsar_spark.protocol.ids.serialized`).

The bytes are protobuf fields in number order, as Java's LightProto and C++'s protobuf
write them::

    1 ledgerId      varint, always
    2 entryId       varint, always
    3 partition     varint, when the id has one (>= 0)
    4 batch_index   varint, when the message is a batch item (!= -1)
    6 batch_size    varint, the item's batch's num_messages_in_batch (> 0)
    7 first_chunk_message_id   a chunked message's first chunk: ledgerId, entryId and
                    partition as above (the outer id is its last chunk's)

A row's ``messageId`` text (``ledger:entry:partition:batchIndex``) holds the first four;
the batch size and the first chunk are carried beside it by the batch the
:class:`~.builder.ArrowBatchBuilder` built, in its schema metadata
(:func:`with_id_parts`, read back by :func:`id_parts`): ``pulsar.batchSizes``, one
little-endian int32 a row (0: not batched; left out when no row is), and
``pulsar.firstChunks``, little-endian int64 triples (row, ledger, entry) of the chunked
rows (left out when none is). Batches made otherwise carry neither: their ids come out
without batch sizes.

:func:`id_bytes_column` lays every row's fields out side by side in a NumPy byte
matrix (a tag and as many varint bytes per field as its largest value needs; fields no
row has are left out), masks what a row does not write and flattens it: no Python step
per row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

__all__ = ["IdParts", "id_parts", "id_bytes_column", "parse_message_ids", "with_id_parts"]

#: Schema metadata keys of a built batch (see the module docstring).
BATCH_SIZES = b"pulsar.batchSizes"
FIRST_CHUNKS = b"pulsar.firstChunks"


@dataclass(frozen=True)
class IdParts:
    """Per row, what an id's text leaves out: its batch's size (0: not batched) and, for
    a chunked message, its first chunk's ledger and entry (-1: not chunked)."""

    batch_sizes: np.ndarray
    first_ledgers: np.ndarray
    first_entries: np.ndarray

    @classmethod
    def none(cls, rows: int) -> IdParts:
        """Ids without batch sizes or chunks."""
        minus = np.full(rows, -1, np.int64)
        return cls(np.zeros(rows, np.int64), minus, minus)


def with_id_parts(
    schema: pa.Schema, batch_sizes: np.ndarray, chunk_rows: np.ndarray, chunk_firsts: np.ndarray
) -> pa.Schema:
    """``schema`` carrying ``batch_sizes`` (per row) and the first chunks (``chunk_firsts``:
    one (ledger, entry) row per index of ``chunk_rows``) in its metadata."""
    metadata: dict[bytes, bytes] = {}
    if batch_sizes.any():
        metadata[BATCH_SIZES] = batch_sizes.astype("<i4").tobytes()
    if len(chunk_rows):
        triples = np.column_stack([chunk_rows, chunk_firsts]).astype("<i8")
        metadata[FIRST_CHUNKS] = triples.tobytes()
    return schema.with_metadata(metadata) if metadata else schema


def id_parts(schema: pa.Schema, rows: int) -> IdParts:
    """The :class:`IdParts` of a batch of ``rows`` rows with ``schema`` (from
    :func:`with_id_parts`; none when its metadata does not hold them)."""
    parts = IdParts.none(rows)
    metadata = schema.metadata or {}
    sizes = metadata.get(BATCH_SIZES)
    if sizes is not None and len(sizes) == 4 * rows:
        sized = np.frombuffer(sizes, "<i4").astype(np.int64)
        parts = IdParts(sized, parts.first_ledgers, parts.first_entries)
    chunks = metadata.get(FIRST_CHUNKS)
    if chunks:
        triples = np.frombuffer(chunks, "<i8").reshape(-1, 3)
        inside = (triples[:, 0] >= 0) & (triples[:, 0] < rows)
        triples = triples[inside]
        ledgers, entries = parts.first_ledgers.copy(), parts.first_entries.copy()
        ledgers[triples[:, 0]] = triples[:, 1]
        entries[triples[:, 0]] = triples[:, 2]
        parts = IdParts(parts.batch_sizes, ledgers, entries)
    return parts


def parse_message_ids(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``ledger:entry:partition:batchIndex`` texts as an (n, 4) int64 matrix."""
    import pyarrow.compute as pc  # (25 ms to load) StreamNative's layout only

    if isinstance(ids, pa.ChunkedArray):
        ids = ids.combine_chunks()
    parts = pc.split_pattern(ids, ":").flatten()
    numbers: np.ndarray = pc.cast(parts, pa.int64()).to_numpy(zero_copy_only=False)
    return numbers.reshape(-1, 4)


def _field(
    tag: int, values: np.ndarray, present: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A field's bytes per row (its tag, then its varint, as wide as the largest value
    needs), which of them a row writes, and its size per row; None when no row has it."""
    if not present.any():
        return None
    wide = np.where(present, values, 0).astype(np.uint64)
    width = max(1, (int(wide.max()).bit_length() + 6) // 7)
    columns = np.arange(width)
    groups = wide[:, None] >> (columns.astype(np.uint64) * np.uint64(7))
    used = np.maximum((groups != 0).sum(axis=1), 1)
    data = (groups & np.uint64(0x7F)).astype(np.uint8)
    data |= np.where((used - 1)[:, None] > columns, np.uint8(0x80), np.uint8(0))
    block = np.concatenate([np.full((len(wide), 1), tag, np.uint8), data], axis=1)
    mask = np.concatenate([present[:, None], (used[:, None] > columns) & present[:, None]], axis=1)
    return block, mask, mask.sum(axis=1)


def id_bytes_column(ids: np.ndarray, parts: IdParts) -> pa.BinaryArray:
    """Each row's ``MessageIdData`` bytes (see the module docstring) from its id
    (:func:`parse_message_ids`) and :class:`IdParts`."""
    n = len(ids)
    ledger, entry, partition, batch = (ids[:, i] for i in range(4))
    every = np.ones(n, np.bool_)
    chunked = parts.first_ledgers >= 0
    inner = [
        _field(0x08, parts.first_ledgers, chunked),
        _field(0x10, parts.first_entries, chunked),
        _field(0x18, partition, chunked & (partition >= 0)),
    ]
    inner_size = sum((f[2] for f in inner if f is not None), np.zeros(n, np.int64))
    found = [
        _field(0x08, ledger, every),
        _field(0x10, entry, every),
        _field(0x18, partition, partition >= 0),
        _field(0x20, batch, batch != -1),
        _field(0x30, parts.batch_sizes, (parts.batch_sizes > 0) & (batch != -1)),
        _field(0x3A, inner_size, chunked),  # the nested message's length (< 128: one byte)
        *inner,
    ]
    fields = [f for f in found if f is not None]
    if not fields:  # no rows
        return pa.array([], pa.binary())
    block = np.concatenate([f[0] for f in fields], axis=1)
    mask = np.concatenate([f[1] for f in fields], axis=1)
    sizes = sum(f[2] for f in fields)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(sizes, out=offsets[1:])
    data = block[mask]
    return pa.Array.from_buffers(
        pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data.tobytes())]
    )
