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
============  ======================  =========================================

:class:`ArrowBatchBuilder` gathers plain Python lists column by column (no
dict or object per message) and turns them into Arrow arrays once per output
batch. Payload bytes are joined in one call; ids are formatted by Arrow
compute from per-entry prefixes and batch indexes.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .entry import Entry, decode_key

__all__ = ["ROW_SCHEMA", "ArrowBatchBuilder", "base_topic"]

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
    ]
)

_PARTITION_SUFFIX = "-partition-"
_MAX_VALUE_BYTES = 2**31 - 1


def base_topic(topic: str) -> tuple[str, int]:
    """Split ``…/name-partition-N`` into (``…/name``, N); (topic, -1) otherwise."""
    cut = topic.rfind(_PARTITION_SUFFIX)
    if cut > 0:
        digits = topic[cut + len(_PARTITION_SUFFIX) :]
        if digits.isdigit() and digits.isascii():
            return topic[:cut], int(digits)
    return topic, -1


class ArrowBatchBuilder:
    """Accumulates messages of one topic partition and emits RecordBatches.

    Usage::

        builder = ArrowBatchBuilder("persistent://public/default/t", partition=-1)
        builder.add(entry, select(entry, ...))
        if builder.rows >= 10_000:
            yield builder.build()

    Args:
        topic: topic name; a ``-partition-N`` suffix is removed for the column.
        partition: partition index, -1 for a non-partitioned topic.
    """

    def __init__(self, topic: str, partition: int = -1) -> None:
        self.topic, _ = base_topic(topic)
        self.partition = partition
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self._value_total = 0
        self._values: list[bytes | memoryview] = []
        self._value_sizes: list[int] = []
        self._null_values: list[int] = []  # row numbers whose value is null
        self._keys: list[bytes | None] = []
        self._prop_keys: list[str] = []
        self._prop_values: list[str] = []
        self._prop_offsets: list[int] = [0]
        self._event_times: list[int | None] = []
        self._sequence_ids: list[int] = []
        self._id_prefixes: list[str] = []
        self._batch_indexes: list[int] = []
        # Per entry: (rows, publish_time_ms, producer_name)
        self._entries: list[tuple[int, int, str]] = []

    @property
    def value_bytes(self) -> int:
        """Payload bytes gathered so far; keep it under 2 GiB per batch."""
        return self._value_total

    def add(self, entry: Entry, positions: Sequence[int] | None = None) -> None:
        """Append the messages of ``entry`` at ``positions`` (all by default)."""
        if positions is None:
            positions = range(entry.count)
        n = len(positions)
        if not n:
            return
        meta = entry.metadata
        data = entry.data
        view = data if isinstance(data, memoryview) else memoryview(data)
        starts, sizes = entry.starts, entry.sizes
        indexes = entry.batch_indexes
        prefix = f"{entry.ledger}:{entry.entry}:{entry.partition}:"
        values, value_sizes, keys = self._values, self._value_sizes, self._keys
        event_times, seqs = self._event_times, self._sequence_ids
        prop_keys, prop_values, prop_offsets = self._prop_keys, self._prop_values, self._prop_offsets
        batch_indexes = self._batch_indexes
        row = self.rows
        smms = entry.smms
        base_seq = meta.sequence_id
        for pos in positions:
            # A batch item has its own metadata; a single message uses the entry's.
            src = smms[pos] if smms is not None else meta
            start = starts[pos]
            size = sizes[pos]
            if src.null_value:
                self._null_values.append(row)
                size = 0
            else:
                values.append(view[start : start + size])
            value_sizes.append(size)
            self._value_total += size
            key = src.partition_key
            if key:
                if src.null_partition_key:
                    keys.append(None)
                elif src.partition_key_b64_encoded:
                    keys.append(decode_key(key, True, message_id=prefix + str(indexes[pos])))
                else:
                    keys.append(key.encode())
            elif src.HasField("partition_key") and not src.null_partition_key:
                keys.append(b"")
            else:
                keys.append(None)
            props = src.properties
            if props:
                for kv in props:
                    prop_keys.append(kv.key)
                    prop_values.append(kv.value)
            prop_offsets.append(len(prop_keys))
            event_times.append(src.event_time or None)
            if smms is None:
                seqs.append(base_seq)
            else:
                seq = src.sequence_id
                if not seq and not src.HasField("sequence_id"):
                    seq = base_seq + indexes[pos]
                seqs.append(seq)
            batch_indexes.append(indexes[pos])
            row += 1
        self._id_prefixes.extend([prefix] * n)
        self._entries.append((n, meta.publish_time, meta.producer_name))
        self.rows = row

    def build(self) -> pa.RecordBatch:
        """The gathered rows as one RecordBatch (possibly empty); starts a new one."""
        n = self.rows
        value_offsets = [0] * (n + 1)
        total = 0
        for i, size in enumerate(self._value_sizes, 1):
            total += size
            value_offsets[i] = total
        value_validity = None
        if self._null_values:
            mask = [True] * n
            for row in self._null_values:
                mask[row] = False
            value_validity = pa.array(mask, pa.bool_()).buffers()[1]
        if total > _MAX_VALUE_BYTES:
            msg = (
                f"{total} bytes of values do not fit one binary column; build() before "
                f"value_bytes reaches {_MAX_VALUE_BYTES}"
            )
            raise ValueError(msg)
        value_col = pa.Array.from_buffers(
            pa.binary(),
            n,
            [
                value_validity,
                pa.array(value_offsets, pa.int32()).buffers()[1],
                pa.py_buffer(b"".join(self._values)),
            ],
            null_count=len(self._null_values),
        )
        publish, producers = [], []
        for rows, publish_ms, producer in self._entries:
            publish.extend([publish_ms] * rows)
            producers.extend([producer] * rows)
        ids = pc.binary_join_element_wise(
            pa.array(self._id_prefixes, pa.string()),
            pc.cast(pa.array(self._batch_indexes, pa.int32()), pa.string()),
            "",
        )
        props = pa.MapArray.from_arrays(
            pa.array(self._prop_offsets, pa.int32()),
            pa.array(self._prop_keys, pa.string()),
            pa.array(self._prop_values, pa.string()),
        )
        columns = [
            pa.array(self._keys, pa.binary()),
            value_col,
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.partition] * n, pa.int32()),
            ids,
            _ms_to_ts(pa.array(publish, pa.int64())),
            _ms_to_ts(pa.array(self._event_times, pa.int64())),
            props,
            pa.array(producers, pa.string()),
            _int64(self._sequence_ids),
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(columns, schema=ROW_SCHEMA)


def _int64(values: list[int]) -> pa.Array:
    try:
        return pa.array(values, pa.int64())
    except OverflowError:  # uint64 on the wire: keep the bits
        return pa.array(values, pa.uint64()).cast(pa.int64(), safe=False)


def _ms_to_ts(ms: pa.Array) -> pa.Array:
    return pc.multiply(ms, 1000).cast(_TS)
