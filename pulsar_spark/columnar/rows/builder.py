"""The Arrow batch builder: entries of one topic partition in, RecordBatches of ``ROW_SCHEMA`` out.

:class:`ArrowBatchBuilder` runs no Python code per message: :meth:`~ArrowBatchBuilder.add`
copies each entry's decompressed payload into one reusable Arrow buffer and
records a few numbers per entry; :meth:`~ArrowBatchBuilder.build` decodes
every item's SingleMessageMetadata at once with NumPy
(:mod:`pulsar_spark.columnar.rows.smm.columns`)
and gathers keys, values and properties from that buffer in bulk. Ids are
formatted by Arrow compute from per-entry prefixes and batch indexes; what their text
leaves out (each item's batch size, a chunked message's first chunk) goes in the
batch's schema metadata (:func:`~.message_ids.with_id_parts`).

Items of entries added unsplit are located in bulk (:mod:`.items`), their
places checked against their metadata (:mod:`.guesses`); :mod:`.columns`
makes the columns that can hold bad data.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol.batch import split_batch
from pulsar_spark.protocol.entry import Entry
from pulsar_spark.protocol.errors import ProtocolError
from pulsar_spark.protocol.ids.message_id import to_signed64
from pulsar_spark.protocol.topics import base_topic
from pulsar_spark.protocol.wire import text

from ..arrays import Bytes, Int64s, Ints, Mask
from ..pool import Pool
from ..text_columns import numbered, repeated
from .columns import (
    broker_index_column,
    key_column,
    property_column,
    row_id,
    timestamp_column,
    with_nulls,
)
from .guesses import place, wrong_guess
from .items import locate_by_headers, locate_items, locate_uniform
from .message_ids import with_id_parts
from .schema import ROW_SCHEMA, empty_batch
from .schema_version import entry_schema_version, schema_version_column
from .single import as_batch_of_one
from .smm.columns import decode_smm_columns

__all__ = ["ArrowBatchBuilder"]

_U64 = 0xFFFF_FFFF_FFFF_FFFF


class ArrowBatchBuilder:
    """Accumulates messages of one topic partition and emits RecordBatches.

    Usage::

        builder = ArrowBatchBuilder("persistent://public/default/t", partition=-1)
        builder.add(entry, select(entry, ...))
        if builder.rows >= 10_000 or builder.value_bytes >= 64 << 20:
            yield builder.build()

    A message that is not batched is laid out as a batch of one. Corrupt
    metadata (an undecodable item, a base64 key that does not decode, a time
    beyond the timestamp range) makes :meth:`build` raise
    :class:`CorruptMessage` naming the message id; the builder is then empty.

    Args:
        topic: topic name; a ``-partition-N`` suffix is removed for the column.
        partition: partition index, -1 for a non-partitioned topic.
    """

    def __init__(self, topic: str, partition: int = -1) -> None:
        self.topic, _ = base_topic(topic)
        self.partition = partition
        self._pool = Pool()
        #: Whether locating items by their zero-led sizes is worth trying (not for
        #: binary payloads, where three zero bytes in a row are everywhere).
        self._try_headers = True
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self._pool.clear()
        # Per added entry: where its data starts in the pool, its length, its
        # item count, its items' payload starts and sizes when already known
        # (else None: located in build()), the positions picked (None: all)
        # and the batch indexes of its items.
        self._entry_base: list[int] = []
        self._entry_len: list[int] = []
        self._item_counts: list[int] = []
        self._located: list[tuple[Sequence[int], Sequence[int]] | None] = []
        self._positions: list[Sequence[int] | None] = []
        self._indexes: list[Sequence[int]] = []
        self._publish: list[int] = []
        self._producers: list[str] = []
        self._base_seqs: list[int] = []
        self._prefixes: list[str] = []
        # Per entry, from broker entry metadata: its time (0 when absent), and the
        # index of its first item (when it has one).
        self._broker_times: list[int] = []
        self._first_index: list[int] = []
        self._has_index: list[bool] = []
        # Per entry: the schema version its messages carry (None: none).
        self._schema_versions: list[int | None] = []
        # Per entry: its batch's size (0: not batched), and for a chunked message the
        # (ledger, entry) of its first chunk (None: not chunked).
        self._batch_sizes: list[int] = []
        self._first_chunks: list[tuple[int, int] | None] = []

    @property
    def value_bytes(self) -> int:
        """Bytes held for the rows so far (payloads and their metadata)."""
        return self._pool.used

    def add(
        self,
        entry: Entry,
        positions: Sequence[int] | None = None,
        *,
        first_chunk: tuple[int, int] | None = None,
    ) -> None:
        """Append the messages of ``entry`` at ``positions`` (all by default);
        ``first_chunk``: the (ledger, entry) where a chunked message began.

        The entry's items need not be located yet (``open_entry(split=False)``):
        :meth:`build` locates those of all entries at once.
        """
        count = entry.count
        n = count if positions is None else len(positions)
        if not n:
            return
        data: bytes | bytearray | memoryview
        if not entry.batched:
            data, starts, sizes = as_batch_of_one(entry)
            located: tuple[Sequence[int], Sequence[int]] | None = (starts, sizes)
        else:
            data = entry.data
            located = (entry.starts, entry.sizes) if entry.located else None
        meta = entry.metadata
        self._entry_base.append(self._pool.append(data))
        self._entry_len.append(len(data))
        self._item_counts.append(count)
        self._located.append(located)
        self._positions.append(None if n == count else positions)
        self._indexes.append(entry.batch_indexes)
        self._publish.append(meta.publish_time)
        self._producers.append(text(meta.producer_name))
        self._base_seqs.append(meta.sequence_id)
        self._prefixes.append(f"{entry.ledger}:{entry.entry}:{entry.partition}:")
        self._schema_versions.append(entry_schema_version(meta))
        self._batch_sizes.append(meta.num_messages_in_batch if entry.batched else 0)
        self._first_chunks.append(first_chunk)
        bem = entry.broker_entry_metadata
        has_index = bem is not None and bem.HasField("index")
        self._broker_times.append(bem.broker_timestamp if bem is not None else 0)
        self._has_index.append(has_index)
        if has_index and bem is not None:
            # The index is that of the entry's last message; items count from the
            # batch's original size (compaction may have dropped some).
            size = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
            self._first_index.append(to_signed64((bem.index - size + 1) & _U64))
        else:
            self._first_index.append(0)
        self.rows += n

    def build(self) -> pa.RecordBatch:
        """The gathered rows as one RecordBatch (possibly empty); starts a new one.

        Raises:
            CorruptMessage: (or a subclass) naming the first message at fault.
        """
        try:
            return self._build() if self.rows else empty_batch()
        finally:
            self._reset()

    def _picks(self, item_first: Int64s) -> tuple[Int64s, Int64s]:
        """Per row: its item number over all items, and its batch index."""
        counts = self._item_counts
        total = int(item_first[-1]) + counts[-1]
        if all(p is None for p in self._positions) and all(
            type(i) is range and i.start == 0 and i.step == 1 for i in self._indexes
        ):
            every = np.arange(total, dtype=np.int64)
            return every, every - np.repeat(item_first, counts)
        picked: list[int] = []
        batch_indexes: list[int] = []
        for first, positions, indexes, count in zip(
            item_first.tolist(), self._positions, self._indexes, counts, strict=True
        ):
            if positions is None:
                picked.extend(range(first, first + count))
                batch_indexes.extend(indexes)
            else:
                picked.extend([first + p for p in positions])
                batch_indexes.extend([indexes[p] for p in positions])
        return np.array(picked, np.int64), np.array(batch_indexes, np.int64)

    def _locate(
        self, data: Bytes, item_first: Int64s, exact: set[int]
    ) -> tuple[Int64s, Int64s, Mask] | int:
        """Per item over all entries: payload start (in the pool) and size; and
        whether the place was guessed (to be checked against its metadata). Or an
        entry whose items are not where they were guessed to be, to split exactly.

        Entries in ``exact`` are split by :func:`~pulsar_spark.protocol.batch.split_batch`.
        """
        counts = np.array(self._item_counts, np.int64)
        bases = np.array(self._entry_base, np.int64)
        total = int(counts.sum())
        starts = np.empty(total, np.int64)
        sizes = np.empty(total, np.int64)
        guessed = np.zeros(total, np.bool_)
        lazy = [e for e, known in enumerate(self._located) if known is None and e not in exact]
        guessed_entries: set[int] = set()
        if lazy:
            at = np.array(lazy, np.int64)
            lengths = np.array(self._entry_len, np.int64)
            fits, item_sizes, _, payload_starts = locate_uniform(
                data, bases[at], lengths[at], counts[at]
            )
            fit = at[fits]
            if len(fit) == len(counts):  # the usual case: every entry as guessed
                return payload_starts, np.repeat(item_sizes, counts), np.ones(total, np.bool_)
            place(
                fit,
                item_first,
                counts,
                payload_starts,
                np.repeat(item_sizes[fits], counts[fit]),
                starts,
                sizes,
                guessed,
            )
            rest = at[~fits]
            if len(rest) and self._try_headers:
                fits, payload_starts, item_sizes = locate_by_headers(
                    data, bases[rest], lengths[rest], counts[rest]
                )
                place(
                    rest[fits],
                    item_first,
                    counts,
                    payload_starts,
                    item_sizes,
                    starts,
                    sizes,
                    guessed,
                )
                if len(rest) >= 8 and not fits.any():
                    self._try_headers = False  # binary payloads: zero runs everywhere
                fit = np.concatenate([fit, rest[fits]])
            guessed_entries = set(fit.tolist())
        view = self._pool.memory()
        for e, known in enumerate(self._located):
            if e in guessed_entries:
                continue
            first, count, base = int(item_first[e]), self._item_counts[e], self._entry_base[e]
            part = view[base : base + self._entry_len[e]]
            if known is not None:
                rel_starts, rel_sizes = known
            elif e in exact:
                try:
                    _, rel_starts, rel_sizes = split_batch(part, count)
                except ProtocolError as exc:
                    raise type(exc)(exc.reason, message_id=self._prefixes[e] + "-1") from exc
            else:
                try:
                    rel_starts, rel_sizes = locate_items(part, count)
                except ProtocolError:  # split_batch gives the verdict
                    return e
                guessed[first : first + count] = True
            if count == 1:
                starts[first] = base + rel_starts[0]
                sizes[first] = rel_sizes[0]
            else:
                starts[first : first + count] = np.asarray(rel_starts, np.int64) + base
                sizes[first : first + count] = rel_sizes
        return starts, sizes, guessed

    def _build(self) -> pa.RecordBatch:
        exact: set[int] = set()
        while True:  # at most once more per entry whose guessed layout was wrong
            built = self._build_located(exact)
            if isinstance(built, int):
                exact.add(built)
            else:
                return built

    def _build_located(self, exact: set[int]) -> pa.RecordBatch | int:
        """The batch; or an entry whose items were not where they were guessed to be,
        which the next attempt splits exactly."""
        data = self._pool.view()
        item_counts = np.array(self._item_counts, np.int64)
        item_first = np.cumsum(item_counts) - item_counts
        item_entry = np.repeat(np.arange(len(item_counts)), item_counts)
        entry_base = np.array(self._entry_base, np.int64)
        located = self._locate(data, item_first, exact)
        if isinstance(located, int):
            return located
        starts, sizes, guessed = located
        # An item's metadata ends where its payload starts, and begins after
        # the 4-byte size that follows the previous item's payload (or that
        # opens its entry's data).
        smm_starts = np.empty_like(starts)
        smm_starts[1:] = starts[:-1] + sizes[:-1]
        smm_starts[item_first] = entry_base
        smm_starts += 4
        picked, batch_indexes = self._picks(item_first)
        every = len(picked) == len(starts)  # then picked is 0, 1, 2, ...
        row_entry = item_entry if every else item_entry[picked]
        try:
            cols = decode_smm_columns(
                data, *((smm_starts, starts) if every else (smm_starts[picked], starts[picked]))
            )
        except ProtocolError as exc:
            row = getattr(exc, "item", None)
            if row is not None and guessed[picked[row]]:
                return int(row_entry[row])
            where = row_id(self._prefixes, row_entry, batch_indexes, row)
            raise type(exc)(exc.reason, message_id=where) from exc
        wrong = wrong_guess(cols, data, smm_starts, starts, sizes, guessed, picked, item_entry)
        if wrong is not None:
            return wrong
        if cols.compacted_out.any():
            # select() leaves them in for entries added before being located: drop them
            # before their fields are looked at, as select() would have.
            unlocated = np.array([known is None for known in self._located], np.bool_)
            kept = np.flatnonzero(~(cols.compacted_out & unlocated[row_entry]))
            if len(kept) < len(picked):
                picked, batch_indexes = picked[kept], batch_indexes[kept]
                row_entry = row_entry[kept]
                cols = decode_smm_columns(data, smm_starts[picked], starts[picked])
        n = len(picked)
        values = self._pool.values(smm_starts - 4, starts, picked, sizes)

        seq = np.array(self._base_seqs, np.uint64)[row_entry]
        seq = np.where(  # uint64 arithmetic wraps like the wire's
            cols.has_sequence_id, cols.sequence_id, seq + batch_indexes.astype(np.uint64)
        )
        publish = np.array(self._publish, np.uint64)[row_entry]
        columns = [
            key_column(cols, self._prefixes, row_entry, batch_indexes),
            with_nulls(values, cols.null_value),
            repeated([self.topic], np.array([n])),
            pa.array(np.full(n, self.partition, np.int32)),
            self._message_ids(n, row_entry, batch_indexes),
            timestamp_column(
                publish, self._prefixes, row_entry, batch_indexes, "publish time", unset=None
            ),
            timestamp_column(
                cols.event_time, self._prefixes, row_entry, batch_indexes, "event time", unset=0
            ),
            property_column(cols),
            repeated(self._producers, np.bincount(row_entry, minlength=len(self._producers))),
            pa.array(seq.view(np.int64)),
            timestamp_column(
                np.array(self._broker_times, np.uint64)[row_entry],
                self._prefixes,
                row_entry,
                batch_indexes,
                "broker publish time",
                unset=0,
            ),
            broker_index_column(self._has_index, self._first_index, row_entry, batch_indexes),
            schema_version_column(self._schema_versions, row_entry),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self._id_schema(row_entry))

    def _id_schema(self, row_entry: Ints) -> pa.Schema:
        """:data:`ROW_SCHEMA` carrying the rows' batch sizes and first chunks."""
        sizes = np.array(self._batch_sizes, np.int64)[row_entry]
        chunked = [e for e, first in enumerate(self._first_chunks) if first is not None]
        if not chunked:
            return with_id_parts(ROW_SCHEMA, sizes, np.empty(0, np.int64), np.empty((0, 2)))
        rows = np.flatnonzero(np.isin(row_entry, chunked))
        firsts = np.array([self._first_chunks[int(e)] for e in row_entry[rows]], np.int64)
        return with_id_parts(ROW_SCHEMA, sizes, rows, firsts)

    def _message_ids(self, n: int, row_entry: Ints, batch_indexes: Ints) -> pa.Array:
        """``ledger:entry:partition:batchIndex`` of every row."""
        if n == sum(self._item_counts) and all(
            p is None and type(i) is range and i.start == 0 and i.step == 1
            for p, i in zip(self._positions, self._indexes, strict=True)
        ):  # whole entries: row numbers are batch indexes
            ids = numbered(self._prefixes, np.array(self._item_counts, np.int64))
            if ids is not None:
                return ids
        import pyarrow.compute as pc  # (25 ms to load) a read of whole entries needs none

        return pc.binary_join_element_wise(
            pc.take(pa.array(self._prefixes, pa.string()), pa.array(row_entry)),
            pc.cast(pa.array(batch_indexes), pa.string()),
            "",
        )
