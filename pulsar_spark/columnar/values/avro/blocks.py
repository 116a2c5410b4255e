"""Avro arrays and maps read at every lane at once: block after block, item after item.

An array or map is a series of blocks: a long count (negative: the block's
byte size follows, then ``-count`` items), the items, and a zero count at
the end. :class:`BlockNode` reads the first block of every lane, then the
next block of the lanes that have one, and so on. Inside a block:

* items of a fixed width (floats, fixed, booleans, records of those) sit at
  known offsets, so every item of every lane is read in one step;
* other items are read in rounds: round ``j`` reads item ``j`` of every lane
  whose block has more than ``j`` items (all lanes advance together).

Items come out round by round; a stable sort by lane puts each lane's items
together, in order, for the list (or map) offsets. A count that the bytes
left cannot hold fails (items take at least ``min_size`` bytes each), so a
corrupt count cannot make the decoder allocate more than the data warrants.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ...arrays import Int64s, Mask
from .lanes import Lanes
from .nodes import Node

__all__ = ["BlockNode"]

#: Most items a block of zero-size items (nulls, empty records) may declare.
MAX_EMPTY_ITEMS = 1 << 24
_INT32_MAX = 2**31 - 1


class BlockNode(Node):
    """An Avro array (``key`` None) or map (``key`` reads the string keys)."""

    def __init__(self, path: str, type: pa.DataType, item: Node, key: Node | None = None) -> None:
        super().__init__(path, type)
        self.item = item
        self.key = key
        # Items read by position: arrays of fixed-width items.
        self.item_width = item.width if key is None else None

    def read(self, lanes: Lanes) -> pa.Array:
        parents: list[Int64s] = []
        keys: list[pa.Array] = []
        items: list[pa.Array] = []
        self._blocks(lanes, parents, keys, items, read=True)
        n = len(lanes)
        if parents:
            owner = np.concatenate(parents)
            counts = np.bincount(owner, minlength=n)
            ordered = len(parents) == 1 and bool((owner[1:] >= owner[:-1]).all())
            order = None if ordered else pa.array(np.argsort(owner, kind="stable"))
            values = _joined(items, order)
            names = _joined(keys, order) if self.key is not None else None
        else:
            counts = np.zeros(n, np.int64)
            values = pa.array([], self.item.type)
            names = pa.array([], pa.string())
        offsets = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        if offsets[-1] > _INT32_MAX:
            lanes.fail(np.ones(n, bool), self.path, f"{offsets[-1]} items do not fit one column")
        offsets_array = pa.array(offsets.astype(np.int32))
        if self.key is None:
            return pa.ListArray.from_arrays(offsets_array, values, type=self.type)
        return pa.MapArray.from_arrays(offsets_array, names, values, type=self.type)

    def skip(self, lanes: Lanes) -> None:
        self._blocks(lanes, [], [], [], read=False)

    def _blocks(
        self,
        lanes: Lanes,
        parents: list[Int64s],
        keys: list[pa.Array],
        items: list[pa.Array],
        *,
        read: bool,
    ) -> None:
        active = np.arange(len(lanes))
        while len(active):
            sub = lanes.subset(active)
            count, jumped = self._count(sub, read=read)
            if self.item_width is not None:
                self._fixed_items(sub, count, active, parents, items, read=read)
            else:
                self._rounds(sub, count, active, parents, keys, items, read=read)
            lanes.update(active, sub)
            active = active[(count > 0) | jumped]

    def _count(self, sub: Lanes, *, read: bool) -> tuple[Int64s, Mask]:
        """The item count of the block at each lane (0: no more blocks), and the lanes
        that jumped over their block by its byte size (only when skipping: their count
        is 0, but more blocks follow)."""
        count = sub.read_long(self.path)
        jumped = np.zeros(len(count), bool)
        sized = np.flatnonzero(count < 0)
        if len(sized):
            sized_lanes = sub.subset(sized)
            size = sized_lanes.read_long(self.path)
            bad = size < 0
            if bad.any():
                sized_lanes.fail(bad, self.path, "negative block size {0}", size)
                size[bad] = 0
            count[sized] = -count[sized]
            if not read:  # the size lets a skip jump over the block
                room = sized_lanes.check_room(size, self.path, "a block of {0} bytes")
                if room is not None:
                    size[room] = 0
                sized_lanes.pos += size
                count[sized] = 0
                jumped[sized] = True
            sub.update(sized, sized_lanes)
        left = sub.end - sub.pos
        least = self._item_min()
        most = left // least if least else np.full(len(left), MAX_EMPTY_ITEMS)
        bad = (count > most) | (count < 0)
        if bad.any():
            sub.fail(bad, self.path, "a block of {0} items in {1} bytes", count, left)
            count[bad] = 0
            jumped[bad] = False
        return count, jumped

    def _item_min(self) -> int:
        return self.item.min_size + (self.key.min_size if self.key is not None else 0)

    def _fixed_items(
        self,
        sub: Lanes,
        count: Int64s,
        active: Int64s,
        parents: list[Int64s],
        items: list[pa.Array],
        *,
        read: bool,
    ) -> None:
        """Every item of the block at once: item ``k`` of a lane sits ``k * width`` bytes in."""
        width = self.item_width
        assert width is not None
        total = int(count.sum())
        if total:
            if read:
                first = np.cumsum(count) - count
                within = np.arange(total, dtype=np.int64) - np.repeat(first, count)
                at = np.repeat(sub.pos, count) + within * width
                rows, ends = np.repeat(sub.rows, count), np.repeat(sub.end, count)
                item_lanes = Lanes(sub.data, at, ends, rows, sub.failures)
                items.append(self.item.read(item_lanes))
                parents.append(np.repeat(active, count))
            sub.pos += count * width

    def _rounds(
        self,
        sub: Lanes,
        count: Int64s,
        active: Int64s,
        parents: list[Int64s],
        keys: list[pa.Array],
        items: list[pa.Array],
        *,
        read: bool,
    ) -> None:
        """Round ``j``: item ``j`` of every lane whose block has more than ``j`` items."""
        current = np.flatnonzero(count > 0)
        j = 0
        while len(current):
            item_lanes = sub.subset(current)
            if read:
                if self.key is not None:
                    keys.append(self.key.read(item_lanes))
                items.append(self.item.read(item_lanes))
                parents.append(active[current])
            else:
                if self.key is not None:
                    self.key.skip(item_lanes)
                self.item.skip(item_lanes)
            sub.update(current, item_lanes)
            j += 1
            current = current[count[current] > j]


def _joined(parts: list[pa.Array], order: pa.Array | None) -> pa.Array:
    joined = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    return joined if order is None else joined.take(order)
