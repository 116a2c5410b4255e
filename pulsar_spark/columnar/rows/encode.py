"""The row encoder: messages (one by one, or the rows of an Arrow table) into the bytes
of a batch payload, without protobuf objects.

protobuf writes SingleMessageMetadata fields in field-number order; a queued
:data:`Item` keeps fields 1-2 (properties, partition_key) and 5-6
(event_time, partition_key_b64_encoded) encoded, and :func:`encode_items`
adds payload_size (3), sequence_id (8) and null_value (9) around them, byte
for byte as ``SerializeToString`` would::

    item metadata = head (1, 2) + payload_size (3) + tail (5, 6 [, 10]) + sequence_id (8)
                    [+ null_value (9)]
    batch payload = per item: u32 metadata size, item metadata, payload

The one exception: ``null_partition_key`` (10), set for the null keys of a key
column of SEPARATED KEY_VALUE keys (marked with :data:`SEPARATED_KEYS`, as the
Java client sets it for a null key of such a schema), ends the tail, before
field 8: protobuf readers (the Java client's, the broker's, ours) take fields
in any order, and the queued item stays four plain values.

:class:`Rows` encodes an Arrow table column by column for a producer's
``send_batch``: per row its metadata head and tail, tombstone flag, payload
and share of a batch.
"""

from __future__ import annotations

import base64
import datetime as dt
import struct
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import EncodeError
from pulsar_spark.protocol.wire import encode_varint

__all__ = [
    "ALLOWED_COLUMNS",
    "SEPARATED_KEYS",
    "InvalidRows",
    "Item",
    "Rows",
    "check_columns",
    "encode_head",
    "encode_items",
    "encode_pre",
    "encode_tail",
    "event_millis",
    "item_body",
    "item_record",
    "partition_key_text",
    "separated_keys",
    "separated_keys_field",
    "single_metadata",
]


class Item(NamedTuple):
    """A queued message: its sequence id, its SingleMessageMetadata fields 1-6 encoded
    (``pre``), whether its value is null, and its payload."""

    seq: int
    pre: bytes
    null: bool
    value: bytes


#: The columns a table sent as rows may have (``value`` is required).
ALLOWED_COLUMNS = frozenset({"value", "key", "properties", "eventTime"})

_U32 = struct.Struct(">I")
_SMALL_VARINTS = [bytes((i,)) for i in range(128)]
_UNIT_DIVISORS: dict[str, int | None] = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}
#: null_partition_key (10) = true.
NULL_KEY = b"\x50\x01"

#: Field metadata of a binary ``key`` column holding the encoded keys of SEPARATED
#: KEY_VALUE messages: its null rows are sent with ``null_partition_key`` (a null in any
#: other key column is a message without a key).
SEPARATED_KEYS = {b"pulsar.keyValueEncoding": b"SEPARATED"}


class InvalidRows(EncodeError, ValueError):
    """Rows or a message that cannot be encoded: a missing or unknown column, a
    negative event time (not retriable). ``row``: the index of the row at fault in
    the table encoded, when one is."""

    def __init__(self, msg: str, *, row: int | None = None) -> None:
        super().__init__(msg)
        self.row = row


def partition_key_text(key: str | bytes) -> str:
    """The partition key as the wire carries it: bytes keys are base64 text."""
    return key if isinstance(key, str) else base64.b64encode(key).decode()


def separated_keys_field(dtype: pa.DataType | None = None) -> pa.Field:
    """The ``key`` field (binary unless ``dtype`` says) of SEPARATED KEY_VALUE keys:
    ``table.set_column(i, separated_keys_field(), keys)``."""
    return pa.field("key", pa.binary() if dtype is None else dtype, metadata=SEPARATED_KEYS)


def separated_keys(table: pa.Table | pa.RecordBatch) -> bool:
    """Whether the table's ``key`` column holds SEPARATED KEY_VALUE keys (its field carries
    :data:`SEPARATED_KEYS`)."""
    schema = table.schema
    if "key" not in schema.names:
        return False
    metadata = schema.field("key").metadata
    return bool(metadata) and metadata.get(b"pulsar.keyValueEncoding") == b"SEPARATED"


