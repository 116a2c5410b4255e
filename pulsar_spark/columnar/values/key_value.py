"""KEY_VALUE payloads, columnar, both ways: the encoded halves laid out as INLINE (both
halves in the payload) or SEPARATED (the key in the message key as Base64, the value as
the payload), and INLINE payloads split back into their halves for a typed read.

::

    INLINE      int32 BE len(key) + key + int32 BE len(value) + value   (-1 and no bytes
                for a null half; a row is never null as a whole)
    SEPARATED   payload = the value (null: null_value); partition_key = Base64 of the
                key, with partition_key_b64_encoded (null key: no partition key)

The halves are binary arrays of payloads (null where the half is null), as
the other encoders make them, each with its own schema; :func:`split_inline`
gives them back from INLINE payloads (NumPy over every payload at once).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..arrays import Int64s, Mask, valid_mask
from ..gather import gather_binary
from ..pieces import Piece, base64_piece, binary_piece, expand, fixed, join, to_arrow

__all__ = ["inline_payloads", "separated_keys", "split_inline"]


def _half(array: pa.Array) -> tuple[Piece, Piece]:
    """The length prefix (-1 where null) and the bytes of one half."""
    valid = valid_mask(array)
    kept = array.filter(pa.array(valid)) if array.null_count else array
    body = expand(binary_piece(kept), valid) if array.null_count else binary_piece(kept)
    lens = np.where(valid, body.lens, -1).astype(">i4")
    return fixed(lens.view(np.uint8).reshape(-1, 4)), body


def inline_payloads(keys: pa.Array, values: pa.Array) -> pa.Array:
    """INLINE KEY_VALUE payloads of encoded keys and values (binary arrays of equal length).

    Raises:
        ValueError: arrays of different lengths.
    """
    if len(keys) != len(values):
        msg = f"{len(keys)} keys but {len(values)} values"
        raise ValueError(msg)
    key_len, key = _half(keys)
    value_len, value = _half(values)
    return to_arrow(join([key_len, key, value_len, value], len(keys)))


def separated_keys(keys: pa.Array) -> pa.Array:
    """The partition keys of SEPARATED KEY_VALUE messages: the encoded keys as standard
    Base64 text (a string array, null where the key is null). The messages also need
    ``partition_key_b64_encoded``; the producer's rows set it for a binary ``key`` column,
    so passing the encoded keys as that column does both."""
    valid: Mask = valid_mask(keys)
    kept = keys.filter(pa.array(valid)) if keys.null_count else keys
    text = base64_piece(binary_piece(kept))
    if keys.null_count:
        text = expand(text, valid)
    out = to_arrow(text, valid if keys.null_count else None)
    return out.view(pa.large_string() if pa.types.is_large_binary(out.type) else pa.string())


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
