"""One protobuf field read at each of many positions at once: its tag, value and end."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...arrays import Bytes, Ints, Mask, UInt64s
from ...varints import long_varints, varints
from .schema import ADV, LENF, VAR

__all__ = ["Fields", "read_fields", "reason"]

_SEVEN = np.uint64(7)
_NO_VALUES = np.zeros(0, np.uint64)


class Fields(NamedTuple):
    """One field read at each of many positions (see :func:`read_fields`)."""

    #: Tag index (see ``NTAGS``), and that index when it is the same for all, else -1.
    tag: Ints
    uniform: int
    #: Where the value starts (after the tag), its first byte, where the field ends.
    vstart: Ints
    first: Bytes
    nxt: Ints
    #: ``end - nxt``: bytes left after the field.
    left: Ints
    #: Indexes of the fields whose value is a varint of several bytes; those values.
    high: Ints
    high_value: UInt64s
    #: Fields that cannot be read (None: all can); of those, tags that are not
    #: varint32, and over-long varints.
    bad: Mask | None
    tag_bad: Mask | None
    long_bad: Mask | None


def read_fields(data: Bytes, pos: Ints, end: Ints) -> Fields:
    """Read one field at each ``pos`` (< ``end``, its message's end), all at once."""
    tag8 = data.take(pos)  # pos < end <= len(data)
    vstart = pos + 1
    lowest, highest = int(tag8.min()), int(tag8.max())
    tag: Ints = tag8
    tag_bad = None
    if highest >= 0x80:  # some multi-byte tags
        tag = tag8.astype(np.intp)
        sub = np.flatnonzero(tag8 >= 0x80)
        value, length, ok = varints(data, pos.take(sub))
        ok &= (length <= 5) & (value <= 0xFFFFFFFF)
        tag[sub] = np.where(value < 128, value, 128 + (value & _SEVEN))
        vstart[sub] += length - 1
        if not ok.all():
            tag_bad = np.zeros(len(pos), bool)
            tag_bad[sub] = ~ok
        lowest, highest = int(tag.min()), int(tag.max())
    first = data.take(vstart, mode="clip")
    # End of the field when its value is a 1-byte varint, a length below 128
    # (plus that many bytes), or fixed; past any end when it is bad.
    uniform = lowest if lowest == highest else -1  # usual in a walk: all at the same field
    if uniform >= 0:
        nxt = vstart + int(ADV[uniform])
        if LENF[uniform]:
            nxt += first
    else:
        tag = tag.astype(np.intp)
        nxt = vstart + ADV.take(tag)
        nxt += first * LENF.take(tag)
    long_bad = None
    high = np.flatnonzero(first >= 0x80)
    if len(high):
        if uniform >= 0:
            if not VAR[uniform]:
                high = high[:0]
        else:
            high = high[VAR.take(tag.take(high))]
    high_value = _NO_VALUES
    if len(high):
        at = vstart.take(high)
        high_value, length, ok = long_varints(data, at)
        step = at + length
        lenf = LENF[uniform] if uniform >= 0 else LENF.take(tag.take(high))
        if lenf.any():  # lengths are varint32: 5 bytes at most, so < 2**35
            ok &= (lenf == 0) | (length <= 5)
            step += np.where((lenf != 0) & ok, high_value, 0).astype(np.int64)
        nxt[high] = step
        if not ok.all():
            long_bad = np.zeros(len(pos), bool)
            long_bad[high] = ~ok
    left = end - nxt
    bad = None
    if left.min() < 0 or tag_bad is not None or long_bad is not None:
        bad = left < 0
        if tag_bad is not None:
            bad |= tag_bad
        if long_bad is not None:
            bad |= long_bad
    return Fields(tag, uniform, vstart, first, nxt, left, high, high_value, bad, tag_bad, long_bad)


def reason(f: Fields, k: int, offset: int, size: int) -> str:
    """Why field ``k`` of ``f``, at ``offset`` in its ``size``-byte message, is bad."""
    t = f.uniform if f.uniform >= 0 else int(f.tag[k])
    field = t >> 3 if t < 128 else None
    wire = t & 7 if t < 128 else t - 128
    name = f"field {field} (wire type {wire})" if field is not None else f"wire type {wire}"
    at = f"at offset {offset}"
    if f.tag_bad is not None and f.tag_bad[k]:
        return f"tag {at} is not a varint32"
    if field == 0:
        return f"field number 0 {at}"
    if wire in (3, 4):
        return f"{name} {at} is a group, which is not supported"
    if wire in (6, 7):
        return f"invalid {name} {at}"
    if f.long_bad is not None and f.long_bad[k]:
        return f"{name} {at} has an over-long varint"
    return f"{name} {at} runs past the end ({size} bytes)"
