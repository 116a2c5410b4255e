"""A producer's ``send_batch`` for Arrow tables, column by column: the rows' batch items
built at once, cut into batches by their sizes, no Python step per row.

The rows are encoded into one buffer of batch items
(:func:`..columnar.send_items.item_block`) while only the producer's send lock
is held (receipts keep flowing), each with its sequence id. Under the producer
lock the items are then cut into batches: a batch is a slice of that buffer,
found with ``searchsorted`` on the items' offsets, closed at
``batch_max_messages``, at ``batch_max_bytes`` or before it would outgrow the
message limit, exactly where the row-by-row path would close it. A batch left
open at the end takes the next table's first rows (or is sealed by the timer
or ``flush``). A row too large to share a batch goes alone (chunked if need
be), in its place, through the row-by-row path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from pulsar_spark.columnar.rows.encode import InvalidRows, Rows
from pulsar_spark.columnar.rows.send_items import ItemBlock, item_block

from ..errors import InvalidArgument

if TYPE_CHECKING:
    from .producer import Producer

__all__ = ["encoded_rows", "explicit_ids", "send_columnar", "send_rows"]


def explicit_ids(
    table: pa.Table | pa.RecordBatch,
    first_sequence_id: int | None,
    sequence_ids: Sequence[int] | np.ndarray | None,
) -> np.ndarray | None:
    """The rows' explicit sequence ids (None: the producer's next ones).

    Raises:
        InvalidArgument: both kinds given, not one id per row, or ids that do not increase.
    """
    n = int(table.num_rows)
    if sequence_ids is None:
        if first_sequence_id is None:
            return None
        return np.arange(first_sequence_id, first_sequence_id + n, dtype=np.int64)
    if first_sequence_id is not None:
        msg = "give first_sequence_id or sequence_ids, not both"
        raise InvalidArgument(msg)
    ids = np.asarray(sequence_ids, np.int64)
    if ids.shape != (n,):
        msg = f"sequence_ids has {len(ids)} ids for {n} rows"
        raise InvalidArgument(msg)
    falls = np.flatnonzero(ids[1:] <= ids[:-1])
    if len(falls):
        row = int(falls[0]) + 1
        msg = f"sequence_ids must increase: row {row} has {ids[row]} after {ids[row - 1]}"
        raise InvalidArgument(msg)
    return ids


def send_columnar(
    producer: Producer, table: pa.Table | pa.RecordBatch, ids: np.ndarray | None
) -> int:
    """The rows of ``table`` sent with sequence ids ``ids`` (None: the producer's next
    ones; see :meth:`.Producer.send_batch`); the rows sent.

    Raises:
        InvalidArgument: rows that cannot be encoded (the message names the row).
        ClientError: an id below one already used.
        PulsarError: the producer failed.
    """
    n = int(table.num_rows)
    if not n:
        return 0
    with producer._sending:
        producer._raise_if_failed()
        if ids is not None:
            seqs = ids
            if int(seqs[0]) <= producer.last_sequence_id:  # replays the broker has
                keep = seqs > producer.last_sequence_id
                if not keep.any():
                    return 0
                table = table.filter(pa.array(keep))
                seqs = seqs[keep]
        else:
            # Only senders move the next id, and they hold the send lock.
            first = producer._next_seq
            seqs = np.arange(first, first + n, dtype=np.int64)
        try:
            block = item_block(table, seqs)
        except InvalidRows as exc:
            raise InvalidArgument(str(exc)) from exc
        with producer._lock:
            producer._raise_if_failed()
            producer._take_sequence_id(int(seqs[0]))
            producer._next_seq = int(seqs[-1]) + 1
            _queue_block(producer, block, seqs, table)
    return len(seqs)


def _queue_block(
    producer: Producer, block: ItemBlock, seqs: np.ndarray, table: pa.Table | pa.RecordBatch
) -> None:
    """Queue the block's items in order (both locks held)."""
    n = block.n
    starts = block.starts
    sizes = np.diff(starts)
    limit = producer._batch_limit()
    big = np.flatnonzero(sizes >= min(producer._max_bytes, limit)).tolist()
    at = 0
    for alone in [*big, n]:
        _queue_run(producer, block, seqs, at, alone, limit)
        if alone < n:
            rows = Rows(table.slice(alone, 1))
            producer._seal()
            producer._seal_alone((int(seqs[alone]), rows.pres[0], rows.nulls[0], rows.values[0]))
        at = alone + 1


def _queue_run(
    producer: Producer, block: ItemBlock, seqs: np.ndarray, a: int, b: int, limit: int
) -> None:
    """Rows ``a`` to ``b - 1`` (each small enough to share a batch) into batches."""
    starts = block.starts
    data = memoryview(block.data)  # type: ignore[arg-type]
    batch = producer._open
    most, most_bytes = producer._max_messages, producer._max_bytes
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
                producer._seal()
                continue
        stop = int(starts[end])
        batch.add(data[base:stop], end - i, int(seqs[i]), int(seqs[end - 1]), stop - base)
        if full or batch.count >= most or batch.bytes >= most_bytes:
            producer._seal()
        i = end


def encoded_rows(table: pa.Table | pa.RecordBatch) -> Rows:
    """The rows of ``table`` encoded one by one for :meth:`.Producer.send_encoded`.

    Raises:
        InvalidArgument: (a ClientError) columns other than value, key, properties
            and eventTime, no value column, or a negative event time.
    """
    try:
        return Rows(table)
    except InvalidRows as exc:
        raise InvalidArgument(str(exc)) from exc


def send_rows(producer: Producer, table: pa.Table | pa.RecordBatch, ids: np.ndarray | None) -> int:
    """:meth:`.Producer.send_batch` row by row (no batching, or columns of other types)."""
    rows = encoded_rows(table)
    last = producer.last_sequence_id
    sent = 0
    with producer._sending, producer._lock:
        producer._raise_if_failed()
        queue = producer._queue
        seqs: list[int] | list[None] = [None] * rows.n if ids is None else ids.tolist()
        for seq, pre, null, value, size in zip(
            seqs, rows.pres, rows.nulls, rows.values, rows.sizes, strict=True
        ):
            if seq is not None and seq <= last:
                continue
            queue(seq, pre, null, value, size)
            sent += 1
    return sent
