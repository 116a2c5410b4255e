"""The protobuf wire read for typed values: every field of many messages found at once with
NumPy (:func:`walk`), and packed repeated values split into their elements (:func:`unpack`).

Wire grammar (as :mod:`pulsar_spark.columnar.rows.smm.columns` reads it, for any field number)::

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
the item's row (:class:`~pulsar_spark.columnar.values.avro.lanes.Failures`): the walk leaves that
range.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from pulsar_spark.protocol.errors import WireError
from pulsar_spark.protocol.wire import read_varint

from ...arrays import Bytes, Int64s, Ints, Mask, UInt64s
from ...varints import varints
from ..avro.lanes import Failures

__all__ = ["Found", "unpack", "walk"]

_U32 = np.uint64(0xFFFFFFFF)
_U64 = 0xFFFF_FFFF_FFFF_FFFF
#: A walk reads the fields of its last few ranges (at most this many) one by one...
_FEW_LEFT = 8
#: ...once it has taken this many steps.
_MANY_STEPS = 64
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
    parts: list[tuple[Int64s, Int64s, NDArray[np.int8], Int64s, UInt64s, Int64s]] = []
    active = np.flatnonzero(starts < ends)
    pos, end = starts[active], ends[active]
    step = 0
    while len(active):
        if len(active) <= _FEW_LEFT and step >= _MANY_STEPS:
            # A few long messages left: a step of array calls per field would cost more
            # than reading their fields one by one.
            tail = _walk_few(data, active, pos, end, step, rows, starts, failures, names, path)
            parts.append(tail)
            break
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
        taken = active[good]
        ranks = np.full(len(taken), step, np.int64)
        parts.append((taken, number[good], wire[good], vpos[good], value[good], ranks))
        step += 1
        more = (nxt < end) & ~bad
        if more.all():
            pos = nxt
        else:
            keep = np.flatnonzero(more)
            active, pos, end = active[keep], nxt[keep], end[keep]
    if not parts:
        empty = np.zeros(0, np.int64)
        return Found(empty, empty, np.zeros(0, np.int8), empty, np.zeros(0, np.uint64))
    ranges, number, wire, vpos, value, ranks = (np.concatenate(c) for c in zip(*parts, strict=True))
    if len(parts) > 1:
        # The k-th field of a range is read at step k (or ranked k by the tail): the
        # (range, rank) order is a scatter, not a sort.
        counts = np.bincount(ranges, minlength=len(starts))
        heads = np.cumsum(counts) - counts
        order = np.empty(len(ranges), np.int64)
        order[heads[ranges] + ranks] = np.arange(len(ranges))
        ranges, number, wire = ranges[order], number[order], wire[order]
        vpos, value = vpos[order], value[order]
    return Found(items[ranges], number, wire, vpos, value)


def _walk_few(
    data: Bytes,
    active: Int64s,
    pos: Int64s,
    end: Int64s,
    step: int,
    rows: Int64s,
    starts: Int64s,
    failures: Failures,
    names: dict[int, str],
    path: str,
) -> tuple[Int64s, Int64s, NDArray[np.int8], Int64s, UInt64s, Int64s]:
    """The rest of the fields of a few ranges, read one at a time (ranked from ``step``)."""
    view = memoryview(data.data)
    out: list[tuple[int, int, int, int, int, int]] = []
    for r, p, e in zip(active.tolist(), pos.tolist(), end.tolist(), strict=True):
        rank = step
        while p < e:
            at = p
            try:
                tag, p = read_varint(view, p, e)
            except WireError:  # cut off or over-long
                tag = -1
            else:
                tag &= _U64
            number, wire = tag >> 3, tag & 7
            if tag < 0 or p - at > 5 or tag > 0xFFFFFFFF or number == 0 or wire not in (0, 1, 2, 5):
                reason = f"an invalid tag (field {number}, wire type {wire})"
                if wire in (3, 4):
                    reason = f"field {number} is a group (wire type {wire}), which is not supported"
                _fail_one(failures, rows[r], names.get(number, path), reason, at - starts[r])
                break
            value = 0
            vpos = p
            if wire in (0, 2):
                try:
                    value, p = read_varint(view, p, e)
                except WireError:  # cut off or over-long
                    value = -1
                else:
                    value &= _U64
                if wire == 2:
                    fits = 0 <= value < 2**31 and p - vpos <= 5
                    vpos = p
                    p = p + value if fits else e + 1
            else:
                p += 8 if wire == 1 else 4
            if value < 0 or p > e:
                reason = (
                    f"field {number} (wire type {wire}) runs past the end or has an "
                    "over-long varint"
                )
                _fail_one(failures, rows[r], names.get(number, path), reason, at - starts[r])
                break
            out.append((r, number, wire, vpos, value, rank))
            rank += 1
    if not out:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.int8), empty, np.zeros(0, np.uint64), empty
    columns = list(zip(*out, strict=True))
    return (
        np.array(columns[0], np.int64),
        np.array(columns[1], np.int64),
        np.array(columns[2], np.int8),
        np.array(columns[3], np.int64),
        np.array(columns[4], np.uint64),
        np.array(columns[5], np.int64),
    )


def _fail_one(failures: Failures, row: int, where: str, reason: str, offset: int) -> None:
    failures.add(np.array([row], np.int64), where, f"{reason} at offset {offset}", ())


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
