"""Protobuf varints read at many positions at once with NumPy (value, length, ok)."""

from __future__ import annotations

import numpy as np

from .arrays import Bytes, Int64s, Ints, Mask, UInt64s

__all__ = ["data_start", "long_varints", "varints"]

_AR10 = np.arange(10, dtype=np.int64)
_SHIFT7 = (7 * _AR10).astype(np.uint64)
_ONE = np.uint64(1)
_HIGH_BITS = np.uint64(0x8080808080808080)
_LOW_BITS = np.uint64(0x7F7F7F7F7F7F7F7F)
#: (keep, move, shift) that pack eight 7-bit groups into 56 bits in three steps.
_PACK = [
    (np.uint64(keep), np.uint64(move), np.uint64(shift))
    for keep, move, shift in (
        (0x007F007F007F007F, 0x7F007F007F007F00, 1),
        (0x00003FFF00003FFF, 0x3FFF00003FFF0000, 2),
        (0x000000000FFFFFFF, 0x0FFFFFFF00000000, 4),
    )
]


def varints(data: Bytes, at: Ints) -> tuple[UInt64s, Ints, Mask]:
    """Decode a varint at each position: (value uint64, length, ok).

    ``ok`` is false for a varint longer than 10 bytes. Bytes past the end of
    ``data`` read as its last byte: callers reject such varints by their end.
    """
    first = data.take(at, mode="clip")
    value = first.astype(np.uint64)
    length = np.ones(len(at), np.int64)
    ok = np.ones(len(at), bool)
    high = np.flatnonzero(first >= 0x80)
    if len(high):
        value[high], length[high], ok[high] = long_varints(data, at.take(high))
    return value, length, ok


def long_varints(data: Bytes, at: Ints) -> tuple[UInt64s, Ints, Mask]:
    """:func:`varints` where every first byte has its high bit set."""
    if len(at) <= 64:  # fewer calls for a few
        return _varints_window(data, at)
    limit = len(data) - 8
    if at.max() > limit:  # too near the end for an 8-byte load: the slow way
        near = at > limit
        far = ~near
        value, length = np.zeros(len(at), np.uint64), np.zeros(len(at), np.int64)
        ok = np.zeros(len(at), bool)
        value[near], length[near], ok[near] = _varints_window(data, at[near])
        if far.any():
            value[far], length[far], ok[far] = long_varints(data, at[far])
        return value, length, ok
    # Load 8 bytes at each position; the lowest clear high bit ends the varint.
    words = np.ndarray((limit + 1,), "<u8", data, 0, (1,))[at]
    stop = ~words
    stop &= _HIGH_BITS
    last = ~stop
    last += _ONE
    last &= stop  # 2 ** (8 * length - 1); 0 for 9 bytes or more
    # Its float64 exponent is 8 * length - 1, biased by 1023.
    length = last.astype(np.float64).view(np.int64)
    length >>= 52
    length -= 1015
    length >>= 3
    # Drop the bytes after the varint and the high bits, then pack 7-bit groups.
    value = last
    value -= _ONE
    value &= words
    value &= _LOW_BITS
    for keep, move, shift in _PACK:
        moved = value & move
        moved >>= shift
        value &= keep
        value |= moved
    ok = np.ones(len(at), bool)
    longer = np.flatnonzero(stop == 0)  # rare
    if len(longer):
        value[longer], length[longer], ok[longer] = _varints_window(data, at.take(longer))
    return value, length, ok


def _varints_window(data: Bytes, at: Ints) -> tuple[UInt64s, Ints, Mask]:
    """:func:`varints` for any varint, from a 10-byte window (slower)."""
    window = data.take(at[:, None] + _AR10, mode="clip")
    more = window >= 0x80
    last = more.argmin(axis=1)  # first byte without the continuation bit
    ok = ~more[np.arange(len(at)), last]  # all 10 continue: too long
    groups = (window & 0x7F).astype(np.uint64) << _SHIFT7
    groups[last[:, None] < _AR10] = 0
    return groups.sum(axis=1, dtype=np.uint64), last + 1, ok


def data_start(data: Bytes, vpos: Ints) -> Int64s:
    """Where the bytes of length-delimited fields start, from their value positions; 0 if absent."""
    pos = vpos.astype(np.int64)
    start = pos + 1
    has = pos >= 0
    long_len = np.flatnonzero((data.take(pos, mode="clip") >= 0x80) & has)
    if len(long_len):
        start[long_len] = pos.take(long_len) + long_varints(data, pos.take(long_len))[1]
    start[~has] = 0
    return start
