"""The walk: the fields of many messages read step by step, each step one field of every
message with whole-array operations; KeyValue pairs read directly or walked.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...arrays import Bytes, Int64s, Ints, UInt64s
from ...varints import data_start, long_varints
from .fields import read_fields, reason
from .schema import KV_KEY, KV_SLOTS, KV_VALUE, field_tag

__all__ = ["Walked", "key_values", "walk_fields"]


class Walked(NamedTuple):
    #: Flat ``(nslots + 1) x n`` tables: entry ``s * n + i`` is for the last
    #: field of slot ``s`` in message ``i``: where its value (after the tag)
    #: starts, or -1; and that value, a varint or (wire type 2) a length, or 0.
    #: Row 0 collects skipped fields.
    vpos: Ints
    vval: UInt64s
    #: Every field with the repeated tag: message, rank among the message's
    #: such fields, and the range of its bytes (after the length).
    rep_items: Ints
    rep_ranks: Ints
    rep_starts: Ints
    rep_ends: Ints
    #: How many fields with the repeated tag each message has.
    counts: Int64s


#: A walk hands its last few messages (at most this many) to :func:`_walk_each`...
_FEW_LEFT = 8
#: ...once it has taken this many steps: few long messages would otherwise take
#: one step of whole-array calls per field.
_MANY_STEPS = 64
#: Most positions read at once by :func:`_walk_each`.
_WINDOW = 1 << 16


def walk_fields(
    data: Bytes,
    starts: Int64s,
    ends: Int64s,
    slots: Int64s,
    nslots: int,
    repeated_tag: int,
    errors: list[tuple[int, str]],
) -> Walked:
    """Walk the fields of the messages at ``data[starts[i]:ends[i]]``, all at once.

    ``slots`` maps tag indexes to slots (0: skip); ``repeated_tag`` (-1: none)
    is a length-delimited tag whose every occurrence is kept. Failing messages
    are appended to ``errors`` as (index, reason), the lowest index of each
    step, and leave the walk.
    """
    n = len(starts)
    # Positions fit 32 bits in any buffer Arrow can hold: half the memory to fill.
    vpos = np.full((nslots + 1) * n, -1, np.int32 if len(data) < 2**31 else np.int64)
    vval = np.zeros((nslots + 1) * n, np.uint64)
    slot_base = slots * n
    reps = _Repeated(repeated_tag, np.zeros(n, np.int64))
    active = np.flatnonzero(starts < ends)
    pos: Ints  # where each active message's next field starts, and where it ends
    end: Ints
    pos, end = starts.take(active), ends.take(active)
    steps = 0
    while len(active):
        if len(active) <= _FEW_LEFT and steps >= _MANY_STEPS:
            _walk_each(data, active, pos, end, starts, slot_base, vpos, vval, reps, errors)
            break
        steps += 1
        f = read_fields(data, pos, end)
        if f.uniform >= 0 and len(active) == n:  # every message, one field: a row of the table
            base = int(slot_base[f.uniform])
            vpos[base : base + n] = f.vstart
            vval[base : base + n] = f.first
            if len(f.high):
                vval[f.high + base] = f.high_value
        else:
            if f.uniform >= 0:
                cell = active + int(slot_base[f.uniform])
            else:
                cell = slot_base.take(f.tag) + active
            vpos[cell] = f.vstart
            vval[cell] = f.first
            if len(f.high):
                vval[cell.take(f.high)] = f.high_value
        if f.bad is not None:
            k = int(np.flatnonzero(f.bad)[np.argmin(active[f.bad])])  # lowest message
            i = int(active[k])
            errors.append((i, reason(f, k, pos[k] - starts[i], end[k] - starts[i])))
        if repeated_tag >= 0 and f.uniform in (-1, repeated_tag):
            if f.uniform >= 0 and f.bad is None:
                rep: slice | Ints = slice(None)
            else:
                is_rep = f.tag == repeated_tag
                if f.bad is not None:
                    is_rep &= ~f.bad
                rep = np.flatnonzero(is_rep)
            items = active[rep]
            ranks = reps.counts.take(items)
            reps.counts[items] = ranks + 1
            reps.add(data, items, ranks, f.vstart[rep], f.first[rep], f.nxt[rep])
        if f.bad is None and f.left.all():
            pos = f.nxt
        else:
            more = f.left > 0
            if f.bad is not None:
                more &= ~f.bad
            keep = np.flatnonzero(more)
            active, pos, end = active.take(keep), f.nxt.take(keep), end.take(keep)
    return Walked(vpos, vval, *reps.arrays(), reps.counts)


class _Repeated:
    """The fields with the repeated tag found so far (see :class:`Walked`)."""

    def __init__(self, tag: int, counts: Int64s) -> None:
        self.tag = tag
        self.counts = counts
        self.parts: list[tuple[Ints, Ints, Ints, Ints]] = []

    def add(
        self,
        data: Bytes,
        items: Ints,
        ranks: Ints,
        vstart: Ints,
        first: Bytes,
        nxt: Ints,
    ) -> None:
        if not len(items):
            return
        start = vstart + 1  # after a 1-byte length
        long_len = np.flatnonzero(first >= 0x80)
        if len(long_len):
            start[long_len] += long_varints(data, vstart.take(long_len))[1] - 1
        self.parts.append((items, ranks, start, nxt))

    def arrays(self) -> tuple[Ints, Ints, Ints, Ints]:
        """Items, ranks, starts and ends of all the fields found."""
        if not self.parts:
            empty = np.zeros(0, np.int64)
            return empty, empty, empty, empty
        items, ranks, starts, ends = (
            np.concatenate(column) for column in zip(*self.parts, strict=True)
        )
        return items, ranks, starts, ends


def _walk_each(
    data: Bytes,
    active: Ints,
    pos: Ints,
    end: Ints,
    starts: Int64s,
    slot_base: Int64s,
    vpos: Ints,
    vval: UInt64s,
    reps: _Repeated,
    errors: list[tuple[int, str]],
) -> None:
    """Finish the walk of a few messages, one at a time, with many fields left.

    Every position of a window of the message is read as if a field started
    there; the chain of its real fields is then followed through the results
    (a list lookup per field) and applied at once. Windows widen over short
    fields and narrow over long ones.
    """
    narrow = min(_WINDOW, 256)
    for i, p0, e in zip(active.tolist(), pos.tolist(), end.tolist(), strict=True):
        p = p0
        width = narrow
        while p < e:
            base = p
            at = np.arange(p, min(e, p + width))
            f = read_fields(data, at, np.full(len(at), e))
            nxt = f.nxt.tolist()
            bad = f.bad.tolist() if f.bad is not None else None
            chain = []
            stop = base + len(at)
            while p < stop:
                k = p - base
                if bad is not None and bad[k]:
                    errors.append((i, reason(f, k, p - starts[i], e - starts[i])))
                    e = p  # nothing more of this message
                    break
                chain.append(k)
                p = nxt[k]
            # Wider windows while fields are short, narrower over long ones
            # (whose bytes are then mostly not read at all).
            dense = 8 * len(chain) >= len(at)
            width = min(_WINDOW, 2 * width) if dense else max(narrow, width // 2)
            c = np.array(chain, np.int64)
            tag = f.tag.take(c) if f.uniform < 0 else np.full(len(c), f.uniform)
            value = f.first.astype(np.uint64)
            value[f.high] = f.high_value
            value = value.take(c)
            vstart = f.vstart.take(c)
            # The last field of each slot wins: keep last occurrences only.
            cell = slot_base.take(tag) + i
            _, last = np.unique(cell[::-1], return_index=True)
            last = len(c) - 1 - last
            vpos[cell.take(last)] = vstart.take(last)
            vval[cell.take(last)] = value.take(last)
            if reps.tag >= 0:
                rep = np.flatnonzero(tag == reps.tag)
                if len(rep):
                    ranks = np.arange(len(rep)) + reps.counts[i]
                    reps.counts[i] += len(rep)
                    first = f.first.take(c.take(rep))
                    items = np.full(len(rep), i)
                    reps.add(data, items, ranks, vstart.take(rep), first, f.nxt.take(c.take(rep)))


def key_values(
    data: Bytes, starts: Int64s, ends: Int64s, errors: list[tuple[int, str]]
) -> tuple[Int64s, Int64s, Int64s, Int64s]:
    """(key start, key length, value start, value length) of KeyValue messages.

    Those laid out as protobuf writes them, ``0x0a len key 0x12 len value``
    with lengths below 128, are read directly; the others are walked.
    """
    take = data.take
    key_len8 = take(starts + 1, mode="clip")
    key_len = key_len8.astype(np.int64)
    value_tag = starts + 2
    value_tag += key_len
    value_len8 = take(value_tag + 1, mode="clip")
    value_len = value_len8.astype(np.int64)
    value_start = value_tag + 2
    # All four bytes read lie inside the message when its end matches.
    plain = value_start + value_len == ends
    plain &= ends - starts >= 4
    plain &= take(starts, mode="clip") == field_tag(1, 2)
    plain &= take(value_tag, mode="clip") == field_tag(2, 2)
    plain &= (key_len8 | value_len8) < 0x80
    key_start = starts + 2
    if plain.all():
        return key_start, key_len, value_start, value_len
    other = np.flatnonzero(~plain)
    walk_errors: list[tuple[int, str]] = []
    walk = walk_fields(data, starts.take(other), ends.take(other), KV_SLOTS, 2, -1, walk_errors)
    errors.extend((int(other[i]), reason) for i, reason in walk_errors)
    m = len(other)
    for slot, start, length in ((KV_KEY, key_start, key_len), (KV_VALUE, value_start, value_len)):
        start[other] = data_start(data, walk.vpos[slot * m : (slot + 1) * m])
        length[other] = walk.vval[slot * m : (slot + 1) * m]
    return key_start, key_len, value_start, value_len
