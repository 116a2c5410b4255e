"""Arrow binary, string and map arrays gathered from byte ranges of a buffer, without a
Python loop per element; the UTF-8 checks of binary arrays (:func:`utf8_errors`,
:func:`is_utf8`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol.errors import BatchDecodeError

from .arrays import BufferLike, Bytes, Int64s, Ints, Mask
from .rows.smm.schema import SmmColumns

__all__ = ["as_u8", "gather_binary", "gather_string", "is_utf8", "map_array", "utf8_errors"]

_MAX_ARROW_BYTES = 2**31 - 1


def gather_binary(
    buf: BufferLike,
    starts: Ints,
    lens: Ints,
    valid_mask: Mask | None = None,
) -> pa.Array:
    """A binary array of ``buf[starts[i]:starts[i] + lens[i]]``, copied in one gather.

    Element ``i`` is null where ``valid_mask`` is false (its range is then
    ignored).

    Raises:
        ValueError: a range outside ``buf``, or 2 GiB or more in total.
    """
    data = as_u8(buf)
    starts, lens, valid = _ranges(data, starts, lens, valid_mask)
    return _copy_ranges(data, starts, lens, valid)


def gather_string(
    buf: BufferLike,
    starts: Ints,
    lens: Ints,
    valid_mask: Mask | None = None,
) -> pa.Array:
    """Like :func:`gather_binary`, as a string array.

    Raises:
        BatchDecodeError: an element is not valid UTF-8; the message names it.
        ValueError: as for :func:`gather_binary`.
    """
    data = as_u8(buf)
    starts, lens, valid = _ranges(data, starts, lens, valid_mask)
    array = _copy_ranges(data, starts, lens, valid)
    index = _invalid_utf8(array)
    if index >= 0:
        msg = f"string {index} is not valid UTF-8"
        raise BatchDecodeError(msg)
    return array.view(pa.string())


def map_array(cols: SmmColumns) -> pa.MapArray:
    """The properties of every item as a ``map<string, string>`` array (no nulls).

    Raises:
        BatchDecodeError: a property key or value is not valid UTF-8; the
            message names the item and the property.
    """
    # Keys, then values, in one gather: the two arrays share its bytes.
    pairs = len(cols.prop_key_start)
    # Ranges in the order of the bytes (key, value, key, ...), taken keys first.
    starts = np.empty(2 * pairs, np.int64)
    starts[0::2], starts[1::2] = cols.prop_key_start, cols.prop_value_start
    lens = np.empty(2 * pairs, np.int64)
    lens[0::2], lens[1::2] = cols.prop_key_len, cols.prop_value_len
    order = np.concatenate((np.arange(0, 2 * pairs, 2), np.arange(1, 2 * pairs, 2)))
    both = _copy_ranges(cols.data, starts, lens, order=order)  # ranges checked by the decoder
    index = _invalid_utf8(both)
    if index >= 0:
        what, pair = ("key", index) if index < pairs else ("value", index - pairs)
        item = int(np.searchsorted(cols.prop_offsets, pair, "right")) - 1
        msg = (
            f"property {pair - int(cols.prop_offsets[item])} of batch item {item} has a "
            f"{what} that is not valid UTF-8"
        )
        raise BatchDecodeError(msg, item=item)
    both = both.view(pa.string())
    return pa.MapArray.from_arrays(
        pa.array(cols.prop_offsets, pa.int32()), both.slice(0, pairs), both.slice(pairs)
    )


def as_u8(buf: BufferLike) -> Bytes:
    if isinstance(buf, np.ndarray) and buf.dtype == np.uint8 and buf.ndim == 1:
        return np.ascontiguousarray(buf)
    return np.frombuffer(buf, np.uint8)


def _ranges(
    data: Bytes, starts: Ints, lens: Ints, valid_mask: Mask | None
) -> tuple[Int64s, Int64s, Mask | None]:
    """Checked ranges, and the mask (None when every element is valid)."""
    starts = np.asarray(starts, np.int64).reshape(-1)
    lens = np.asarray(lens, np.int64).reshape(-1)
    n = len(starts)
    if len(lens) != n:
        msg = f"{n} starts but {len(lens)} lengths"
        raise ValueError(msg)
    valid = None
    if valid_mask is not None:
        valid = np.asarray(valid_mask, bool).reshape(-1)
        if len(valid) != n:
            msg = f"{n} starts but a mask of {len(valid)}"
            raise ValueError(msg)
        if valid.all():
            valid = None
    bad = (lens < 0) | ((lens > 0) & ((starts < 0) | (starts + lens > len(data))))
    if valid is not None:
        bad &= valid
    if bad.any():
        msg = f"a byte range lies outside the {len(data)}-byte buffer"
        raise ValueError(msg)
    return starts, lens, valid


def _copy_ranges(
    data: Bytes,
    starts: Int64s,
    lens: Int64s,
    valid: Mask | None = None,
    *,
    order: Ints | None = None,
) -> pa.Array:
    """A binary array of ``data[starts[i]:starts[i] + lens[i]]``, null where not ``valid``;
    with ``order``, of the ranges ``order[0], order[1], ...`` (no ``valid`` then)."""
    if valid is not None:
        lens = np.where(valid, lens, 0)
    if len(data) <= _MAX_ARROW_BYTES and len(starts):
        taken = _take_ranges(data, starts, lens, valid, order)
        if taken is not None:
            return taken
    if order is not None:
        starts, lens = starts[order], lens[order]
    offsets = np.zeros(len(starts) + 1, np.int64)
    np.cumsum(lens, out=offsets[1:])
    total = int(offsets[-1])
    if total > _MAX_ARROW_BYTES:
        msg = f"{total} bytes do not fit one Arrow array"
        raise ValueError(msg)
    if total:
        # Source index of every output byte: its own offset plus the shift of
        # its range (start - offset), repeated over the range's bytes.
        index = np.repeat(starts - offsets[:-1], lens)
        index += np.arange(total, dtype=np.int64)
        chunk = data.take(index)
    else:
        chunk = np.zeros(0, np.uint8)
    validity = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        pa.binary(),
        len(starts),
        [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(chunk)],
        null_count=0 if valid is None else len(valid) - int(np.count_nonzero(valid)),
    )


def _take_ranges(
    data: Bytes,
    starts: Int64s,
    lens: Int64s,
    valid: Mask | None,
    order: Ints | None,
) -> pa.Array | None:
    """:func:`_copy_ranges` for ranges in order that do not overlap (keys and
    properties, item after item): a binary array over ``data`` whose elements
    are the ranges and the gaps between them, of which Arrow's take copies the
    ranges. None when the ranges are not in order. ``lens`` is 0 where not valid.
    """
    if not data.flags.c_contiguous:
        return None
    n = len(starts)
    ends = starts + lens
    # An empty range sits where the previous ones end, so the bounds stay in order.
    reached = np.maximum.accumulate(np.where(lens > 0, ends, 0))
    first = np.where(lens > 0, starts, reached)
    bounds = np.empty(2 * n, np.int64)
    bounds[0::2] = first
    bounds[1::2] = np.where(lens > 0, ends, reached)
    if bounds[0] < 0 or (n > 1 and (bounds[1:] < bounds[:-1]).any()):
        return None
    segments = pa.Array.from_buffers(
        pa.binary(), 2 * n - 1, [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(data)]
    )
    index = np.arange(0, 2 * n, 2, dtype=np.int64) if order is None else 2 * order
    return segments.take(pa.array(index, mask=None if valid is None else ~valid))


def utf8_errors(binary: pa.Array) -> Mask | None:
    """Which elements of a binary array are not UTF-8; None when all are."""
    if not len(binary):
        return None
    data = binary.buffers()[2]
    if data is None:
        return None
    offsets = np.frombuffer(binary.buffers()[1], np.int32, len(binary) + 1, 4 * binary.offset)
    chunk = np.frombuffer(data, np.uint8, int(offsets[-1] - offsets[0]), int(offsets[0]))
    if not len(chunk) or chunk.max() < 0x80:
        return None
    try:
        binary.view(pa.string()).validate(full=True)
    except pa.ArrowInvalid:
        pass
    else:
        return None
    # Error path only: find the elements.
    return np.array([not is_utf8(v) for v in binary.to_pylist()], bool)


def _invalid_utf8(array: pa.Array) -> int:
    """Index of the first element of a binary array that is not UTF-8, or -1.

    The elements are all UTF-8 when the bytes of all of them are and none
    starts with a continuation byte (``10xxxxxx``): each then starts, and so
    ends, on a character boundary.
    """
    n = len(array)
    if not n:
        return -1
    offsets = np.frombuffer(array.buffers()[1], np.int32, n + 1, 4 * array.offset)
    lo, hi = int(offsets[0]), int(offsets[-1])
    chunk = np.frombuffer(array.buffers()[2], np.uint8, hi - lo, lo) if hi > lo else None
    if chunk is None or chunk.max() < 0x80:
        return -1
    firsts = offsets[:-1]
    firsts = firsts[firsts < hi] - lo  # an empty element ends the bytes: nothing to check
    if not ((chunk.take(firsts) & 0xC0) == 0x80).any():
        whole = pa.Array.from_buffers(
            pa.string(),
            1,
            [None, pa.py_buffer(np.array([0, hi - lo], np.int32)), pa.py_buffer(chunk)],
        )
        try:
            whole.validate(full=True)
        except pa.ArrowInvalid:
            pass
        else:
            return -1
    # Error path only: find the element.
    for index, value in enumerate(array.to_pylist()):
        if not is_utf8(value):
            return index
    return -1


def is_utf8(value: bytes | None) -> bool:
    """Whether ``value`` is valid UTF-8 (None is: a null has no text to check)."""
    try:
        if value is not None:
            value.decode()
    except UnicodeDecodeError:
        return False
    return True
