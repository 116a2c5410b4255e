"""Bytes per row built column by column: :class:`Piece` (a length per row and the rows' bytes
one after another) and the NumPy/Arrow steps that make and join them.

An encoder turns each column into one or more pieces, all for the same rows;
the value of a row is its pieces' bytes, piece after piece (:func:`join`)::

    piece        lens  [2, 0, 1]        data  b"ab" b"" b"c"   (rows in order)
    join(a, b)   lens  a.lens + b.lens  data  row 0 of a, row 0 of b, row 1 of a...

Pieces of rows that are a subset of the rows (the valid ones of a nullable
column) become pieces of all rows with :func:`expand` (0 bytes elsewhere);
pieces of list elements become pieces of the lists' rows with :func:`group`.
No step loops over rows in Python: :func:`join` lays the pieces out as one
Arrow binary array and lets Arrow's ``take`` copy them in row order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
from numpy.typing import NDArray

from .arrays import Bytes, Int64s, Ints, Mask, UInt64s

__all__ = [
    "Piece",
    "base64_piece",
    "binary_piece",
    "choice",
    "constant",
    "expand",
    "fixed",
    "group",
    "join",
    "long_piece",
    "to_arrow",
    "varint_piece",
    "zigzag",
]

_MAX_BINARY = 2**31 - 1
_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", np.uint8)
_SEVEN = np.uint64(7)
_LOW7 = np.uint64(0x7F)
#: Widest matrix (bytes a row) that join puts side by side with NumPy.
_NARROW = 16
#: 2 ** 7, 2 ** 14, ...: a value below the k-th takes k + 1 varint bytes.
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
#: The continuation bits of a varint of k bytes (k <= 8), as a little-endian word.
_CONTINUED = np.array(
    [(1 << (8 * max(k - 1, 0))) - 1 & 0x8080808080808080 for k in range(9)], np.uint64
)
#: (keep, move, shift): three steps that spread 56 bits into eight 7-bit groups.
_SPREAD = [
    (np.uint64(keep), np.uint64(move), np.uint64(shift))
    for keep, move, shift in (
        (0x000000000FFFFFFF, 0x00FFFFFFF0000000, 4),
        (0x00003FFF00003FFF, 0x0FFFC0000FFFC000, 2),
        (0x007F007F007F007F, 0x3F803F803F803F80, 1),
    )
]


class Piece:
    """Bytes for each of ``len(lens)`` rows: row ``r`` has ``lens[r]`` bytes, and ``data``
    holds the rows' bytes in row order. ``width`` is set when every row has that many
    bytes. A narrow piece (a varint, a fixed-width value...) may be given as ``matrix``
    instead, ``(rows, W)`` bytes whose row ``r`` starts with its ``lens[r]`` bytes:
    :func:`join` puts such pieces side by side with NumPy, and ``data`` is made from it
    only when asked for."""

    __slots__ = ("_data", "lens", "matrix", "width")

    def __init__(
        self,
        lens: Int64s,
        data: Bytes | None = None,
        width: int | None = None,
        matrix: Bytes | None = None,
    ) -> None:
        self.lens = lens
        self.width = width
        self.matrix = matrix
        self._data = data
        if data is None and matrix is None:
            msg = "a piece needs its data or its matrix"
            raise ValueError(msg)

    @property
    def rows(self) -> int:
        return len(self.lens)

    @property
    def data(self) -> Bytes:
        if self._data is None:
            matrix = self.matrix
            assert matrix is not None
            if self.width == matrix.shape[1]:
                self._data = np.ascontiguousarray(matrix).reshape(-1)
            else:
                self._data = matrix[np.arange(matrix.shape[1]) < self.lens[:, None]]
        return self._data

    @property
    def narrow(self) -> bool:
        """Whether the piece is a matrix of at most 16 bytes a row."""
        return self.matrix is not None and self.matrix.shape[1] <= _NARROW

    def keep(self) -> NDArray[np.bool_]:
        """Which bytes of ``matrix`` belong to their row."""
        assert self.matrix is not None
        return np.arange(self.matrix.shape[1]) < self.lens[:, None]

    def offsets(self) -> Int64s:
        """Where each row's bytes start in ``data``, and the end (``rows + 1`` values)."""
        out = np.zeros(self.rows + 1, np.int64)
        np.cumsum(self.lens, out=out[1:])
        return out


def fixed(matrix: Bytes) -> Piece:
    """A piece of ``matrix.shape[1]`` bytes per row, from a ``(rows, width)`` uint8 matrix."""
    rows, width = matrix.shape
    return Piece(np.full(rows, width, np.int64), None, width, matrix)


