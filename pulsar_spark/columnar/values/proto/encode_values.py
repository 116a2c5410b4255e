"""Protobuf value encoders of Arrow columns (no tags): one :class:`ValueEnc` per protobuf type,
turning a column without nulls into pieces (:mod:`pulsar_spark.columnar.pieces`) with NumPy.

========================================  ==========================================
protobuf                                  bytes of one value
========================================  ==========================================
int32, int64, uint32, uint64, enum        varint (negative int32 and enum: 10 bytes,
                                          sign-extended, as protobuf writes them)
sint32, sint64                            zigzag varint
bool                                      one byte, 0 or 1
fixed32, sfixed32, float                  4 bytes little-endian
fixed64, sfixed64, double                 8 bytes little-endian
string, bytes                             varint length, then the bytes
message (Timestamp and wrappers too)      varint length, then its fields
========================================  ==========================================

Integers are range-checked when encoded (an int64 column into an int32 field
fits while its values do); :meth:`ValueEnc.written` leaves out the values
proto3 does not write in a field without presence (0, "", false, the first
enum value; a float or double whose bits are all 0, so -0.0 is written): through
:meth:`ValueEnc.is_default`, or for integers and enums from the words encoded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import Mask, UInt64s
from ...pieces import Piece, binary_piece, fixed, join, varint_piece, zigzag
from ..encode_errors import SchemaMismatch

__all__ = [
    "BytesValue",
    "EnumValue",
    "FloatValue",
    "IntValue",
    "ValueEnc",
    "integer_bits",
    "plain",
]

#: (lowest, highest) value of each integer kind.
RANGES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(["int32", "sint32", "sfixed32", "enum"], (-(2**31), 2**31 - 1)),
    **dict.fromkeys(["int64", "sint64", "sfixed64"], (-(2**63), 2**63 - 1)),
    **dict.fromkeys(["uint32", "fixed32"], (0, 2**32 - 1)),
    **dict.fromkeys(["uint64", "fixed64"], (0, 2**64 - 1)),
}
_DECIMAL = pa.decimal128(38, 0)
#: Little-endian words of the fixed-width integer kinds.
_FIXED = {"fixed32": "<u4", "sfixed32": "<u4", "fixed64": "<u8", "sfixed64": "<u8"}


def plain(array: pa.Array) -> pa.Array:
    """``array`` without dictionary encoding."""
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


class ValueEnc:
    """Encodes columns of one Arrow type as values of one protobuf type.

    Args:
        path: the field's path, for errors.
        wire: the wire type of one value (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
    """

    def __init__(self, path: str, wire: int) -> None:
        self.path = path
        self.wire = wire

    def pieces(self, array: pa.Array) -> list[Piece]:
        """The bytes of each value (``array`` has no nulls).

        Raises:
            SchemaMismatch: a value the type cannot hold, naming the field.
        """
        raise NotImplementedError

    def is_default(self, array: pa.Array) -> Mask:
        """Where a value is its type's default (not written without presence)."""
        raise NotImplementedError

    def written(self, array: pa.Array, implicit: bool) -> tuple[Mask | None, list[Piece]]:
        """The pieces of the values written (``implicit``: those not the default) and
        where they are (None: every value)."""
        if not implicit:
            return None, self.pieces(array)
        keep = ~self.is_default(array)
        if keep.all():
            return None, self.pieces(array)
        return keep, self.pieces(array.filter(pa.array(keep)))

    def misfit(self, reason: str) -> SchemaMismatch:
        return SchemaMismatch.of([(self.path, reason)])


def integer_bits(array: pa.Array) -> tuple[UInt64s, Mask, Mask]:
    """The values of an integer or decimal column as 64-bit two's complement words, where
    a value is at least 2**63 (an unsigned 64-bit value), and where it is out of both the
    int64 and the uint64 range (or not whole)."""
    kind = array.type
    rows = len(array)
    if pa.types.is_decimal(kind):
        try:
            whole = array.cast(_DECIMAL)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            bad = np.ones(rows, bool)  # beyond 38 digits, or not whole
            return np.zeros(rows, np.uint64), np.zeros(rows, bool), bad
        words = np.frombuffer(whole.buffers()[1], "<u8", rows * 2, whole.offset * 2)
        words = words.reshape(rows, 2)
        low, high = words[:, 0], words[:, 1].view(np.int64)
        sign = low.view(np.int64) >> 63
        big = (high == 0) & (sign == -1)
        wide = ~((high == sign) | big)
        return low.copy(), big, wide
    if pa.types.is_uint64(kind):
        values = np.asarray(array.to_numpy(zero_copy_only=False), np.uint64)
        return values, values >= np.uint64(2**63), np.zeros(rows, bool)
    values = np.asarray(array.to_numpy(zero_copy_only=False), np.int64)
    return values.view(np.uint64), np.zeros(rows, bool), np.zeros(rows, bool)


class IntValue(ValueEnc):
    """The integer kinds (varints, zigzag varints, fixed widths) and bool, from integer or
    decimal columns (bool from bool columns), checked against the kind's range."""

    def __init__(self, path: str, kind: str) -> None:
        width = {"fixed32": 5, "sfixed32": 5, "fixed64": 1, "sfixed64": 1}
        super().__init__(path, width.get(kind, 0))
        self.kind = kind

    def bits(self, array: pa.Array) -> UInt64s:
        """The values as 64-bit words, range-checked."""
        if self.kind == "bool":
            return np.asarray(array.to_numpy(zero_copy_only=False), bool).astype(np.uint64)
        bits, big, wide = integer_bits(array)
        lo, hi = RANGES[self.kind]
        signed = bits.view(np.int64)
        if hi >= 2**63:
            bad = wide | (~big & (signed < 0))
        else:
            bad = wide | big | (signed < lo) | (signed > hi)
        if bad.any():
            where = int(np.flatnonzero(bad)[0])
            value = array[where].as_py()
            count = int(np.count_nonzero(bad))
            msg = f"{value} is out of the range of {self.kind} ({lo} to {hi}; {count} values are)"
            raise self.misfit(msg)
        return bits

    def pieces(self, array: pa.Array) -> list[Piece]:
        return self.of_bits(self.bits(array))

    def written(self, array: pa.Array, implicit: bool) -> tuple[Mask | None, list[Piece]]:
        bits = self.bits(array)  # once: the defaults and the bytes from the same words
        if implicit:
            keep = bits != 0
            if not keep.all():
                return keep, self.of_bits(bits[keep])
        return None, self.of_bits(bits)

    def of_bits(self, bits: UInt64s) -> list[Piece]:
        """The values' bytes, from their words."""
        dtype = _FIXED.get(self.kind)
        if dtype is not None:
            words = bits.astype(dtype)
            return [fixed(words.view(np.uint8).reshape(-1, words.itemsize))]
        if self.kind in ("sint32", "sint64"):
            return [varint_piece(zigzag(bits.view(np.int64)))]
        return [varint_piece(bits)]


class FloatValue(ValueEnc):
    """float (``<f4``) or double (``<f8``)."""

    def __init__(self, path: str, dtype: str) -> None:
        self.dtype = np.dtype(dtype)
        super().__init__(path, 5 if self.dtype.itemsize == 4 else 1)

    def _values(self, array: pa.Array) -> np.ndarray:
        values = np.asarray(array.to_numpy(zero_copy_only=False))
        return np.ascontiguousarray(values.astype(self.dtype, copy=False))

    def pieces(self, array: pa.Array) -> list[Piece]:
        values = self._values(array)
        return [fixed(values.view(np.uint8).reshape(-1, self.dtype.itemsize))]

    def is_default(self, array: pa.Array) -> Mask:
        values = self._values(array)
        return values.view(np.uint32 if self.dtype.itemsize == 4 else np.uint64) == 0  # type: ignore[no-any-return]


class BytesValue(ValueEnc):
    """string and bytes: the length, then the bytes."""

    def __init__(self, path: str) -> None:
        super().__init__(path, 2)

    def pieces(self, array: pa.Array) -> list[Piece]:
        body = binary_piece(array)
        return [varint_piece(body.lens.view(np.uint64)), body]

    def is_default(self, array: pa.Array) -> Mask:
        return binary_piece(array).lens == 0  # type: ignore[no-any-return]


class EnumValue(ValueEnc):
    """An enum from a string column (the value's name, or for an open enum a number as
    text, as reads give undeclared numbers) or an integer column (the numbers); a closed
    (proto2) enum takes only the numbers it declares."""

    def __init__(self, path: str, values: Sequence[tuple[int, str]], closed: bool) -> None:
        super().__init__(path, 0)
        self.names = pa.array([name for _, name in values], pa.string())
        self.numbers = np.array([number for number, _ in values], np.int64)
        self.closed = closed

    def numbers_of(self, array: pa.Array) -> UInt64s:
        if pa.types.is_integer(array.type) or pa.types.is_decimal(array.type):
            bits = IntValue(self.path, "enum").bits(array)
            numbers = bits.view(np.int64)
            if self.closed:
                unknown = ~np.isin(numbers, self.numbers)
                if unknown.any():
                    value = int(numbers[np.flatnonzero(unknown)[0]])
                    msg = f"{value} is not a number of the (closed) enum"
                    raise self.misfit(msg)
            return bits
        text = array.cast(pa.string())
        index = pc.index_in(text, value_set=self.names)
        found = np.asarray(index.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
        numbers = np.where(found >= 0, self.numbers[np.maximum(found, 0)], 0)
        missing = found < 0
        if missing.any():
            rest = text.filter(pa.array(missing))
            parsed = None if self.closed else _decimal_numbers(rest)
            if parsed is None:
                bad = rest[0].as_py()
                kind = "a name" if self.closed else "a name or number"
                msg = f"{bad!r} is not {kind} of the enum ({len(rest)} values are not)"
                raise self.misfit(msg)
            numbers[missing] = parsed
        return IntValue(self.path, "enum").bits(pa.array(numbers))

    def pieces(self, array: pa.Array) -> list[Piece]:
        return [varint_piece(self.numbers_of(array))]

    def written(self, array: pa.Array, implicit: bool) -> tuple[Mask | None, list[Piece]]:
        numbers = self.numbers_of(array)
        if implicit:
            keep = numbers != 0
            if not keep.all():
                return keep, [varint_piece(numbers[keep])]
        return None, [varint_piece(numbers)]


def _decimal_numbers(text: pa.Array) -> np.ndarray | None:
    """Decimal integer texts as int64 numbers, or None if one is not such a text."""
    if not pc.all(pc.match_substring_regex(text, r"^-?[0-9]{1,19}$")).as_py():
        return None
    try:
        return np.asarray(text.cast(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
    except pa.ArrowInvalid:
        return None


class MessageValue(ValueEnc):
    """A message: its length, then the pieces ``body`` gives (its fields)."""

    def __init__(self, path: str) -> None:
        super().__init__(path, 2)

    def body(self, array: pa.Array) -> list[Piece]:
        raise NotImplementedError

    def pieces(self, array: pa.Array) -> list[Piece]:
        body = join(self.body(array), len(array))
        return [varint_piece(body.lens.view(np.uint64)), body]

    def is_default(self, array: pa.Array) -> Mask:
        return np.zeros(len(array), bool)  # a set message is always written
