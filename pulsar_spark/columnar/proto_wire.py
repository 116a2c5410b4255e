"""The protobuf wire read for typed values: every field of many messages found at once with
NumPy (:func:`walk`), and packed repeated values split into their elements (:func:`unpack`).

Wire grammar (as :mod:`.smm_columns` reads it, for any field number)::

    message = field*                         ends exactly at the message's end
    field   = tag value                      tag: varint[1..5] < 2**32, number >= 1
    value   = varint[1..10]                  wire type 0
            | fixed[8] | fixed[4]            wire types 1 and 5
            | length:varint[1..5] bytes      wire type 2, inside the message

Step ``k`` of the walk reads the ``k``-th field of every message still being
read. A message may be made of several byte ranges (a singular message field
that occurs more than once is their merge, which parses as their
concatenation), so the walk runs over ranges, each with the item it belongs
to. Groups (wire types 3 and 4), wire types 6 and 7, field number 0,
over-long varints and fields running past their range's end are errors of
the item's row (:class:`~.avro_lanes.Failures`): the walk leaves that range.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from .arrays import Bytes, Int64s, Ints, Mask, UInt64s
from .avro_lanes import Failures
from .varints import varints

__all__ = ["Found", "unpack", "walk"]

_U32 = np.uint64(0xFFFFFFFF)
_SEVEN = np.uint64(7)
_THREE = np.uint64(3)


class Found(NamedTuple):
    """Every field found, in wire order within each item (items ascending)."""

    item: Int64s
    number: Int64s
    wire: NDArray[np.int8]
    #: Where the value starts (for wire type 2: its bytes, after the length).
    pos: Int64s
    #: The varint (wire type 0), the length (wire type 2), else 0.
    value: UInt64s


def walk(
    data: Bytes,
    starts: Int64s,
    ends: Int64s,
    items: Int64s,
    rows: Int64s,
    failures: Failures,
    names: dict[int, str],
    path: str,
) -> Found:
    """The fields of the byte ranges ``data[starts[r]:ends[r]]``, range ``r`` belonging to
    item ``items[r]`` (ranges of an item in wire order) and to row ``rows[r]`` (errors).
    ``names`` gives fields' paths for errors (``path`` for other field numbers)."""
    parts: list[tuple[Int64s, Int64s, NDArray[np.int8], Int64s, UInt64s]] = []
    active = np.flatnonzero(starts < ends)
    pos, end = starts[active], ends[active]
    while len(active):
        tag, tag_len, ok = varints(data, pos)
        vstart = pos + tag_len
        first = int(tag[0])
        if first & 7 in (0, 1, 2, 5) and 8 <= first <= 0xFFFFFFFF and (tag == tag[0]).all():
            # Usual: every range at the same field (one producer's messages).
            number, wire, vpos, value, nxt, bad = _uniform(data, first, vstart, tag_len, ok)
        else:
            wire = (tag & _SEVEN).astype(np.int8)
            number = (tag >> _THREE).astype(np.int64)
            bad = ~ok | (tag_len > 5) | (tag > _U32) | (number == 0) | (wire > 5) | (wire == 3)
            bad |= wire == 4
            value = np.zeros(len(active), np.uint64)
            nxt = vstart.copy()
            vpos = vstart.copy()
            _values(data, wire, vstart, value, nxt, vpos, bad)
        bad |= nxt > end
        if bad.any():
            _fail(failures, rows[active], bad, number, wire, pos - starts[active], names, path)
        good = np.flatnonzero(~bad) if bad.any() else slice(None)
        parts.append((active[good], number[good], wire[good], vpos[good], value[good]))
        more = (nxt < end) & ~bad
        if more.all():
            pos = nxt
        else:
            keep = np.flatnonzero(more)
            active, pos, end = active[keep], nxt[keep], end[keep]
    if not parts:
        empty = np.zeros(0, np.int64)
        return Found(empty, empty, np.zeros(0, np.int8), empty, np.zeros(0, np.uint64))
    ranges, number, wire, vpos, value = (np.concatenate(c) for c in zip(*parts, strict=True))
    if len(parts) > 1:
        # Step k reads the k-th field of every range still read: that is its rank in
        # the range, so (range, step) order is a scatter, not a sort.
        steps = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
        counts = np.bincount(ranges, minlength=len(starts))
        heads = np.cumsum(counts) - counts
        order = np.empty(len(ranges), np.int64)
        order[heads[ranges] + steps] = np.arange(len(ranges))
        ranges, number, wire = ranges[order], number[order], wire[order]
        vpos, value = vpos[order], value[order]
    return Found(items[ranges], number, wire, vpos, value)


