"""Row columns that need more than a gather: keys, values with tombstones, times, properties,
broker indexes; a bad value fails the batch naming its message id.

``prefixes[e]`` is entry ``e``'s ``ledger:entry:partition:``; ``row_entry`` and
``batch_indexes`` give each row's entry and batch index.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol.entry_messages import decode_key
from pulsar_spark.protocol.errors import CorruptMessage, ProtocolError
from pulsar_spark.protocol.wire import text

from ..arrays import Ints, Mask, UInt64s
from ..gather import gather_binary, map_array
from .schema import TIMESTAMP
from .smm.schema import SmmColumns

__all__ = [
    "broker_index_column",
    "key_column",
    "property_column",
    "row_id",
    "timestamp_column",
    "with_nulls",
]

_MAX_MS = (2**63 - 1) // 1000


def key_column(
    cols: SmmColumns, prefixes: list[str], row_entry: Ints, batch_indexes: Ints
) -> pa.Array:
    """The ``key`` column: partition keys, null where absent; base64 keys decoded."""
    has_key = cols.has_key & ~cols.null_partition_key
    keys = gather_binary(cols.data, cols.key_start, cols.key_len, has_key)
    b64 = np.flatnonzero(has_key & cols.partition_key_b64_encoded)
    if not len(b64):
        return keys
    # Base64 keys are rare: decode those rows one by one.
    values = keys.to_pylist()
    for row in b64.tolist():
        where = row_id(prefixes, row_entry, batch_indexes, row)
        values[row] = decode_key(values[row], True, message_id=where or "")
    return pa.array(values, pa.binary())


def timestamp_column(
    ms: UInt64s,
    prefixes: list[str],
    row_entry: Ints,
    batch_indexes: Ints,
    what: str,
    unset: int | None,
) -> pa.Array:
    """Milliseconds (uint64 from the wire) as UTC microseconds; null where ``unset``."""
    bad = ms > _MAX_MS
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        msg = f"{what} {int(ms[row])} ms is beyond the timestamp range"
        raise CorruptMessage(msg, message_id=row_id(prefixes, row_entry, batch_indexes, row))
    micros = ms.astype(np.int64) * 1000
    return pa.array(micros, TIMESTAMP, mask=None if unset is None else ms == unset)


def property_column(cols: SmmColumns) -> pa.Array:
    """The ``properties`` column; keys and values that are not UTF-8 decoded with U+FFFD."""
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


def broker_index_column(
    has_index: list[bool],
    first_index: list[int],
    row_entry: Ints,
    batch_indexes: Ints,
) -> pa.Array:
    """The ``index`` column: the entry's first index plus the batch index, null without one."""
    present = np.array(has_index, np.bool_)[row_entry]
    if not present.any():
        return pa.nulls(len(row_entry), pa.int64())
    first = np.array(first_index, np.int64)[row_entry]
    return pa.array(first + np.maximum(batch_indexes, 0), pa.int64(), mask=~present)


def with_nulls(values: pa.Array, null: Mask) -> pa.Array:
    """``values`` with nulls where ``null`` (tombstones)."""
    if not null.any():
        return values
    validity = pa.array(~null).buffers()[1]
    offsets, data = values.buffers()[1:]
    return pa.Array.from_buffers(
        pa.binary(), len(values), [validity, offsets, data], null_count=int(null.sum())
    )


def row_id(
    prefixes: list[str], row_entry: Ints, batch_indexes: Ints, row: int | None
) -> str | None:
    """The message id of ``row``, or None when there is no such row."""
    if row is None or not 0 <= row < len(row_entry):
        return None
    return prefixes[int(row_entry[row])] + str(int(batch_indexes[row]))
