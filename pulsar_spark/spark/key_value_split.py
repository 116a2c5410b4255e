"""An adapter: KEY_VALUE INLINE payloads split into their key and value bytes, for the typed
read (the columnar layer encodes the layout, :mod:`~pulsar_spark.columnar.values.key_value`,
but has no reader of it yet).

An INLINE payload is ``int32 BE key length`` + key + ``int32 BE value length`` +
value, a length of -1 meaning null (the Java client's ``KeyValue.encode``).
The split is NumPy over every payload at once.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pulsar_spark.columnar import gather_binary
from pulsar_spark.columnar.arrays import Int64s, Mask

__all__ = ["split_inline"]


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
