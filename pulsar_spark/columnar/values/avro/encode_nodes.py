"""Avro binary encoders of Arrow columns: one :class:`Enc` per schema node, each turning a whole
column into pieces (:mod:`pulsar_spark.columnar.pieces`) with NumPy.

==========================  ==================================================
Avro                        bytes per row
==========================  ==================================================
null                        none
boolean                     1 byte, 0 or 1
int, long (and logicals)    zigzag varint
float, double               4 / 8 bytes little-endian IEEE
bytes, string               varint length, then the bytes
fixed                       the bytes
enum                        varint of the symbol's index
decimal (bytes / fixed)     minimal / sign-extended big-endian two's complement
record                      the fields, in the schema's order
union                       varint of the branch index, then the branch's value
array, map                  one block: varint count (none when 0), items, 0
==========================  ==================================================

Encoders are built, and checked against the Arrow types, by :mod:`.encode_fit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import Bytes, Int64s, Mask, list_parts, valid_mask
from ...pieces import Piece, binary_piece, choice, constant, expand, fixed, group, join, long_piece
from ..encode_errors import SchemaMismatch

__all__ = [
    "ArrayEnc",
    "BoolEnc",
    "BytesEnc",
    "ConstEnc",
    "DecimalEnc",
    "Decoded",
    "Enc",
    "EnumEnc",
    "FixedEnc",
    "FloatEnc",
    "LongEnc",
    "MapEnc",
    "NullEnc",
    "RecordEnc",
    "UnionEnc",
    "avro_long",
]


def avro_long(value: int) -> bytes:
    """One Avro long (zigzag varint) as bytes."""
    return long_piece(np.array([value], np.int64)).data.tobytes()


class Enc:
    """Encodes a column of one Arrow type as one Avro schema node.

    Args:
        path: the field's path, for errors.
    """

    #: Whether null elements are encoded (only by unions and null).
    takes_nulls = False

    def __init__(self, path: str) -> None:
        self.path = path

    def encode(self, array: pa.Array) -> list[Piece]:
        """The pieces of every element.

        Raises:
            SchemaMismatch: a null where the schema has no null, or a value it cannot hold.
        """
        if array.null_count and not self.takes_nulls:
            nulls = array.null_count
            msg = f"{nulls} null value{'s' if nulls > 1 else ''} but the schema has no null here"
            raise self.misfit(msg)
        return self.pieces(array)

    def pieces(self, array: pa.Array) -> list[Piece]:
        raise NotImplementedError

    def misfit(self, reason: str) -> SchemaMismatch:
        return SchemaMismatch.of([(self.path, reason)])


class NullEnc(Enc):
    takes_nulls = True

    def pieces(self, array: pa.Array) -> list[Piece]:
        return []


class ConstEnc(Enc):
    """The same bytes on every row (a field's default)."""

    def __init__(self, path: str, value: bytes) -> None:
        super().__init__(path)
        self.value = value

    def pieces(self, array: pa.Array) -> list[Piece]:
        return [constant(len(array), self.value)]


class Decoded(Enc):
    """A dictionary column, decoded, then encoded by ``inner``."""

    def __init__(self, inner: Enc) -> None:
        super().__init__(inner.path)
        self.inner = inner
        self.takes_nulls = inner.takes_nulls

    def pieces(self, array: pa.Array) -> list[Piece]:
        return self.inner.encode(array.dictionary_decode())


class BoolEnc(Enc):
    def pieces(self, array: pa.Array) -> list[Piece]:
        flags = np.asarray(array.to_numpy(zero_copy_only=False), bool)
        return [fixed(flags.view(np.uint8).reshape(-1, 1))]


class LongEnc(Enc):
    """int and long, from integers, dates, times and timestamps made into the schema's
    numbers by ``convert``."""

    def __init__(self, path: str, convert: Callable[[pa.Array], Int64s]) -> None:
        super().__init__(path)
        self.convert = convert

    def pieces(self, array: pa.Array) -> list[Piece]:
        return [long_piece(self.convert(array))]


class FloatEnc(Enc):
    """float (``<f4``) or double (``<f8``)."""

    def __init__(self, path: str, dtype: str) -> None:
        super().__init__(path)
        self.dtype = np.dtype(dtype)

    def pieces(self, array: pa.Array) -> list[Piece]:
        values = np.asarray(array.to_numpy(zero_copy_only=False)).astype(self.dtype, copy=False)
        return [fixed(np.ascontiguousarray(values).view(np.uint8).reshape(-1, self.dtype.itemsize))]


class BytesEnc(Enc):
    """bytes and string: a long length, then the bytes."""

    def pieces(self, array: pa.Array) -> list[Piece]:
        body = binary_piece(array)
        return [long_piece(body.lens), body]


class FixedEnc(Enc):
    def __init__(self, path: str, size: int) -> None:
        super().__init__(path)
        self.size = size

    def pieces(self, array: pa.Array) -> list[Piece]:
        body = binary_piece(array)
        wrong = np.flatnonzero(body.lens != self.size)
        if len(wrong):
            msg = f"a value of {body.lens[wrong[0]]} bytes for a fixed of {self.size}"
            raise self.misfit(msg)
        return [Piece(body.lens, body.data, self.size)]


class EnumEnc(Enc):
    def __init__(self, path: str, symbols: Sequence[str]) -> None:
        super().__init__(path)
        self.symbols = pa.array(list(symbols), pa.string())

    def pieces(self, array: pa.Array) -> list[Piece]:
        index = pc.index_in(array.cast(pa.string()), value_set=self.symbols)
        if index.null_count:
            bad = array.filter(index.is_null())[0].as_py()
            msg = f"{bad!r} is not a symbol of the enum ({index.null_count} values are not)"
            raise self.misfit(msg)
        return [long_piece(np.asarray(index.to_numpy(), np.int64))]


class DecimalEnc(Enc):
    """Decimals as the schema's (precision, scale): bytes hold the fewest bytes of the
    unscaled value (as Java's ``BigInteger.toByteArray``), fixed its ``size`` bytes."""

    def __init__(self, path: str, target: pa.DataType, size: int | None) -> None:
        super().__init__(path)
        self.target = target
        self.size = size

    def pieces(self, array: pa.Array) -> list[Piece]:
        try:
            array = array.cast(self.target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            msg = f"a value does not fit {self.target}: {exc}"
            raise self.misfit(msg) from None
        width = self.target.byte_width
        rows = len(array)
        raw = np.frombuffer(array.buffers()[1], np.uint8, rows * width, array.offset * width)
        big = raw.reshape(rows, width)[:, ::-1]  # big-endian two's complement
        negative = big[:, 0] >= 0x80
        if self.size is not None:
            return [fixed(_resize(big, negative, self.size))]
        ext = np.where(negative, 0xFF, 0x00).astype(np.uint8)
        # Leading bytes equal to the sign extension that the next byte's high bit repeats.
        same = np.logical_and.accumulate(big[:, : width - 1] == ext[:, None], axis=1)
        lead = same.sum(axis=1)
        after = big[np.arange(rows), lead]
        strip = np.where((after >= 0x80) == negative, lead, lead - 1)
        lens = (width - strip).astype(np.int64)
        data = big[np.arange(width) >= strip[:, None]]
        return [long_piece(lens), Piece(lens, data)]


def _resize(big: Bytes, negative: Mask, size: int) -> Bytes:
    width = big.shape[1]
    if size <= width:
        return np.ascontiguousarray(big[:, width - size :])
    pad = np.where(negative, 0xFF, 0x00).astype(np.uint8)
    return np.hstack((np.repeat(pad[:, None], size - width, axis=1), big))


class RecordEnc(Enc):
    """A record: its fields' pieces in the schema's order; ``fields`` pairs each with the
    struct child it comes from (None for a default, whose encoder ignores its input)."""

    def __init__(self, path: str, fields: Sequence[tuple[int | None, Enc]]) -> None:
        super().__init__(path)
        self.fields = list(fields)

    def pieces(self, array: pa.Array) -> list[Piece]:
        out: list[Piece] = []
        for child, enc in self.fields:
            out += enc.encode(array if child is None else array.field(child))
        return out


class UnionEnc(Enc):
    """A union: the branch index, then the value; null rows take ``null_index``."""

    takes_nulls = True

    def __init__(self, path: str, null_index: int | None, index: int, value: Enc | None) -> None:
        super().__init__(path)
        self.null_index = null_index
        self.index = index
        self.value = value
        self.tags = (avro_long(null_index if null_index is not None else 0), avro_long(index))

    def pieces(self, array: pa.Array) -> list[Piece]:
        rows = len(array)
        nulls = array.null_count
        if nulls and self.null_index is None:
            msg = f"{nulls} null value{'s' if nulls > 1 else ''} but the union has no null"
            raise self.misfit(msg)
        if self.value is None or (nulls == rows and rows):
            return [constant(rows, self.tags[0])]
        if nulls == 0:
            return [constant(rows, self.tags[1]), *self.value.encode(array)]
        valid = valid_mask(array)
        tags = choice(self.tags, valid.astype(np.int64))
        inner = self.value.encode(array.filter(pa.array(valid)))
        return [tags, *(expand(p, valid) for p in inner)]


class ArrayEnc(Enc):
    """An array: one block of all items (count, items, 0), or 0 alone when empty."""

    def __init__(self, path: str, items: Enc) -> None:
        super().__init__(path)
        self.items = items

    def pieces(self, array: pa.Array) -> list[Piece]:
        offsets, elements = list_parts(array)
        return _block(offsets, self.items.encode(elements))


class MapEnc(Enc):
    """A map: one block of all entries (count, key and value each, 0)."""

    def __init__(self, path: str, keys: Enc, values: Enc) -> None:
        super().__init__(path)
        self.keys = keys
        self.values = values

    def pieces(self, array: pa.Array) -> list[Piece]:
        offsets, entries = list_parts(array)
        items = [*self.keys.encode(entries.field(0)), *self.values.encode(entries.field(1))]
        return _block(offsets, items)


def _block(offsets: Int64s, items: Sequence[Piece]) -> list[Piece]:
    counts = np.diff(offsets)
    rows = len(counts)
    some = counts > 0
    count = expand(long_piece(counts[some]), some)
    body = group(join(items, int(offsets[-1])), offsets)
    return [count, body, constant(rows, b"\x00")]
