"""Where the items of batch payloads lie, found without building protobuf objects.

Wire grammar of a batch payload (after decompression), as :mod:`.batch` has it::

    batch   = item{N}
    item    = smm_size:u32  smm[smm_size]  payload[payload_size]
    smm     = field*        payload_size is field 3, wire type 0 (tag 0x18)

Finding item ``k + 1`` needs item ``k``'s ``payload_size``, so a batch is a
chain. Three ways along it, all ending in the same check:

* :func:`locate_uniform`, for many batches at once with whole-array calls:
  guess that every item of a batch is as long as its first (fixed-size
  records from one producer, the common case), and keep the guess for the
  batches where every guessed item starts with the first one's ``smm_size``
  and the items tile the payload exactly.
* :func:`locate_by_headers`, also for many batches at once: metadata are
  shorter than 256 bytes, so every ``smm_size`` begins with three zero bytes;
  where payloads have no such run (text, JSON), the runs are the items, and a
  payload's size is the distance from its start to the next run.
* :func:`locate_items`, one batch, a short Python loop per item that reads
  ``smm_size`` and the first ``payload_size`` field.

Neither decodes the rest of the metadata, and neither is the last word: the
caller decodes every item's metadata with
:func:`pulsar_spark.columnar.rows.smm.columns.decode_smm_columns`
and compares its ``payload_size`` (the last occurrence wins, as in protobuf)
with the length used here. A batch that differs is split again by
:func:`.batch.split_batch`, whose errors name the item at fault.
"""

from __future__ import annotations

import struct

import numpy as np

from pulsar_spark.protocol.errors import BatchDecodeError, WireError
from pulsar_spark.protocol.wire import read_varint

from ..arrays import Bytes, Int64s, Ints, Mask

__all__ = ["locate_by_headers", "locate_items", "locate_uniform"]

_PAYLOAD_SIZE_TAG = 0x18
_SCAN = 1 << 20
_U32 = struct.Struct(">I")


def locate_items(data: bytes | bytearray | memoryview, count: int) -> tuple[list[int], list[int]]:
    """Payload start and size of each of the ``count`` items of one batch payload.

    Raises:
        BatchDecodeError: an item runs past the payload, its metadata has no
            readable ``payload_size``, or bytes are left after the last item.
    """
    # Indexing bytes is quicker than indexing a memoryview: one copy pays for itself.
    view = data if isinstance(data, bytes) else bytes(data)
    end = len(view)
    starts: list[int] = []
    sizes: list[int] = []
    add_start, add_size = starts.append, sizes.append
    unpack = _U32.unpack_from
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            msg = f"batch item {index} at byte {pos} is cut off before its metadata size"
            raise BatchDecodeError(msg, item=index)
        smm = pos + 4
        smm_end = smm + unpack(view, pos)[0]
        if smm_end > end:
            msg = (
                f"metadata of batch item {index} ({smm_end - smm} bytes at byte {smm}) runs "
                f"past the end of the {end}-byte payload"
            )
            raise BatchDecodeError(msg, item=index)
        # Skip the fields before payload_size (properties, key: short ones inline),
        # then read it when it is a 1- or 2-byte varint; anything else walks.
        q = smm
        while True:
            if q + 1 >= smm_end:
                size = _payload_size(view, smm, smm_end, index)
                break
            tag, value = view[q], view[q + 1]
            if tag == _PAYLOAD_SIZE_TAG:
                if value < 0x80:
                    size = value
                elif q + 2 < smm_end and view[q + 2] < 0x80:
                    size = (value & 0x7F) | view[q + 2] << 7
                else:
                    size = _payload_size(view, smm, smm_end, index)
                break
            if value < 0x80 and tag < 0x80:
                wire = tag & 7
                if wire == 2:
                    q += 2 + value
                    continue
                if wire == 0:
                    q += 2
                    continue
            size = _payload_size(view, smm, smm_end, index)
            break
        pos = smm_end + size
        if pos > end:
            msg = (
                f"payload of batch item {index} ({size} bytes at byte {smm_end}) runs "
                f"past the end of the {end}-byte payload"
            )
            raise BatchDecodeError(msg, item=index)
        add_start(smm_end)
        add_size(size)
    if pos != end:
        msg = f"{end - pos} bytes are left after the {count} messages the batch declares"
        raise BatchDecodeError(msg)
    return starts, sizes


def _payload_size(view: bytes | memoryview, pos: int, end: int, index: int) -> int:
    """The first ``payload_size`` in the metadata at ``view[pos:end]``, by walking its fields."""
    try:
        while pos < end:
            tag, pos = read_varint(view, pos, end)
            wire = tag & 7
            if tag == _PAYLOAD_SIZE_TAG:
                value, _ = read_varint(view, pos, end)
                size = value & 0xFFFF_FFFF
                if size & 0x8000_0000:  # an int32 below zero
                    break
                return size
            if wire == 0:
                _, pos = read_varint(view, pos, end)
            elif wire == 2:
                length, pos = read_varint(view, pos, end)
                pos += length
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            else:
                break
    except WireError:
        # ``pos`` is where the varint that did not read starts: it reads at most 10 bytes.
        msg = f"metadata of batch item {index} has a varint cut off at byte {min(end, pos + 10)}"
        raise BatchDecodeError(msg, item=index) from None
    msg = f"batch item {index} has no readable payload_size in its metadata"
    raise BatchDecodeError(msg, item=index)


