"""NumPy array types of the columnar layer (byte buffers, integer columns, masks), and the
validity and list offsets of Arrow arrays as such arrays."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

__all__ = [
    "BufferLike",
    "Bytes",
    "Int64s",
    "Ints",
    "Mask",
    "UInt64s",
    "list_parts",
    "valid_mask",
]

#: A byte buffer (the pool, a batch payload, metadata) as unsigned bytes.
Bytes: TypeAlias = NDArray[np.uint8]
#: Positions, lengths and counts as the decoders make them: signed 64-bit.
Int64s: TypeAlias = NDArray[np.int64]
#: Values of varint fields, as the wire has them (uint64).
UInt64s: TypeAlias = NDArray[np.uint64]
#: One flag per item, row or field.
Mask: TypeAlias = NDArray[np.bool_]
#: Integers of any width: positions handed in, indexes from ``np.flatnonzero`` (``intp``).
Ints: TypeAlias = NDArray[np.integer[Any]]
#: What a buffer may be handed in as: bytes of any kind, or an array (viewed as bytes).
BufferLike: TypeAlias = bytes | bytearray | memoryview | NDArray[np.generic]


def valid_mask(array: pa.Array) -> Mask:
    """True where ``array`` holds a value."""
    if array.null_count == 0:
        return np.ones(len(array), bool)
    mask: Mask = array.is_valid().to_numpy(zero_copy_only=False)
    return mask


def list_parts(array: pa.Array) -> tuple[Int64s, pa.Array]:
    """The offsets of a list (or map) array, from 0, and the elements they index."""
    if pa.types.is_fixed_size_list(array.type):
        size = array.type.list_size
        offsets = np.arange(len(array) + 1, dtype=np.int64) * size
        return offsets, array.values.slice(array.offset * size, len(array) * size)
    raw = np.asarray(array.offsets.to_numpy(zero_copy_only=False), np.int64)
    first = int(raw[0])
    return raw - first, array.values.slice(first, int(raw[-1]) - first)
