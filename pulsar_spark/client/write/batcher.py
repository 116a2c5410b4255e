"""A producer's batching: sequence ids, the open batch, and where each batch closes, for
messages queued one by one and for the rows of an Arrow table queued at once.

A batch closes at ``batch_max_messages``, at ``batch_max_bytes`` or before it would
outgrow the message limit (chunks are never batched); a message too big to share a
batch goes alone (in chunks if need be), in its place. Each closed batch is handed
to the producer (:meth:`Batcher.seal`), which waits for room in its pending window,
seals it into a SEND and sends it.

The rows of an Arrow table come as one buffer of batch items
(:func:`pulsar_spark.columnar.rows.send_items.item_block`), each with its sequence id:
a batch is then a slice of that buffer, found with ``searchsorted`` on the items'
offsets, closed exactly where queuing the rows one by one would close it, without a
Python step per row. A batch left open at the end takes the next table's first rows
(or is sealed by the producer's timer or ``flush``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from pulsar_spark.columnar.rows.encode import Item, Rows, item_record
from pulsar_spark.columnar.rows.send_items import ItemBlock

from ..errors import ClientError
from .outgoing import OpenBatch, Packed

__all__ = ["Batcher", "Ship"]

#: How a batcher hands on a closed batch: its items (a list, or the bytes, count, first
#: and last ids of :meth:`.outgoing.OpenBatch.take`), messages, bytes, and whether it
#: is a batch (False: one message alone).
Ship = Callable[[list[Item] | Packed, int, int, bool], None]


class Batcher:
    """Gathers one producer's messages into batches (see the module). Every method but
    the constructor is called with the producer's lock held.

    Args:
        batching: gather messages into batches (else each goes alone).
        max_messages, max_bytes: when a batch is closed.
        limit: bytes of one batch's items at most (it follows the connection's
            message limit).
        ship: what receives each closed batch.
        who: names the producer in errors.
    """

    __slots__ = (
        "_limit",
        "_max_bytes",
        "_open",
        "_ship",
        "_who",
        "batching",
        "max_messages",
        "next_seq",
    )

    def __init__(
        self,
        *,
        batching: bool,
        max_messages: int,
        max_bytes: int,
        limit: Callable[[], int],
        ship: Ship,
        who: Callable[[], str],
    ) -> None:
        self.batching = batching
        #: Messages in one batch at most (1 without batching).
        self.max_messages = max_messages if batching else 1
        self._max_bytes = max_bytes
        #: The sequence id of the next message (unless it brings its own).
        self.next_seq = 0
        #: The batch being filled.
        self._open = OpenBatch()
        self._limit = limit
        self._ship = ship
        self._who = who

    def take_sequence_id(self, sequence_id: int) -> None:
        """Make ``sequence_id`` the next one.

        Raises:
            ClientError: an id below the next one.
        """
        if sequence_id < self.next_seq:
            msg = (
                f"{self._who()}: sequence id {sequence_id} is below "
                f"the next one, {self.next_seq}: ids must increase"
            )
            raise ClientError(msg)
        self.next_seq = sequence_id

    def queue(
        self, sequence_id: int | None, pre: bytes, null: bool, value: bytes, size: int
    ) -> None:
        """Queue one encoded message with ``sequence_id`` (None: the next one); ``size``
        is its share of a batch."""
        if sequence_id is not None:
            self.take_sequence_id(sequence_id)
        seq = self.next_seq
        self.next_seq += 1
        if not self.batching:
            self.seal_alone(Item(seq, pre, null, value))
            return
        # A batch never exceeds the message limit (chunks are never batched):
        # a message too big to share one goes alone, in chunks if need be.
        limit = self._limit()
        if size >= min(self._max_bytes, limit):
            self.seal()
            self.seal_alone(Item(seq, pre, null, value))
            return
        batch = self._open
        if batch.bytes + size > limit:
            self.seal()
        batch.add(item_record(seq, pre, null, value), 1, seq, seq, size)
        if batch.count >= self.max_messages or batch.bytes >= self._max_bytes:
            self.seal()

    def queue_block(
        self, block: ItemBlock, seqs: np.ndarray, table: pa.Table | pa.RecordBatch
    ) -> None:
        """Queue the items of ``block`` (the rows of ``table``, with sequence ids ``seqs``,
        increasing) in order, as :meth:`queue` would queue them one by one.

        Raises:
            ClientError: a first id below the next one.
        """
        self.take_sequence_id(int(seqs[0]))
        self.next_seq = int(seqs[-1]) + 1
        n = block.n
        sizes = np.diff(block.starts)
        limit = self._limit()
        big = np.flatnonzero(sizes >= min(self._max_bytes, limit)).tolist()
        at = 0
        for alone in [*big, n]:
            self._queue_run(block, seqs, at, alone, limit)
            if alone < n:
                rows = Rows(table.slice(alone, 1))
                self.seal()
                self.seal_alone(Item(int(seqs[alone]), rows.pres[0], rows.nulls[0], rows.values[0]))
            at = alone + 1

    def _queue_run(self, block: ItemBlock, seqs: np.ndarray, a: int, b: int, limit: int) -> None:
        """Rows ``a`` to ``b - 1`` (each small enough to share a batch) into batches."""
        starts = block.starts
        data = memoryview(block.data)  # type: ignore[arg-type]
        batch = self._open
        most, most_bytes = self.max_messages, self._max_bytes
        search = starts.searchsorted
        i = a
        while i < b:
            base = int(starts[i])
            end = min(b, i + most - batch.count)  # rows i .. end - 1 fit the count
            # The row that brings the batch to batch_max_bytes closes it...
            end = min(end, int(search(most_bytes - batch.bytes + base, "left")))
            # ...and a row that would take it past the limit waits for the next one.
            fits = int(search(limit - batch.bytes + base, "right")) - 1
            full = fits < end
            if full:
                end = fits
                if end <= i:
                    self.seal()
                    continue
            stop = int(starts[end])
            batch.add(data[base:stop], end - i, int(seqs[i]), int(seqs[end - 1]), stop - base)
            if full or batch.count >= most or batch.bytes >= most_bytes:
                self.seal()
            i = end

    def seal(self) -> None:
        """Close the open batch (if any) and hand it on."""
        batch = self._open
        if not batch.count:
            return
        payload, count, first, last, size = batch.take()
        self._ship(Packed(payload, count, first, last), count, size, True)

    def seal_alone(self, item: Item) -> None:
        """Hand on one message alone (chunked if too big)."""
        self._ship([item], 1, len(item.value), False)

    def seal_due(self, max_delay: float) -> None:
        """:meth:`seal` the open batch if its first message came ``max_delay`` seconds
        ago or more."""
        batch = self._open
        if batch.count and time.monotonic() - batch.opened_at >= max_delay:
            self.seal()
