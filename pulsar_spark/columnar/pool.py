"""The buffer that the payloads of one output batch are copied into, and their binary column."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrays import Bytes, Ints

__all__ = ["Pool"]

_MAX_ARROW_BYTES = 2**31 - 1


class Pool:
    """A growing Arrow buffer that the payloads of one output batch are copied into.

    Copying at :meth:`ArrowBatchBuilder.add` frees each decompressed payload
    at once, and reusing one pool allocation keeps the pages warm from batch
    to batch.
    """

    __slots__ = ("_buf", "_mem", "used")

    def __init__(self, capacity: int = 1 << 20) -> None:
        self._buf = pa.allocate_buffer(capacity, resizable=True)
        self._mem = memoryview(self._buf).cast("B")
        self.used = 0

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` in; return where it starts."""
        at = self.used
        end = at + len(data)
        capacity = len(self._mem)
        if end > capacity:
            self._mem.release()
            self._buf.resize(max(end, 2 * capacity))
            self._mem = memoryview(self._buf).cast("B")
        self._mem[at:end] = data
        self.used = end
        return at

    def view(self) -> Bytes:
        return np.frombuffer(self._mem, np.uint8, self.used)

    def memory(self) -> memoryview:
        return self._mem[: self.used]

    def values(
        self,
        item_starts: Ints,
        payload_starts: Ints,
        picked: Ints,
        sizes: Ints,
    ) -> pa.Array:
        """The payloads of the ``picked`` items as a binary column.

        The pool is an unbroken run of items, each ``[size + metadata][payload]``,
        so a binary array whose offsets are every item's two boundaries covers
        it without a copy; taking its odd elements copies just the payloads,
        range by range, in Arrow's own kernel.
        """
        items = len(item_starts)
        bounds = np.empty(2 * items + 1, np.int64)
        bounds[0:-1:2] = item_starts
        bounds[1::2] = payload_starts
        bounds[-1] = self.used
        if self.used > _MAX_ARROW_BYTES:
            msg = f"{self.used} bytes of messages do not fit one Arrow array"
            raise ValueError(msg)
        if (bounds[1:-1:2] + sizes != bounds[2::2]).any():
            msg = "entries in the pool are not laid out item after item"
            raise AssertionError(msg)
        segments = pa.Array.from_buffers(
            pa.binary(),
            2 * items,
            [None, pa.py_buffer(bounds.astype(np.int32)), self._buf],
        )
        return segments.take(pa.array(2 * picked + 1))

    def clear(self) -> None:
        self.used = 0
