"""Avro values read at many cursors at once: :class:`Lanes` (one cursor per value being
decoded) and the reads of Avro's encodings over all of them with NumPy.

A lane is one value under decoding: a record at the top level, an array
item or a union branch further down. Each has a cursor (``pos``), the end of
its message's bytes (``end``, never read past) and its message's row (for
errors). A read decodes one Avro value at every lane's cursor and moves the
cursors past it:

* ``int``/``long``: zigzag varints (:func:`~.varints.varints`);
* ``float``/``double``: 4 or 8 bytes little-endian, gathered through a
  byte-strided view of the buffer;
* ``bytes``/``string``: a long length, then that many bytes (the caller
  gathers them);
* ``boolean``: one byte, non-zero is true (as fastavro and Python read it).

A value that does not fit before its lane's end goes to :meth:`Lanes.fail`:
in raise mode it raises :class:`SchemaDecodeError` for the lowest row at
fault; in collect mode (dead-letter reads) it notes the row's first error and
moves the lane to its end, so every later read of that lane fails too
(values read as zero, lengths as 0) and the row's value comes out null.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from ...arrays import Bytes, Int64s, Ints, Mask
from ...varints import varints
from ..errors import SchemaDecodeError

__all__ = ["Failures", "Lanes", "collected", "expand", "nulls_where"]

#: Floats and doubles as read.
Floats: TypeAlias = NDArray[np.floating[Any]]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_ONE = np.uint64(1)


class Failures:
    """The rows that failed to decode: raise at the first, or collect them (one text each).

    Args:
        rows: how many rows are decoded.
        topic: named in errors.
        collect: keep going past failures (dead-letter mode) instead of raising.
    """

    def __init__(self, rows: int, *, topic: str = "", collect: bool = False) -> None:
        self.topic = topic
        self.collect = collect
        self.failed: Mask = np.zeros(rows, bool)
        self.errors: dict[int, SchemaDecodeError] = {}

    def add(self, rows: Int64s, path: str, reason: str, values: tuple[Int64s, ...] = ()) -> None:
        """Rows whose values failed at ``path``; raises unless collecting.

        ``reason`` is formatted per row with the row's ``values`` (``{0}``, ``{1}``...).
        """
        if not self.collect:
            first = int(np.argmin(rows))
            text = reason.format(*(int(v[first]) for v in values)) if values else reason
            raise SchemaDecodeError(text, row=int(rows[first]), topic=self.topic, field=path)
        fresh = ~self.failed[rows]
        new, at = np.unique(rows[fresh], return_index=True)
        self.failed[new] = True
        chosen = [v[fresh][at] for v in values]
        for k, row in enumerate(new.tolist()):
            text = reason.format(*(int(v[k]) for v in chosen)) if values else reason
            self.errors[row] = SchemaDecodeError(text, row=row, topic=self.topic, field=path)

    def texts(self) -> pa.Array:
        """One string per row: the error of a failed row, null for the others."""
        texts: list[str | None] = [None] * len(self.failed)
        for row, error in self.errors.items():
            texts[row] = error.text()
        return pa.array(texts, pa.string())


class Lanes:
    """Cursors into ``data``: lane ``i`` reads ``data[pos[i]:end[i]]``, for row ``rows[i]``."""

    __slots__ = ("data", "end", "failures", "pos", "rows")

    def __init__(
        self, data: Bytes, pos: Int64s, end: Int64s, rows: Int64s, failures: Failures
    ) -> None:
        self.data = data
        self.pos = pos
        self.end = end
        self.rows = rows
        self.failures = failures

    def __len__(self) -> int:
        return len(self.pos)

    def subset(self, index: Ints) -> Lanes:
        """The lanes at ``index``, with cursors of their own (put back with :meth:`update`)."""
        return Lanes(self.data, self.pos[index], self.end[index], self.rows[index], self.failures)

    def update(self, index: Ints, sub: Lanes) -> None:
        """Take the cursors of a :meth:`subset` back."""
        self.pos[index] = sub.pos

    def fail(self, bad: Mask, path: str, reason: str, *values: Int64s) -> None:
        """Lanes whose value is broken: raise, or note their rows and end them. ``reason``
        is formatted per lane with its ``values`` (arrays over all the lanes)."""
        self.failures.add(self.rows[bad], path, reason, tuple(v[bad] for v in values))
        self.pos[bad] = self.end[bad]

    def check_room(self, size: Int64s | int, path: str, what: str) -> Mask | None:
        """Lanes without ``size`` bytes left fail; the mask of them, or None. ``what``
        names the value, ``{0}`` standing for its size."""
        left = self.end - self.pos
        bad = size > left  # not pos + size > end: a huge size would overflow
        if not bad.any():
            return None
        sizes = np.broadcast_to(np.asarray(size, np.int64), left.shape)
        self.fail(bad, path, what + " runs past the end of the value ({1} bytes left)", sizes, left)
        return bad

    # -- reads ---------------------------------------------------------------------------

    def read_long(self, path: str) -> Int64s:
        """A zigzag varint at every lane (0 where it fails)."""
        if not len(self.pos):
            return np.zeros(0, np.int64)
        raw, length, ok = varints(self.data, self.pos)
        self.pos += length
        bad = self.pos > self.end
        if not ok.all():
            bad |= ~ok
        # Zigzag, in place: (raw >> 1) ^ -(raw & 1).
        sign = (raw & _ONE).view(np.int64)
        np.negative(sign, out=sign)
        raw >>= _ONE
        value: Int64s = raw.view(np.int64)
        value ^= sign
        if bad.any():
            # Ten bytes with continuation bits inside the value: too long; else past its end.
            too_long = ~ok & (self.end - (self.pos - length) >= 10)
            if too_long.any():
                self.fail(too_long, path, "a varint longer than 10 bytes")
            if (bad & ~too_long).any():
                self.fail(bad & ~too_long, path, "a varint runs past the end of the value")
            value[bad] = 0
        return value

    def read_int(self, path: str) -> Int64s:
        """A zigzag varint that fits an Avro int (32 bits) at every lane."""
        value: Int64s = self.read_long(path)
        bad = (value < _INT32_MIN) | (value > _INT32_MAX)
        if bad.any():
            self.fail(bad, path, "{0} is out of the range of an Avro int", value)
            value[bad] = 0
        return value

    def read_length(self, path: str, what: str = "bytes") -> tuple[Int64s, Int64s]:
        """A length and the bytes that follow: (start, length) at every lane."""
        length = self.read_long(path)
        neg = length < 0
        if neg.any():
            self.fail(neg, path, f"negative {what} length {{0}}", length)
            length[neg] = 0
        bad = self.check_room(length, path, f"{what} of {{0}} bytes")
        if bad is not None:
            length[bad] = 0
        start: Int64s = self.pos.copy()
        self.pos += length
        return start, length

    def read_fixed(self, width: int, path: str, what: str) -> Int64s:
        """Where ``width`` bytes start at every lane (0 where they do not fit)."""
        start: Int64s = self.pos.copy()
        bad = self.check_room(width, path, what)
        if bad is not None:
            start[bad] = 0
        self.pos += width
        if bad is not None:
            self.pos[bad] = self.end[bad]
        return start

    def read_number(self, dtype: str, path: str) -> Floats:
        """A little-endian float (``"<f4"``) or double (``"<f8"``) at every lane."""
        width = np.dtype(dtype).itemsize
        start = self.read_fixed(width, path, f"a {8 * width}-bit float")
        if len(self.data) < width:  # nothing fits: every lane failed
            return np.zeros(len(start), dtype)
        view: Floats = np.ndarray((len(self.data) - width + 1,), dtype, self.data, 0, (1,))
        return view[start]

    def read_bool(self, path: str) -> Mask:
        start = self.read_fixed(1, path, "a boolean")
        flags: Mask = self.data[start] != 0
        return flags

    def skip_fixed(self, width: int, path: str, what: str) -> None:
        self.check_room(width, path, what)
        self.pos += width
        np.minimum(self.pos, self.end, out=self.pos)


def nulls_where(valid: Mask) -> pa.Array:
    """Take indices that expand ``valid.sum()`` values to ``len(valid)``, null where not valid."""
    index = np.cumsum(valid, dtype=np.int64) - 1
    index[~valid] = 0
    return pa.array(index, mask=~valid)


def expand(values: pa.Array, valid: Mask) -> pa.Array:
    """``values`` (one per true of ``valid``) spread over ``len(valid)`` slots, nulls elsewhere."""
    if valid.all():
        return values
    dtype = values.type
    if pa.types.is_primitive(dtype) and not pa.types.is_boolean(dtype) and values.null_count == 0:
        # Fixed width: scatter into a zeroed buffer and add a validity bitmap.
        width = dtype.bit_width // 8
        if width and not pa.types.is_dictionary(dtype):
            src = np.frombuffer(values.buffers()[1], np.uint8)[
                values.offset * width : (values.offset + len(values)) * width
            ]
            out = np.zeros((len(valid), width), np.uint8)
            out[valid] = src.reshape(-1, width)
            return pa.Array.from_buffers(
                dtype,
                len(valid),
                [pa.py_buffer(np.packbits(valid, bitorder="little")), pa.py_buffer(out)],
                null_count=len(valid) - int(np.count_nonzero(valid)),
            )
    return values.take(nulls_where(valid))


def collected(
    decode: Callable[[pa.Array | pa.ChunkedArray, Failures], pa.Array],
    values: pa.Array | pa.ChunkedArray,
    topic: str,
) -> tuple[pa.Array, pa.Array]:
    """``decode`` in dead-letter mode: a value that does not decode comes out null, and the
    second column holds its error text (null for the rows that decoded)."""
    failures = Failures(len(values), topic=topic, collect=True)
    column = decode(values, failures)
    if failures.failed.any():
        index = np.arange(len(values), dtype=np.int64)
        column = column.take(pa.array(index, mask=failures.failed))
    return column, failures.texts()