def check_columns(table: pa.Table | pa.RecordBatch) -> set[str]:
    """The table's column names.

    Raises:
        InvalidRows: no ``value`` column, or one other than key, properties and
            eventTime; the message lists the accepted ones.
    """
    names = set(table.schema.names)
    if "value" not in names or not names <= ALLOWED_COLUMNS:
        msg = (
            f"send_batch needs a 'value' column and accepts only {sorted(ALLOWED_COLUMNS)}; "
            f"got {sorted(names)}"
        )
        raise InvalidRows(msg)
    return names


def _varint(value: int) -> bytes:
    return _SMALL_VARINTS[value] if 0 <= value < 128 else encode_varint(value)


def encode_head(key: str | bytes | None, properties: dict[str, str] | None) -> tuple[bytes, int]:
    """Fields 1 and 2 encoded, and the message's share of a batch before its payload."""
    size = 32  # its share of a batch, at most: the item's metadata and framing
    parts: list[bytes] = []
    if properties:
        for k, v in properties.items():
            size += 3 * (len(k) + len(v)) + 8
            kb, vb = k.encode(), v.encode()
            kv = b"".join((b"\x0a", _varint(len(kb)), kb, b"\x12", _varint(len(vb)), vb))
            parts += (b"\x0a", _varint(len(kv)), kv)
    if key is not None:
        text = partition_key_text(key)
        size += len(text)
        kb = text.encode()
        parts += (b"\x12", _varint(len(kb)), kb)
    return b"".join(parts), size


def encode_tail(event_time: int | None, b64: bool, null_key: bool = False) -> bytes:
    """Fields 5 and 6 encoded, and 10 (null_partition_key) when ``null_key``.

    Raises:
        InvalidRows: a negative event time.
    """
    flags = (b"\x30\x01" if b64 else b"") + (NULL_KEY if null_key else b"")
    if not event_time:
        return flags
    if event_time < 0:
        msg = f"event time {event_time} is negative"
        raise InvalidRows(msg)
    return b"".join((b"\x28", _varint(event_time), flags))


def encode_pre(head: bytes, value: bytes, tail: bytes) -> bytes:
    """Fields 1-6 of an item's metadata: ``head``, payload_size, ``tail``."""
    return b"".join((head, b"\x18", _varint(len(value)), tail))


def item_body(item: Item) -> bytes:
    """An item's whole SingleMessageMetadata bytes."""
    seq, pre, null, _ = item
    return b"".join((pre, b"\x40", _varint(seq), b"\x48\x01" if null else b""))


def item_record(seq: int, pre: bytes, null: bool, value: bytes) -> bytes:
    """One item of a batch payload as :func:`encode_items` lays it out: metadata size,
    metadata, payload (the four fields of an :class:`Item`, not built)."""
    body = b"".join((pre, b"\x40", _varint(seq), b"\x48\x01" if null else b""))
    return b"".join((_U32.pack(len(body)), body, value))


def single_metadata(item: Item) -> pb.SingleMessageMetadata:
    """An item's metadata as protobuf (a message sent alone copies its fields)."""
    metadata: pb.SingleMessageMetadata = pb.SingleMessageMetadata.FromString(item_body(item))
    return metadata


def encode_items(items: list[Item]) -> bytes:
    """A batch payload (before compression), as :func:`~..protocol.batch.encode_batch`
    lays out the same messages."""
    parts: list[bytes] = []
    add = parts.extend
    pack = _U32.pack
    small = _SMALL_VARINTS
    encode = encode_varint
    # Consecutive ids: varints of the first and of each next one, cheaply.
    for seq, pre, null, value in items:
        if null:
            tail = b"".join((b"\x40", _varint(seq), b"\x48\x01"))
        elif seq < 128:
            tail = b"\x40" + small[seq]
        elif seq < 16384:
            tail = bytes((0x40, seq & 0x7F | 0x80, seq >> 7))
        elif seq < 2097152:
            tail = bytes((0x40, seq & 0x7F | 0x80, seq >> 7 & 0x7F | 0x80, seq >> 14))
        else:
            tail = b"\x40" + encode(seq)
        add((pack(len(pre) + len(tail)), pre, tail, value))
    return b"".join(parts)