def locate_uniform(
    data: Bytes, bases: Ints, lengths: Ints, counts: Ints
) -> tuple[Mask, Int64s, Int64s, Int64s]:
    """Guess that every item of batch ``e`` is as long as its first; check the guess.

    Batch ``e`` is ``data[bases[e] : bases[e] + lengths[e]]`` (``lengths[e] >=
    4 * counts[e]``) with ``counts[e]`` items.

    Returns:
        ``(fits, sizes, smm_starts, payload_starts)``: ``fits[e]`` says whether
        batch ``e`` is laid out as guessed, ``sizes[e]`` is then the payload
        size of each of its items (still to be checked against their metadata);
        for the batches that fit only, in order, every item's metadata start
        and payload start in ``data``.
    """
    bases = bases.astype(np.int64)
    heads = _u32(data, bases)
    # numpy types an ndarray as a buffer only from Python 3.12 on (mypy checks 3.10).
    view = memoryview(data)  # type: ignore[arg-type]
    first_sizes = np.array(
        [
            _first_size(view, base + 4, base + 4 + head) if 4 + head <= length else -1
            for base, head, length in zip(
                bases.tolist(), heads.tolist(), lengths.tolist(), strict=True
            )
        ],
        np.int64,
    )
    stride = 4 + heads + first_sizes
    fits = (first_sizes >= 0) & (counts * stride == lengths) & (counts > 0)
    item_entry = np.repeat(np.arange(len(bases)), np.where(fits, counts, 0))
    if len(item_entry):
        first = np.cumsum(np.where(fits, counts, 0)) - np.where(fits, counts, 0)
        rank = np.arange(len(item_entry)) - first[item_entry]
        item_starts = bases[item_entry] + rank * stride[item_entry]
        wrong = _u32(data, item_starts) != heads[item_entry]
        if wrong.any():
            fits[np.unique(item_entry[wrong])] = False
            keep = fits[item_entry]
            item_starts, item_entry = item_starts[keep], item_entry[keep]
        smm_starts = item_starts + 4
        return fits, first_sizes, smm_starts, smm_starts + heads[item_entry]
    empty = np.zeros(0, np.int64)
    return fits, first_sizes, empty, empty


def locate_by_headers(
    data: Bytes, bases: Ints, lengths: Ints, counts: Ints
) -> tuple[Mask, Int64s, Int64s]:
    """Guess that batch ``e``'s items begin exactly at its runs of three zero bytes.

    Batch ``e`` is ``data[bases[e] : bases[e] + lengths[e]]`` with ``counts[e]``
    items; the batches lie in ``data`` in order and do not overlap.

    Returns:
        ``(fits, payload_starts, sizes)``: ``fits[e]`` says whether batch ``e``
        has one run per item, the first at its start, each leaving room for its
        metadata; for those batches only, in order, every item's payload start
        in ``data`` and payload size (still to be checked against its metadata,
        which proves the chain).
    """
    bases = bases.astype(np.int64)
    ends = bases + lengths.astype(np.int64)
    fits = np.zeros(len(bases), np.bool_)
    empty = np.zeros(0, np.int64)
    if not len(bases):
        return fits, empty, empty
    lo, hi = int(bases[0]), int(ends[-1])
    # Zero bytes, a cache-sized piece at a time (twice as fast as all at once).
    zeros = np.concatenate(
        [np.flatnonzero(data[at : min(at + _SCAN, hi)] == 0) + at for at in range(lo, hi, _SCAN)]
    )
    runs = zeros[:-2][zeros[2:] - zeros[:-2] == 2]  # three zero bytes in a row
    entry = np.searchsorted(bases, runs, side="right") - 1
    inside = runs + 4 <= ends[entry]  # its 4-byte size is inside the batch
    runs, entry = runs[inside], entry[inside]
    found = np.bincount(entry, minlength=len(bases))
    fits = (found == counts) & (counts > 0)
    first = np.cumsum(found) - found
    fits[fits] = runs[first[fits]] == bases[fits]
    keep = fits[entry]
    if not keep.any():
        return fits, empty, empty
    runs, entry = runs[keep], entry[keep]
    payload_starts = runs + 4 + _u32(data, runs)
    following = np.empty_like(runs)
    following[:-1] = runs[1:]
    last = np.cumsum(counts[fits]) - 1
    following[last] = ends[fits]
    sizes = following - payload_starts
    short = sizes < 0  # a run inside metadata, or metadata past the next run
    if short.any():
        fits[np.unique(entry[short])] = False
        keep = fits[entry]
        payload_starts, sizes = payload_starts[keep], sizes[keep]
    return fits, payload_starts, sizes


def _first_size(view: memoryview, pos: int, end: int) -> int:
    """The first ``payload_size`` in the metadata at ``view[pos:end]``; -1 when none is read."""
    try:
        return _payload_size(view, pos, end, 0)
    except BatchDecodeError:
        return -1


def _u32(data: Bytes, at: Ints) -> Int64s:
    """Big-endian u32 at each position (every position has 4 bytes after it)."""
    words: Int64s = data[at.astype(np.int64)[:, None] + _AR4].view(">u4").ravel().astype(np.int64)
    return words


_AR4 = np.arange(4, dtype=np.int64)