def constant(rows: int, value: bytes) -> Piece:
    """The same bytes on every row."""
    one = np.frombuffer(value, np.uint8)
    return fixed(np.broadcast_to(one, (rows, len(one))))


def choice(options: Sequence[bytes], index: Ints) -> Piece:
    """Row ``r`` holds ``options[index[r]]`` (a union branch, a boolean, a comma...)."""
    sizes = {len(o) for o in options}
    if len(sizes) == 1:
        table = np.frombuffer(b"".join(options), np.uint8).reshape(len(options), -1)
        return fixed(table[index])
    taken = pa.array(options, pa.large_binary()).take(pa.array(index))
    return binary_piece(taken)


def binary_piece(array: pa.Array) -> Piece:
    """The bytes of each element of a binary or string array (of any offset width, views
    and fixed-size binary included); null elements keep whatever bytes they have, so the
    caller drops nulls first."""
    kind = array.type
    rows = len(array)
    if rows == 0:
        return Piece(np.zeros(0, np.int64), np.zeros(0, np.uint8))
    if pa.types.is_fixed_size_binary(kind):
        width = kind.byte_width
        buf = array.buffers()[1]
        data = np.frombuffer(buf, np.uint8, rows * width, array.offset * width)
        return Piece(np.full(rows, width, np.int64), data, width)
    if not (
        pa.types.is_binary(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_large_string(kind)
    ):
        array = array.cast(pa.large_binary())
        kind = array.type
    wide = pa.types.is_large_binary(kind) or pa.types.is_large_string(kind)
    buffers = array.buffers()
    index = np.dtype(np.int64 if wide else np.int32)
    offsets = np.frombuffer(buffers[1], index, rows + 1, array.offset * index.itemsize)
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(buffers[2], np.uint8, hi - lo, lo) if hi > lo else np.zeros(0, np.uint8)
    return Piece(np.diff(offsets).astype(np.int64, copy=False), data)


def zigzag(values: Int64s) -> UInt64s:
    """Avro's zigzag mapping of signed longs: 0, -1, 1, -2... to 0, 1, 2, 3..."""
    signed = np.asarray(values, np.int64)
    mapped: UInt64s = ((signed << 1) ^ (signed >> 63)).view(np.uint64)
    return mapped


def varint_piece(values: UInt64s) -> Piece:
    """Unsigned varints (7 bits a byte, low groups first, high bit = more follow), as a
    matrix of up to 10 bytes a row."""
    rows = len(values)
    values = np.asarray(values, np.uint64)
    top = int(values.max()) if rows else 0
    if top < 0x80:
        return fixed(values.astype(np.uint8).reshape(rows, 1))
    lens = np.searchsorted(_VARINT_LIMITS, values, side="right") + 1
    width = int(np.searchsorted(_VARINT_LIMITS, np.uint64(top), side="right")) + 1
    same = width if bool((lens == width).all()) else None
    if width <= 8:  # spread the 7-bit groups of a 64-bit word into its bytes
        word = values.copy()
        for keep, move, shift in _SPREAD:
            moved = word & move
            moved <<= shift
            word &= keep
            word |= moved
        word |= _CONTINUED[lens]
        matrix = word.astype("<u8", copy=False).view(np.uint8).reshape(rows, 8)[:, :width]
        return Piece(lens, None, same, matrix)
    matrix = np.empty((rows, width), np.uint8)
    shifted = values.copy()
    for j in range(width):
        byte = (shifted & _LOW7).astype(np.uint8)
        if j < width - 1:
            byte |= (lens > j + 1).astype(np.uint8) << 7
        matrix[:, j] = byte
        shifted >>= _SEVEN
    return Piece(lens, None, same, matrix)


def long_piece(values: Int64s) -> Piece:
    """Avro ``int``/``long`` values: zigzag varints."""
    return varint_piece(zigzag(values))


def expand(piece: Piece, valid: Mask) -> Piece:
    """A piece of the rows where ``valid`` is true, as a piece of all rows (no bytes on the
    others)."""
    lens = np.zeros(len(valid), np.int64)
    lens[valid] = piece.lens
    if piece.narrow:
        assert piece.matrix is not None
        matrix = np.zeros((len(valid), piece.matrix.shape[1]), np.uint8)
        matrix[valid] = piece.matrix
        return Piece(lens, None, None, matrix)
    return Piece(lens, piece.data)


def group(piece: Piece, offsets: Int64s) -> Piece:
    """A piece of list elements as a piece of the lists: row ``r`` holds elements
    ``offsets[r]`` to ``offsets[r + 1]``, which must start at element 0 and cover all."""
    ends = np.zeros(piece.rows + 1, np.int64)
    np.cumsum(piece.lens, out=ends[1:])
    at = ends[np.asarray(offsets, np.int64)]
    return Piece(np.diff(at), piece.data)


def join(pieces: Sequence[Piece], rows: int) -> Piece:
    """One piece whose rows hold the pieces' rows one after another.

    Neighbouring narrow pieces (matrices) are put side by side with NumPy and
    their bytes taken out in one mask; the rest go into one Arrow binary array
    (piece after piece) whose elements Arrow's ``take`` copies in row order.
    """
    merged: list[Piece] = []
    run: list[Piece] = []
    for piece in [*pieces, None]:
        if piece is not None and (
            piece.width == 0 or (piece.width is None and not piece.narrow and len(piece.data) == 0)
        ):
            continue
        if piece is not None and piece.narrow:
            run.append(piece)
            continue
        if run:
            merged.append(_side_by_side(run, rows))
            run = []
        if piece is not None:
            merged.append(piece)
    if not merged:
        return Piece(np.zeros(rows, np.int64), np.zeros(0, np.uint8), 0)
    if len(merged) == 1:
        return merged[0]
    count = len(merged)
    offsets = np.zeros(count * rows + 1, np.int64)
    np.cumsum(np.concatenate([p.lens for p in merged]), out=offsets[1:])
    data = np.concatenate([p.data for p in merged])
    elements = pa.Array.from_buffers(
        pa.large_binary(), count * rows, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    order = (np.arange(rows, dtype=np.int64)[:, None] + rows * np.arange(count)).reshape(-1)
    taken = elements.take(pa.array(order))
    out = np.frombuffer(taken.buffers()[1], np.int64, rows * count + 1, taken.offset * 8)
    lens = out[count::count] - out[0:-1:count]
    total = int(out[-1] - out[0])
    body = (
        np.frombuffer(taken.buffers()[2], np.uint8, total, int(out[0]))
        if total
        else np.zeros(0, np.uint8)
    )
    return Piece(lens, body)


def _side_by_side(run: list[Piece], rows: int) -> Piece:
    """Narrow pieces joined: their matrices side by side, each row's bytes kept."""
    if len(run) == 1:
        return run[0]
    matrices = [p.matrix for p in run]
    both = np.hstack(matrices)  # type: ignore[arg-type]
    if all(p.width is not None for p in run):
        return fixed(both)
    keep = np.hstack([p.keep() for p in run])
    lens = np.sum([p.lens for p in run], axis=0)
    return Piece(lens, both[keep])


def to_arrow(piece: Piece, valid: Mask | None = None) -> pa.Array:
    """The rows as a binary array (large_binary past 2 GiB), null where ``valid`` is false
    (those rows must have no bytes)."""
    rows = piece.rows
    offsets = piece.offsets()
    total = int(offsets[-1])
    validity = None
    nulls = 0
    if valid is not None and not valid.all():
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
        nulls = rows - int(np.count_nonzero(valid))
    if total > _MAX_BINARY:
        kind, index = pa.large_binary(), offsets
    else:
        kind, index = pa.binary(), offsets.astype(np.int32)
    return pa.Array.from_buffers(
        kind,
        rows,
        [validity, pa.py_buffer(index), pa.py_buffer(np.ascontiguousarray(piece.data))],
        null_count=nulls,
    )


def base64_piece(piece: Piece) -> Piece:
    """Each row's bytes as standard Base64 text (``=`` padded), as ``base64.b64encode``."""
    groups = -(-piece.lens // 3)
    padded = np.zeros(int(groups.sum()) * 3, np.uint8)
    starts = np.zeros(piece.rows, np.int64)
    np.cumsum(groups[:-1] * 3, out=starts[1:])
    if len(piece.data):
        index = np.repeat(starts - piece.offsets()[:-1], piece.lens)
        index += np.arange(len(piece.data), dtype=np.int64)
        padded[index] = piece.data
    triples = padded.reshape(-1, 3).astype(np.uint32)
    word = (triples[:, 0] << 16) | (triples[:, 1] << 8) | triples[:, 2]
    sextets = (word[:, None] >> np.array([18, 12, 6, 0], np.uint32)) & 0x3F
    text = _B64[sextets].reshape(-1)
    lens = groups * 4
    ends = np.cumsum(lens)
    rest = piece.lens % 3
    text[ends[rest > 0] - 1] = ord("=")
    text[ends[rest == 1] - 2] = ord("=")
    return Piece(lens, text)