def event_millis(column: pa.ChunkedArray | pa.Array) -> list[int | None]:
    """Event times as epoch milliseconds: ints as they are, timestamps in UTC (a
    naive timestamp is taken as UTC)."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        raw = pc.cast(column, pa.timestamp(kind.unit), safe=False).cast(pa.int64())
        divisor = _UNIT_DIVISORS[kind.unit]
        millis: list[int | None]
        if divisor is None:
            millis = pc.multiply(raw, 1000).to_pylist()
        elif divisor == 1:
            millis = raw.to_pylist()
        else:
            millis = [None if t is None else t // divisor for t in raw.to_pylist()]
        return millis
    out: list[int | None] = []
    for event in column.to_pylist():
        if event is None or isinstance(event, int):
            out.append(event)
        else:
            if isinstance(event, dt.datetime) and event.tzinfo is None:
                event = event.replace(tzinfo=dt.timezone.utc)
            out.append(int(event.timestamp() * 1000))
    return out


class Rows:
    """The rows of an Arrow table encoded column by column: per row its metadata
    fields 1-6 (:attr:`pres`), tombstone flag, payload and share of a batch.

    Raises:
        InvalidRows: columns other than those :func:`check_columns` accepts, or a
            negative event time.
    """

    def __init__(self, table: pa.Table | pa.RecordBatch) -> None:
        names = check_columns(table)
        n = self.n = int(table.num_rows)
        column = table.column("value")
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = pc.cast(column, pa.binary())
        values: list[bytes] = column.to_pylist()
        self.nulls: list[bool] = [v is None for v in values] if column.null_count else [False] * n
        if column.null_count:
            values = [b"" if v is None else v for v in values]
        self.values = values
        keys: list[str | bytes | None] | None = (
            table.column("key").to_pylist() if "key" in names else None
        )
        self.keys = keys
        props: list[list[tuple[str, str]] | None] | None = (
            table.column("properties").to_pylist() if "properties" in names else None
        )
        times = event_millis(table.column("eventTime")) if "eventTime" in names else None
        heads: list[bytes] | None
        if keys is None and props is None:
            heads = None
            self.sizes: list[int] = [32 + len(v) for v in values]
        else:
            pairs = []
            for i in range(n):
                prop = props[i] if props else None
                pairs.append(encode_head(keys[i] if keys else None, dict(prop) if prop else None))
            heads = [h for h, _ in pairs]
            self.sizes = [z + len(v) for (_, z), v in zip(pairs, values, strict=True)]
        tails: list[bytes] | None
        null_keys = keys is not None and separated_keys(table) and None in keys
        if (
            times is None
            and not null_keys
            and (keys is None or not any(isinstance(k, bytes) for k in keys))
        ):
            tails = None
        else:
            tails = [
                encode_tail(
                    times[i] if times else None,
                    keys is not None and isinstance(keys[i], bytes),
                    null_keys and keys is not None and keys[i] is None,
                )
                for i in range(n)
            ]
        if heads is None and tails is None:
            # payload_size alone: the varints of the lengths, shared by equal lengths.
            sizes: dict[int, bytes] = {}
            pres = []
            for v in values:
                length = len(v)
                pre = sizes.get(length)
                if pre is None:
                    pre = sizes[length] = b"\x18" + _varint(length)
                pres.append(pre)
            self.pres: list[bytes] = pres
        else:
            empty = [b""] * n
            self.pres = [
                encode_pre(h, v, t)
                for h, v, t in zip(heads or empty, values, tails or empty, strict=True)
            ]
