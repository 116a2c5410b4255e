"""Arrow decoding: entries straight into ``pyarrow.RecordBatch`` columns.

The row schema is what ``spark.read.format("pulsar")`` shows users:

============  ======================  =========================================
column        type                    meaning
============  ======================  =========================================
key           binary, nullable        partition key bytes (UTF-8 of the key, or
                                      its base64 decoding when flagged so)
value         binary, nullable        payload; null for ``null_value`` tombstones
topic         string                  topic name without ``-partition-N``
partition     int32                   partition index; -1 when not partitioned
messageId     string                  ``ledger:entry:partition:batchIndex``
publishTime   timestamp[us, UTC]
eventTime     timestamp[us, UTC]      null when unset (0)
properties    map<string, string>     empty map when there are none
producerName  string
sequenceId    int64
brokerPublishTime  timestamp[us, UTC]  when the broker stored the entry; null
                                       unless the broker exposes its entry
                                       metadata (0x0e02) to clients
index         int64, nullable         the broker's message index (its
                                      ``AppendIndexMetadataInterceptor``);
                                      for a batch item: the entry's index -
                                      items + batch index + 1
============  ======================  =========================================

:class:`ArrowBatchBuilder` runs no Python code per message: :meth:`~ArrowBatchBuilder.add`
copies each entry's decompressed payload into one reusable Arrow buffer and
records a few numbers per entry; :meth:`~ArrowBatchBuilder.build` decodes
every item's SingleMessageMetadata at once with NumPy (:mod:`.smm_columns`)
and gathers keys, values and properties from that buffer in bulk. Ids are
formatted by Arrow compute from per-entry prefixes and batch indexes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..protocol.batch import split_batch
from ..protocol.entry import Entry, decode_key, text
from ..protocol.errors import CorruptMessage, ProtocolError
from ..protocol.message_id import to_signed64
from ..protocol.topics import base_topic
from ..protocol.wire import WireError, encode_varint, fields
from .items import locate_by_headers, locate_items, locate_uniform
from .smm_columns import SmmColumns, decode_smm_columns, gather_binary, map_array
from .text_columns import numbered, repeated

__all__ = ["ROW_SCHEMA", "ArrowBatchBuilder"]

_TS = pa.timestamp("us", tz="UTC")

ROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("messageId", pa.string(), nullable=False),
        pa.field("publishTime", _TS, nullable=False),
        pa.field("eventTime", _TS),
        pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=False),
        pa.field("producerName", pa.string(), nullable=False),
        pa.field("sequenceId", pa.int64(), nullable=False),
        pa.field("brokerPublishTime", _TS),
        pa.field("index", pa.int64()),
    ]
)

_U32 = struct.Struct(">I")


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
        self._pool = _Pool()
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

    @property
    def value_bytes(self) -> int:
        """Bytes held for the rows so far (payloads and their metadata)."""
        return self._pool.used

    def add(self, entry: Entry, positions: Sequence[int] | None = None) -> None:
        """Append the messages of ``entry`` at ``positions`` (all by default).

        The entry's items need not be located yet (``open_entry(split=False)``):
        :meth:`build` locates those of all entries at once.
        """
        count = entry.count
        n = count if positions is None else len(positions)
        if not n:
            return
        if not entry.batched:
            data, starts, sizes = _as_batch_of_one(entry)
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
        bem = entry.broker_entry_metadata
        has_index = bem is not None and bem.HasField("index")
        self._broker_times.append(bem.broker_timestamp if bem is not None else 0)
        self._has_index.append(has_index)
        if has_index:
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
            return self._build() if self.rows else _empty_batch()
        finally:
            self._reset()

    def _picks(self, item_first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row: its item number over all items, and its batch index."""
        counts = self._item_counts
        total = int(item_first[-1]) + counts[-1]
        if all(p is None for p in self._positions) and all(
            type(i) is range and i.start == 0 and i.step == 1 for i in self._indexes
        ):
            picked = np.arange(total, dtype=np.int64)
            return picked, picked - np.repeat(item_first, counts)
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
        self, data: np.ndarray, item_first: np.ndarray, exact: set[int]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per item over all entries: payload start (in the pool) and size; and
        whether the place was guessed (to be checked against its metadata).

        Entries in ``exact`` are split by :func:`.batch.split_batch`.
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
            self._place(fit, item_first, counts, payload_starts,
                        np.repeat(item_sizes[fits], counts[fit]), starts, sizes, guessed)
            rest = at[~fits]
            if len(rest) and self._try_headers:
                fits, payload_starts, item_sizes = locate_by_headers(
                    data, bases[rest], lengths[rest], counts[rest]
                )
                self._place(rest[fits], item_first, counts, payload_starts, item_sizes,
                            starts, sizes, guessed)
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
                except ProtocolError as exc:  # split_batch gives the verdict
                    raise _Relocate(e) from exc
                guessed[first : first + count] = True
            if count == 1:
                starts[first] = base + rel_starts[0]
                sizes[first] = rel_sizes[0]
            else:
                starts[first : first + count] = np.asarray(rel_starts, np.int64) + base
                sizes[first : first + count] = rel_sizes
        return starts, sizes, guessed

    @staticmethod
    def _place(
        fit: np.ndarray, item_first: np.ndarray, counts: np.ndarray, payload_starts: np.ndarray,
        item_sizes: np.ndarray, starts: np.ndarray, sizes: np.ndarray, guessed: np.ndarray,
    ) -> None:
        """Put the guessed items of entries ``fit`` (in order) at their item numbers."""
        if not len(fit):
            return
        first = np.repeat(item_first[fit], counts[fit])
        rank = np.arange(len(first)) - np.repeat(np.cumsum(counts[fit]) - counts[fit], counts[fit])
        where = first + rank
        starts[where] = payload_starts
        sizes[where] = item_sizes
        guessed[where] = True

    def _build(self) -> pa.RecordBatch:
        exact: set[int] = set()
        while True:  # at most once more per entry whose guessed layout was wrong
            try:
                return self._build_located(exact)
            except _Relocate as again:  # noqa: PERF203 (rare)
                exact.add(again.entry)

    def _build_located(self, exact: set[int]) -> pa.RecordBatch:
        data = self._pool.view()
        item_counts = np.array(self._item_counts, np.int64)
        item_first = np.cumsum(item_counts) - item_counts
        item_entry = np.repeat(np.arange(len(item_counts)), item_counts)
        entry_base = np.array(self._entry_base, np.int64)
        starts, sizes, guessed = self._locate(data, item_first, exact)
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
            cols = decode_smm_columns(data, *((smm_starts, starts) if every else (
                smm_starts[picked], starts[picked])))
        except ProtocolError as exc:
            row = getattr(exc, "item", None)
            if row is not None and guessed[picked[row]]:
                raise _Relocate(int(row_entry[row])) from exc
            where = self._row_id(row_entry, batch_indexes, row)
            raise type(exc)(exc.reason, message_id=where) from exc
        self._check_guesses(cols, data, smm_starts, starts, sizes, guessed, picked, item_entry)
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
            self._keys(cols, row_entry, batch_indexes),
            _with_nulls(values, cols.null_value),
            repeated([self.topic], np.array([n])),
            pa.array(np.full(n, self.partition, np.int32)),
            self._message_ids(n, row_entry, batch_indexes),
            self._timestamps(publish, row_entry, batch_indexes, "publish time", unset=None),
            self._timestamps(cols.event_time, row_entry, batch_indexes, "event time", unset=0),
            self._properties(cols, row_entry, batch_indexes),
            repeated(self._producers, np.bincount(row_entry, minlength=len(self._producers))),
            pa.array(seq.view(np.int64)),
            self._timestamps(np.array(self._broker_times, np.uint64)[row_entry], row_entry,
                             batch_indexes, "broker publish time", unset=0),
            self._broker_indexes(row_entry, batch_indexes),
        ]
        return pa.RecordBatch.from_arrays(columns, schema=ROW_SCHEMA)

    def _message_ids(self, n: int, row_entry: np.ndarray, batch_indexes: np.ndarray) -> pa.Array:
        """``ledger:entry:partition:batchIndex`` of every row."""
        if n == sum(self._item_counts) and all(
            p is None and type(i) is range and i.start == 0 and i.step == 1
            for p, i in zip(self._positions, self._indexes, strict=True)
        ):  # whole entries: row numbers are batch indexes
            ids = numbered(self._prefixes, np.array(self._item_counts, np.int64))
            if ids is not None:
                return ids
        return pc.binary_join_element_wise(
            pc.take(pa.array(self._prefixes, pa.string()), pa.array(row_entry)),
            pc.cast(pa.array(batch_indexes), pa.string()),
            "",
        )

    def _check_guesses(
        self,
        cols: SmmColumns,
        data: np.ndarray,
        smm_starts: np.ndarray,
        starts: np.ndarray,
        sizes: np.ndarray,
        guessed: np.ndarray,
        picked: np.ndarray,
        item_entry: np.ndarray,
    ) -> None:
        """Raise :class:`_Relocate` for an entry whose guessed item places do not
        agree with its items' ``payload_size``.

        Every item of a guessed entry is checked, picked or not: item ``k + 1``
        is where the guess put it only if item ``k``'s size was right.
        """
        wrong = guessed[picked] & (~cols.has_payload_size | (cols.payload_size != sizes[picked]))
        if wrong.any():
            raise _Relocate(int(item_entry[picked[int(np.flatnonzero(wrong)[0])]]))
        unpicked = np.ones(len(starts), np.bool_)
        unpicked[picked] = False
        unpicked &= guessed
        if not unpicked.any():
            return
        others = np.flatnonzero(unpicked)
        try:
            more = decode_smm_columns(data, smm_starts[others], starts[others])
        except ProtocolError as exc:
            row = getattr(exc, "item", None)
            raise _Relocate(int(item_entry[others[row or 0]])) from exc
        wrong = ~more.has_payload_size | (more.payload_size != sizes[others])
        if wrong.any():
            raise _Relocate(int(item_entry[others[int(np.flatnonzero(wrong)[0])]]))

    def _broker_indexes(self, row_entry: np.ndarray, batch_indexes: np.ndarray) -> pa.Array:
        present = np.array(self._has_index, np.bool_)[row_entry]
        if not present.any():
            return pa.nulls(len(row_entry), pa.int64())
        first = np.array(self._first_index, np.int64)[row_entry]
        return pa.array(first + np.maximum(batch_indexes, 0), pa.int64(), mask=~present)

    # -- columns that can hold bad data ----------------------------------------

    def _keys(self, cols: SmmColumns, row_entry: np.ndarray, batch_indexes: np.ndarray) -> pa.Array:
        has_key = cols.has_key & ~cols.null_partition_key
        keys = gather_binary(cols.data, cols.key_start, cols.key_len, has_key)
        b64 = np.flatnonzero(has_key & cols.partition_key_b64_encoded)
        if not len(b64):
            return keys
        # Base64 keys are rare: decode those rows one by one.
        values = keys.to_pylist()
        for row in b64.tolist():
            where = self._row_id(row_entry, batch_indexes, row)
            values[row] = decode_key(values[row], True, message_id=where)
        return pa.array(values, pa.binary())

    def _timestamps(
        self,
        ms: np.ndarray,
        row_entry: np.ndarray,
        batch_indexes: np.ndarray,
        what: str,
        unset: int | None,
    ) -> pa.Array:
        """Milliseconds (uint64 from the wire) as UTC microseconds; null where ``unset``."""
        bad = ms > _MAX_MS
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            msg = f"{what} {int(ms[row])} ms is beyond the timestamp range"
            raise CorruptMessage(msg, message_id=self._row_id(row_entry, batch_indexes, row))
        micros = ms.astype(np.int64) * 1000
        return pa.array(micros, _TS, mask=None if unset is None else ms == unset)

    def _properties(
        self, cols: SmmColumns, row_entry: np.ndarray, batch_indexes: np.ndarray
    ) -> pa.Array:
        try:
            return map_array(cols)
        except ProtocolError:
            pass
        # Some key or value is not UTF-8: decode with U+FFFD, as Java does.
        data = cols.data
        offsets = cols.prop_offsets
        pairs = [
            (
                text(data[ks : ks + kl].tobytes()),
                text(data[vs : vs + vl].tobytes()),
            )
            for ks, kl, vs, vl in zip(
                cols.prop_key_start.tolist(),
                cols.prop_key_len.tolist(),
                cols.prop_value_start.tolist(),
                cols.prop_value_len.tolist(),
                strict=True,
            )
        ]
        return pa.array(
            [pairs[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)],
            pa.map_(pa.string(), pa.string()),
        )

    def _row_id(
        self, row_entry: np.ndarray, batch_indexes: np.ndarray, row: int | None
    ) -> str | None:
        if row is None or not 0 <= row < len(row_entry):
            return None
        return self._prefixes[int(row_entry[row])] + str(int(batch_indexes[row]))


