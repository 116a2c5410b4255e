"""Items whose metadata are all laid out alike, read at fixed offsets without a walk."""

from __future__ import annotations

import numpy as np

from ...arrays import Bytes, Int64s, Mask, UInt64s
from .schema import BAD, PROPS_TAG, SMM_SLOTS, Slot, SmmColumns

__all__ = ["same_layout"]

#: Longest metadata read as a layout (longer ones take the walk).
_MAX_LAYOUT = 64
#: Slots whose value is a varint, and those whose value is a byte string.
_VARINT_SLOTS = {
    Slot.PAYLOAD,
    Slot.COMPACTED,
    Slot.EVENT,
    Slot.B64,
    Slot.SEQ,
    Slot.NULL_VALUE,
    Slot.NULL_KEY,
}
_BYTES_SLOTS = {Slot.KEY, Slot.ORDERING}


def _layout(first: bytes) -> list[tuple[int, int, int, int]] | None:
    """The fields of one metadata as (tag offset, tag, value offset, value size).

    None when they hold what :func:`same_layout` leaves to the walk: properties,
    multi-byte tags, groups and other bad wire types, varints longer than 9
    bytes, or bytes that do not end where the metadata does.
    """
    out = []
    pos, end = 0, len(first)
    while pos < end:
        tag = first[pos]
        if tag >= 0x80 or BAD[tag] or tag == PROPS_TAG:
            return None
        at, wire = pos + 1, tag & 7
        if wire == 0 or wire == 2:
            size = 1
            while at + size <= end and first[at + size - 1] >= 0x80:
                size += 1
            if size > 9 or at + size > end or (wire == 2 and size > 5):  # lengths: varint32
                return None
            if wire == 2:
                length = 0
                for k in range(size):
                    length |= (first[at + k] & 0x7F) << (7 * k)
                out.append((pos, tag, at + size, length))
                pos = at + size + length
            else:
                out.append((pos, tag, at, size))
                pos = at + size
        else:
            size = 8 if wire == 1 else 4
            out.append((pos, tag, at, size))
            pos = at + size
    return out if pos == end else None


def same_layout(data: Bytes, starts: Int64s, ends: Int64s) -> SmmColumns | None:
    """Decode items whose metadata are all laid out like the first, or return None.

    "Laid out alike": the same size, the same tags at the same offsets, every
    varint of the same length (the continuation bits of its bytes agree) and
    every length prefix equal. That is the common case of one producer's
    items (payload size, sequence id, event time, a key of fixed length),
    and then each field sits at a fixed offset: it is read column-wise from an
    ``items x size`` byte matrix, with no walk. Anything else (properties,
    different layouts, anything the walk would refuse) returns None.
    """
    n = len(starts)
    if n < 2:
        return None
    size = int(ends[0] - starts[0])
    if not 0 < size <= _MAX_LAYOUT or (ends - starts != size).any():
        return None
    first = data[int(starts[0]) : int(starts[0]) + size].tobytes()
    fields = _layout(first)
    if fields is None:
        return None
    rows = data[starts[:, None] + np.arange(size)]  # one row per item
    template = np.frombuffer(first, np.uint8)
    exact: list[int] = []  # bytes every item has as the first has them
    cont: list[int] = []  # bytes whose continuation bit agrees
    for tag_at, tag, value_at, value_size in fields:
        exact.append(tag_at)
        if tag & 7 == 2:
            exact.extend(range(tag_at + 1, value_at))  # the length prefix
        elif tag & 7 == 0:
            cont.extend(range(value_at, value_at + value_size))
    if not (rows[:, exact] == template[exact]).all():
        return None
    if cont and not ((rows[:, cont] >= 0x80) == (template[cont] >= 0x80)).all():
        return None

    false = np.zeros(n, np.bool_)
    zeros = np.zeros(n, np.int64)
    numbers: dict[int, UInt64s] = {}  # varint slot -> its values
    lengths: dict[int, Int64s] = {}  # byte-string slot -> its lengths
    present: dict[int, int] = {}  # slot -> value offset of its last occurrence
    for _, tag, value_at, value_size in fields:
        slot = int(SMM_SLOTS[tag])
        if slot == 0:
            continue
        present[slot] = value_at
        if slot in _VARINT_SLOTS:
            value = np.zeros(n, np.uint64)
            for k in range(value_size):
                value |= (rows[:, value_at + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
            numbers[slot] = value
        else:
            lengths[slot] = np.full(n, value_size, np.int64)

    def flag(slot: int) -> Mask:
        return numbers[slot] != 0 if slot in numbers else false

    def number(slot: int) -> UInt64s:
        return numbers[slot] if slot in numbers else np.zeros(n, np.uint64)

    def span(slot: int) -> tuple[Mask, Int64s, Int64s]:
        if slot not in present:
            return false, zeros, zeros
        return np.ones(n, np.bool_), starts + present[slot], lengths[slot]

    has_key, key_start, key_len = span(Slot.KEY)
    has_ordering, ordering_start, ordering_len = span(Slot.ORDERING)
    empty = np.zeros(0, np.int64)
    return SmmColumns(
        data=data,
        payload_size=number(Slot.PAYLOAD).astype(np.uint32).view(np.int32).astype(np.int64),
        has_payload_size=np.full(n, Slot.PAYLOAD in present),
        compacted_out=flag(Slot.COMPACTED),
        event_time=number(Slot.EVENT),
        partition_key_b64_encoded=flag(Slot.B64),
        has_sequence_id=np.full(n, Slot.SEQ in present),
        sequence_id=number(Slot.SEQ),
        null_value=flag(Slot.NULL_VALUE),
        null_partition_key=flag(Slot.NULL_KEY),
        has_key=has_key,
        key_start=key_start,
        key_len=key_len,
        has_ordering_key=has_ordering,
        ordering_key_start=ordering_start,
        ordering_key_len=ordering_len,
        prop_offsets=np.zeros(n + 1, np.int32),
        prop_key_start=empty,
        prop_key_len=empty,
        prop_value_start=empty,
        prop_value_len=empty,
    )
