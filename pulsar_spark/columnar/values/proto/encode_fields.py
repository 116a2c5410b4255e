"""Protobuf fields of Arrow columns, with their tags: singular fields (with or without
presence), repeated fields (packed or not), maps, and the messages, Timestamps and wrappers
made of them, column by column (:mod:`pulsar_spark.columnar.pieces`).

==================================  ==============================================
field                               bytes per row (in field-number order)
==================================  ==============================================
singular, explicit presence         tag + value where the column is not null
singular, implicit (proto3)         tag + value where the value is not the default
repeated, packed                    tag + length + every value, when not empty
repeated, unpacked                  tag + value per element
map                                 per entry: tag + length + key (1) + value (2),
                                    both always written, as protobuf writes them
==================================  ==============================================

A null where the field cannot hold one (a proto3 field without presence, a
required field, a list element, a map value, a list or map itself: protobuf
has no null there) raises :class:`~pulsar_spark.columnar.values.encode_errors.SchemaMismatch`
naming the field, as do two members of one oneof set in a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol.wire import encode_varint

from ...arrays import list_parts, valid_mask
from ...pieces import Piece, constant, expand, group, join, varint_piece
from ..encode_errors import SchemaMismatch
from .encode_values import IntValue, MessageValue, ValueEnc, plain

__all__ = [
    "FieldEnc",
    "MapField",
    "MessageEnc",
    "RepeatedField",
    "SingularField",
    "TimestampEnc",
    "WrapperEnc",
    "tag",
]

_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
#: Seconds of 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z (Timestamp's valid range).
_MIN_SECONDS, _MAX_SECONDS = -62135596800, 253402300799


def tag(number: int, wire: int) -> bytes:
    """A field's key: varint of ``number << 3 | wire``."""
    return encode_varint(number << 3 | wire)


def _nulls(count: int, where: str) -> str:
    return f"{count} null value{'s' if count > 1 else ''} but {where}"


class FieldEnc:
    """Encodes one field of a message, from the column of the message's rows."""

    def __init__(self, path: str, number: int) -> None:
        self.path = path
        self.number = number

    def pieces(self, array: pa.Array) -> list[Piece]:
        raise NotImplementedError

    def misfit(self, reason: str) -> SchemaMismatch:
        return SchemaMismatch.of([(self.path, reason)])

    def refuse_nulls(self, array: pa.Array, where: str, part: str = "") -> None:
        """Raise :class:`SchemaMismatch` (naming the field, ``part`` after its path) for
        the nulls of ``array``, saying ``where`` they cannot be."""
        if array.null_count:
            raise SchemaMismatch.of([(self.path + part, _nulls(array.null_count, where))])


class SingularField(FieldEnc):
    """A singular field. ``nullable``: nulls are absent fields (else an error);
    ``explicit``: every non-null value is written (else defaults are left out)."""

    def __init__(
        self,
        path: str,
        number: int,
        value: ValueEnc,
        *,
        nullable: bool,
        explicit: bool,
        required: bool = False,
    ) -> None:
        super().__init__(path, number)
        self.value = value
        self.nullable = nullable
        self.required = required
        self.explicit = explicit
        self.tag = tag(number, value.wire)

    def pieces(self, array: pa.Array) -> list[Piece]:
        array = plain(array)
        rows = len(array)
        nulls = array.null_count
        if nulls and not self.nullable:
            where = (
                "a required field cannot be null"
                if self.required
                else "the field has no presence: reads never give null for it (declare it "
                "optional, or fill in its default)"
            )
            raise self.misfit(_nulls(nulls, where))
        present = valid_mask(array)
        kept = array.filter(pa.array(present)) if nulls else array
        if len(kept) == 0:
            return []
        keep, values = self.value.written(kept, not self.explicit)
        if keep is not None:
            present[present] = keep
        count = int(np.count_nonzero(present)) if keep is not None else len(kept)
        if count == 0:
            return []
        pieces = [constant(count, self.tag), *values]
        if count == rows:
            return pieces
        if all(p.narrow and p.width is not None for p in pieces):  # one fixed matrix
            pieces = [join(pieces, count)]
        return [expand(p, present) for p in pieces]


class RepeatedField(FieldEnc):
    """A repeated field (a list column): packed (one length-delimited run of the values)
    or one tag and value per element."""

    def __init__(self, path: str, number: int, value: ValueEnc, *, packed: bool) -> None:
        super().__init__(path, number)
        self.value = value
        self.packed = packed
        self.tag = tag(number, 2 if packed else value.wire)

    def pieces(self, array: pa.Array) -> list[Piece]:
        array = plain(array)
        self.refuse_nulls(array, "a repeated field cannot be null (protobuf has no null list)")
        offsets, elements = list_parts(array)
        elements = plain(elements)
        self.refuse_nulls(elements, "a repeated field's elements cannot be null", "[]")
        total = len(elements)
        if total == 0:
            return []
        if not self.packed:
            items = join([constant(total, self.tag), *self.value.pieces(elements)], total)
            return [group(items, offsets)]
        body = group(join(self.value.pieces(elements), total), offsets)
        some = np.diff(offsets) > 0
        lens = varint_piece(body.lens[some].view(np.uint64))
        head = [constant(int(np.count_nonzero(some)), self.tag), lens]
        if some.all():
            return [*head, body]
        return [*(expand(p, some) for p in head), body]