class _Relocate(Exception):
    """An entry's items were not where they were guessed to be: split it exactly."""

    def __init__(self, entry: int) -> None:
        super().__init__(entry)
        self.entry = entry


_MAX_MS = (2**63 - 1) // 1000
_U64 = 0xFFFF_FFFF_FFFF_FFFF
_MAX_ARROW_BYTES = 2**31 - 1


def _with_nulls(values: pa.Array, null: np.ndarray) -> pa.Array:
    """``values`` with nulls where ``null`` (tombstones)."""
    if not null.any():
        return values
    validity = pa.array(~null).buffers()[1]
    offsets, data = values.buffers()[1:]
    return pa.Array.from_buffers(
        pa.binary(), len(values), [validity, offsets, data], null_count=int(null.sum())
    )


def _empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in ROW_SCHEMA], schema=ROW_SCHEMA)


class _Pool:
    """A growing Arrow buffer that the payloads of one output batch are copied into.

    Copying at :meth:`ArrowBatchBuilder.add` frees each decompressed payload
    at once, and reusing one pool allocation keeps the pages warm from batch
    to batch.
    """

    __slots__ = ("_buf", "_mem", "used")

    def __init__(self, capacity: int = 1 << 20) -> None:
        self._buf = pa.allocate_buffer(capacity, resizable=True)
        self._mem = memoryview(self._buf).cast("B")
        self.used = 0

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` in; return where it starts."""
        at = self.used
        end = at + len(data)
        capacity = len(self._mem)
        if end > capacity:
            self._mem.release()
            self._buf.resize(max(end, 2 * capacity))
            self._mem = memoryview(self._buf).cast("B")
        self._mem[at:end] = data
        self.used = end
        return at

    def view(self) -> np.ndarray:
        return np.frombuffer(self._mem, np.uint8, self.used)

    def memory(self) -> memoryview:
        return self._mem[: self.used]

    def values(
        self, item_starts: np.ndarray, payload_starts: np.ndarray, picked: np.ndarray,
        sizes: np.ndarray,
    ) -> pa.Array:
        """The payloads of the ``picked`` items as a binary column.

        The pool is an unbroken run of items, each ``[size + metadata][payload]``,
        so a binary array whose offsets are every item's two boundaries covers
        it without a copy; taking its odd elements copies just the payloads,
        range by range, in Arrow's own kernel.
        """
        items = len(item_starts)
        bounds = np.empty(2 * items + 1, np.int64)
        bounds[0:-1:2] = item_starts
        bounds[1::2] = payload_starts
        bounds[-1] = self.used
        if self.used > _MAX_ARROW_BYTES:
            msg = f"{self.used} bytes of messages do not fit one Arrow array"
            raise ValueError(msg)
        if (bounds[1:-1:2] + sizes != bounds[2::2]).any():
            msg = "entries in the pool are not laid out item after item"
            raise AssertionError(msg)
        segments = pa.Array.from_buffers(
            pa.binary(),
            2 * items,
            [None, pa.py_buffer(bounds.astype(np.int32)), self._buf],
        )
        return segments.take(pa.array(2 * picked + 1))

    def clear(self) -> None:
        self.used = 0


def _as_batch_of_one(entry: Entry) -> tuple[bytes, list[int], list[int]]:
    """A non-batched message laid out as a one-item batch payload, so that
    :meth:`ArrowBatchBuilder.build` treats all rows alike."""
    head = _smm_from_metadata(entry.metadata.SerializeToString(), entry.sizes[0])
    return b"".join((_U32.pack(len(head)), head, entry.data)), [4 + len(head)], [entry.sizes[0]]


# MessageMetadata field number -> SingleMessageMetadata field number, for the
# fields a message's own metadata shares with a batch item's.
_TO_SMM = {4: 1, 6: 2, 12: 5, 17: 6, 18: 7, 2: 8, 25: 9, 30: 10}


def _smm_from_metadata(meta: bytes, payload_size: int) -> bytes:
    """Re-tag the shared fields of serialized MessageMetadata as SingleMessageMetadata.

    Works on the wire bytes, so that strings that are not UTF-8 travel as they are.
    """
    out = bytearray()
    try:
        for field, wire, start, end in fields(meta):
            target = _TO_SMM.get(field)
            if target is not None:
                out += encode_varint(target << 3 | wire)
                out += meta[start:end]
    except WireError as exc:  # cannot come from SerializeToString
        msg = f"message metadata does not re-encode: {exc}"
        raise CorruptMessage(msg) from exc
    out += encode_varint(3 << 3) + encode_varint(payload_size)
    return bytes(out)


