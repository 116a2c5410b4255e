"""NumPy array types of the columnar layer: byte buffers, integer columns, masks."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

__all__ = ["BufferLike", "Bytes", "Int64s", "Ints", "Mask", "UInt64s"]

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