class MapField(FieldEnc):
    """A map (a map column): per entry, a message of the key (field 1) and value (2)."""

    def __init__(self, path: str, number: int, key: ValueEnc, value: ValueEnc) -> None:
        super().__init__(path, number)
        self.key = key
        self.value = value
        self.tag = tag(number, 2)
        self.key_tag = tag(1, key.wire)
        self.value_tag = tag(2, value.wire)

    def pieces(self, array: pa.Array) -> list[Piece]:
        array = plain(array)
        self.refuse_nulls(array, "a map field cannot be null (protobuf has no null map)")
        offsets, entries = list_parts(array)
        total = len(entries)
        if total == 0:
            return []
        keys, values = plain(entries.field(0)), plain(entries.field(1))
        self.refuse_nulls(values, "map values cannot be null", "{}")
        body = join(
            [
                constant(total, self.key_tag),
                *self.key.pieces(keys),
                constant(total, self.value_tag),
                *self.value.pieces(values),
            ],
            total,
        )
        lens = varint_piece(body.lens.view(np.uint64))
        return [group(join([constant(total, self.tag), lens, body], total), offsets)]


class MessageEnc(MessageValue):
    """A message from a struct column: ``fields`` pairs each field (in field-number order)
    with the struct child it comes from; ``oneofs`` lists, per oneof, its members'
    children and names."""

    def __init__(
        self,
        path: str,
        fields: Sequence[tuple[int, FieldEnc]],
        oneofs: Sequence[tuple[str, Sequence[tuple[int, str]]]] = (),
    ) -> None:
        super().__init__(path)
        self.fields = sorted(fields, key=lambda f: f[1].number)
        self.oneofs = list(oneofs)

    def body(self, array: pa.Array) -> list[Piece]:
        self.check_oneofs(array)
        out: list[Piece] = []
        for child, enc in self.fields:
            out += enc.pieces(array.field(child))
        return out

    def check_oneofs(self, array: pa.Array) -> None:
        for name, members in self.oneofs:
            if len(members) < 2:
                continue
            set_ = np.sum([valid_mask(array.field(i)) for i, _ in members], axis=0)
            if (set_ > 1).any():
                count = int(np.count_nonzero(set_ > 1))
                where = f"{self.path}.{name}" if self.path else name
                fields = ", ".join(n for _, n in members)
                msg = (
                    f"{count} row{'s' if count > 1 else ''} set more than one member of the "
                    f"oneof ({fields}); protobuf keeps one"
                )
                raise SchemaMismatch.of([(where, msg)])


class TimestampEnc(MessageValue):
    """google.protobuf.Timestamp from a timestamp column (with a time zone): seconds (1)
    and nanos (2), each left out when 0; 0001-01-01 to 9999-12-31 only."""

    def __init__(self, path: str, unit: str) -> None:
        super().__init__(path)
        self.per_second = _PER_SECOND[unit]
        self.seconds = SingularField(
            path, 1, IntValue(path, "int64"), nullable=False, explicit=False
        )
        self.nanos = SingularField(path, 2, IntValue(path, "int32"), nullable=False, explicit=False)

    def body(self, array: pa.Array) -> list[Piece]:
        values = np.asarray(array.view(pa.int64()).to_numpy(zero_copy_only=False), np.int64)
        seconds, fraction = np.divmod(values, self.per_second)
        bad = (seconds < _MIN_SECONDS) | (seconds > _MAX_SECONDS)
        if bad.any():
            first = int(seconds[np.flatnonzero(bad)[0]])
            msg = (
                f"{first} seconds from 1970 is out of google.protobuf.Timestamp's range "
                "(0001-01-01 to 9999-12-31)"
            )
            raise self.misfit(msg)
        nanos = fraction * (1_000_000_000 // self.per_second)
        return [
            *self.seconds.pieces(pa.array(seconds)),
            *self.nanos.pieces(pa.array(nanos.astype(np.int32))),
        ]


class WrapperEnc(MessageValue):
    """A google.protobuf wrapper (Int64Value...) from a column of the wrapped scalar: its
    field 1, left out when the default."""

    def __init__(self, path: str, value: ValueEnc) -> None:
        super().__init__(path)
        self.value = SingularField(path, 1, value, nullable=False, explicit=False)

    def body(self, array: pa.Array) -> list[Piece]:
        return self.value.pieces(array)