def _uniform(
    data: Bytes, tag: int, vstart: Int64s, tag_len: Ints, ok: Mask
) -> tuple[Int64s, NDArray[np.int8], Int64s, UInt64s, Int64s, Mask]:
    """A step where every field has the same (valid) tag: number, wire, value position,
    value, end of each field, and which are bad."""
    n = len(vstart)
    wire = tag & 7
    bad = ~ok | (tag_len > 5)
    vpos = vstart
    if wire in (0, 2):
        value, length, good = varints(data, vstart)
        nxt = vstart + length
        bad |= ~good
        if wire == 2:
            too_long = (length > 5) | (value > np.uint64(2**31 - 1))
            if too_long.any():
                bad |= too_long
                value = np.where(too_long, np.uint64(0), value)
            vpos = nxt
            nxt = nxt + value.astype(np.int64)
    else:
        value = np.zeros(n, np.uint64)
        nxt = vstart + (8 if wire == 1 else 4)
    number = np.full(n, tag >> 3, np.int64)
    return number, np.full(n, wire, np.int8), vpos, value, nxt, bad


def _values(
    data: Bytes, wire: Ints, vstart: Int64s, value: UInt64s, nxt: Int64s, vpos: Int64s, bad: Mask
) -> None:
    """Values and ends of fields of mixed wire types, in place."""
    var = np.flatnonzero((wire == 0) | (wire == 2))
    if len(var):
        v, length, ok = varints(data, vstart[var])
        value[var] = v
        nxt[var] += length
        bad[var] |= ~ok
        lengthy = wire[var] == 2
        if lengthy.any():
            sub = var[lengthy]
            too_long = (length[lengthy] > 5) | (v[lengthy] > np.uint64(2**31 - 1))
            bad[sub] |= too_long
            size = np.where(too_long, 0, v[lengthy]).astype(np.int64)
            vpos[sub] = nxt[sub]
            nxt[sub] += size
    nxt[wire == 1] += 8
    nxt[wire == 5] += 4


def _fail(
    failures: Failures,
    rows: Int64s,
    bad: Mask,
    number: Int64s,
    wire: NDArray[np.int8],
    offset: Int64s,
    names: dict[int, str],
    path: str,
) -> None:
    """Report the bad fields of one step, grouped by what is wrong."""
    index = np.flatnonzero(bad)
    kinds = np.where(
        (number[index] == 0) | (wire[index] > 5),
        0,
        np.where((wire[index] == 3) | (wire[index] == 4), 1, 2),
    )
    texts = (
        "an invalid tag (field {0}, wire type {1}) at offset {2}",
        "field {0} at offset {2} is a group (wire type {1}), which is not supported",
        "field {0} (wire type {1}) at offset {2} runs past the end or has an over-long varint",
    )
    for kind in np.unique(kinds).tolist():
        sel = index[kinds == kind]
        numbers = number[sel]
        first = int(numbers[np.argmin(rows[sel])])
        where = names.get(first, path) if kind else path
        values = (numbers, wire[sel].astype(np.int64), offset[sel])
        failures.add(rows[sel], where, texts[kind], values)


def unpack(
    data: Bytes,
    pos: Int64s,
    length: Int64s,
    width: int,
    rows: Int64s,
    failures: Failures,
    path: str,
) -> tuple[Int64s, Int64s, UInt64s]:
    """Split packed values (``length`` bytes at ``pos`` each): the count of each, and
    the position and (for varints, ``width`` 0) value of every element in order.
    Packed bytes that do not split evenly are the row's error (count 0)."""
    if width:
        counts = length // width
        uneven = counts * width != length
        if uneven.any():
            failures.add(rows[uneven], path, "packed values of {0} bytes are not a whole number "
                         f"of {width}-byte values", (length[uneven],))  # fmt: skip
            counts[uneven] = 0
        total = int(counts.sum())
        first = np.cumsum(counts) - counts
        rank = np.arange(total, dtype=np.int64) - np.repeat(first, counts)
        return counts, np.repeat(pos, counts) + width * rank, np.zeros(total, np.uint64)
    total = int(length.sum())
    first = np.cumsum(length) - length
    at = np.arange(total, dtype=np.int64) + np.repeat(pos - first, length)
    owner = np.repeat(np.arange(len(pos)), length)
    stops = data[at] < 0x80
    last = first + length - 1
    truncated = (length > 0) & ~stops[np.maximum(last, 0)] if total else np.zeros(len(pos), bool)
    if truncated.any():
        failures.add(rows[truncated], path, "packed varints end inside a varint", ())
        stops[last[truncated]] = True  # cut there: the row is failed anyway
    ends = at[stops]
    counts = np.bincount(owner[stops], minlength=len(pos)).astype(np.int64)
    begins = np.empty(len(ends), np.int64)
    if len(ends):
        begins[1:] = ends[:-1] + 1
        heads = np.cumsum(counts) - counts
        nonempty = counts > 0
        begins[heads[nonempty]] = pos[nonempty]
    values, size, ok = varints(data, begins)
    ok &= begins + size == ends + 1
    if not ok.all():
        element_rows = np.repeat(rows, counts)
        failures.add(element_rows[~ok], path, "a packed varint is over-long", ())
    return counts, begins, values
