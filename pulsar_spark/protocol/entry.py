"""Entries: what one SEND or MESSAGE frame carries, opened, filtered and turned into messages.

An *entry* is one stored unit: a single message, or a batch of them. Opening
an entry decompresses its payload and, for a batch, splits it
(:func:`open_entry`). Choosing which of its messages a reader delivers is a
separate step (:func:`select`), with the filters a reader needs:

1. markers (``marker_type`` set) are internal to the broker: skip the entry;
2. items before the start id (the broker re-delivers the start entry whole);
3. ``compacted_out`` items;
4. items whose bit is clear in ``CommandMessage.ack_set`` (already acked).

Every skipped item is counted, so the reader can give its flow permit back.
:func:`messages` builds Python objects for tools and tests; the Arrow path
(:mod:`pulsar_spark.columnar`) reads the same :class:`Entry` columns without them.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass

from . import PulsarApi_pb2 as pb
from .batch import BatchItems, check_count, split_batch
from .codecs import decompress
from .errors import BatchDecodeError, CorruptMessage, ProtocolError
from .framing import DEFAULT_MAX_FRAME_SIZE
from .message_id import MessageId, to_signed64

_U64 = 0xFFFF_FFFF_FFFF_FFFF

__all__ = ["Entry", "Message", "open_entry", "select", "messages", "decode_key", "text"]


@dataclass(slots=True)
class Entry:
    """A decompressed entry, before filtering.

    The items of a batch are located (split) on first use of :attr:`smms`,
    :attr:`starts` or :attr:`sizes`, or at once by :func:`open_entry` unless it
    is told ``split=False``: :class:`~pulsar_spark.columnar.ArrowBatchBuilder` locates the
    items of many entries together, without protobuf objects.
    """

    ledger: int
    entry: int
    partition: int
    metadata: pb.MessageMetadata
    #: Decompressed payload.
    data: bytes | bytearray | memoryview
    #: The batch index of each item: ``range(n)``, or the kept indexes of a
    #: compacted batch; ``[-1]`` for a message that is not batched.
    batch_indexes: Sequence[int]
    #: Whether the payload is a batch (``num_messages_in_batch`` is present).
    batched: bool
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None
    _items: BatchItems | None = None

    @property
    def count(self) -> int:
        return len(self.batch_indexes)

    @property
    def located(self) -> bool:
        """Whether the items' places (and metadata) are known yet."""
        return self._items is not None

    @property
    def items(self) -> BatchItems:
        """Per item: SingleMessageMetadata (empty list when not batched), payload
        start and size.

        Raises:
            CorruptMessage: the batch does not split, naming the entry.
        """
        if self._items is None:
            try:
                self._items = split_batch(self.data, self.count)
            except ProtocolError as exc:
                raise type(exc)(exc.reason, message_id=self.id_text()) from exc
        return self._items

    @property
    def smms(self) -> list[pb.SingleMessageMetadata] | None:
        return self.items.metadata if self.batched else None

    @property
    def starts(self) -> list[int]:
        return self.items.starts

    @property
    def sizes(self) -> list[int]:
        return self.items.sizes

    @property
    def is_marker(self) -> bool:
        marker: bool = self.metadata.HasField("marker_type")
        return marker

    def message_id(self, batch_index: int = -1) -> MessageId:
        return MessageId(self.ledger, self.entry, self.partition, batch_index)

    def id_text(self, batch_index: int = -1) -> str:
        return f"{self.ledger}:{self.entry}:{self.partition}:{batch_index}"


def open_entry(
    ledger: int,
    entry: int,
    partition: int,
    metadata: pb.MessageMetadata,
    payload: bytes | bytearray | memoryview,
    *,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
    limit: int = DEFAULT_MAX_FRAME_SIZE,
    split: bool = True,
) -> Entry:
    """Decompress and (unless ``split=False``) split one entry.

    Args:
        ledger, entry, partition: where the entry lives (for ids and errors).
        metadata: its MessageMetadata.
        payload: the frame's payload (for a chunked message, the reassembled one).
        limit: most bytes decompression may allocate; a larger declared
            ``uncompressed_size`` is corruption.
        split: locate a batch's items now, parsing each item's metadata; with
            ``False`` only the item count is checked against the payload size,
            and a batch that does not split fails where its items are located.

    Raises:
        CorruptMessage: (a subclass of) with the entry's message id in it.
    """
    where = f"{ledger}:{entry}:{partition}:-1"
    batched = metadata.HasField("num_messages_in_batch")
    items = None
    try:
        if not metadata.compression or (
            # A tombstone may travel with no payload bytes at all, even when a
            # codec is named: there is nothing to inflate.
            not batched and metadata.null_value and not len(payload)
        ):
            data = payload
        else:
            data = decompress(metadata.compression, payload, metadata.uncompressed_size, limit)
        if batched:
            kept = metadata.compacted_batch_indexes
            count = len(kept) if kept else metadata.num_messages_in_batch
            if split:
                items = split_batch(data, count)
            else:
                check_count(count, len(data))
            indexes: Sequence[int] = _kept_indexes(kept) if kept else range(count)
        else:
            items, indexes = BatchItems([], [0], [len(data)]), (-1,)
    except ProtocolError as exc:
        raise type(exc)(exc.reason, message_id=where) from exc
    return Entry(
        ledger, entry, partition, metadata, data, indexes, batched, broker_entry_metadata, items
    )


def select(
    entry: Entry,
    *,
    ack_set: Sequence[int] = (),
    start: MessageId | None = None,
    start_inclusive: bool = True,
) -> list[int]:
    """Positions (into the entry's item lists) of the messages to deliver.

    ``entry.count - len(result)`` items were filtered, and their permits are
    owed back to the broker. ``compacted_out`` items are filtered here when
    the entry is :attr:`~Entry.located`; otherwise
    :class:`~pulsar_spark.columnar.ArrowBatchBuilder` drops them when it decodes their metadata.

    Args:
        ack_set: ``CommandMessage.ack_set`` words; bit i clear = item i acked.
        start: the reader's start id. Items before it (or at it, when not
            inclusive) are skipped. A start whose batch index is -1 means the
            whole entry.
    """
    if entry.is_marker:
        return []
    n = entry.count
    keep = list(range(n))
    if start is not None:
        position = (entry.ledger, entry.entry)
        bound = (start.ledger, start.entry)
        if position < bound:
            return []
        if position == bound:
            if start.batch_index < 0 or not entry.batched:
                if not start_inclusive:
                    return []
            else:
                indexes = entry.batch_indexes
                first = start.batch_index if start_inclusive else start.batch_index + 1
                keep = [i for i in keep if indexes[i] >= first]
    if entry.batched:
        if entry.located:
            smms = entry.items.metadata
            keep = [i for i in keep if not smms[i].compacted_out]
        if ack_set:
            indexes = entry.batch_indexes
            keep = [i for i in keep if _bit(ack_set, indexes[i])]
    return keep


def _kept_indexes(kept: Sequence[int]) -> list[int]:
    """``compacted_batch_indexes`` checked: real batch indexes of the kept
    items, so non-negative and in increasing order (each id once)."""
    indexes = list(kept)
    previous = -1
    for index in indexes:
        if index <= previous:
            msg = f"compacted_batch_indexes {indexes} are not increasing non-negative batch indexes"
            raise BatchDecodeError(msg)
        previous = index
    return indexes


def _bit(words: Sequence[int], index: int) -> bool:
    word = index >> 6
    if not 0 <= word < len(words):
        return False
    return bool(((words[word] & 0xFFFF_FFFF_FFFF_FFFF) >> (index & 63)) & 1)


def decode_key(key: str | bytes, b64: bool, *, message_id: str = "") -> bytes:
    """Partition key bytes: UTF-8 of the key, or its base64 decoding.

    ``key`` is what protobuf gives for the ``partition_key`` string field:
    ``str``, or ``bytes`` when the wire bytes are not valid UTF-8 (some
    producers write raw bytes). Raw bytes are the key bytes as sent.
    """
    if not b64:
        return key.encode() if isinstance(key, str) else bytes(key)
    try:
        return base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError) as exc:
        msg = f"partition key {key!r} is flagged base64 but does not decode: {exc}"
        raise CorruptMessage(msg, message_id=message_id or None) from exc


def text(value: str | bytes) -> str:
    """A protobuf string field as ``str``.

    protobuf hands back ``bytes`` for a string field whose wire bytes are not
    valid UTF-8; those are decoded with U+FFFD replacements (as Java does).
    """
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")


@dataclass(slots=True)
class Message:
    """One message as Python objects (tools and tests; readers use Arrow).

    Text fields hold valid text: bytes that are not UTF-8 on the wire are
    decoded with U+FFFD replacements, as the Java client does. ``sequence_id``
    is signed 64-bit, like the Java client's and the Arrow ``sequenceId``.
    """

    message_id: MessageId
    value: bytes | None
    key: bytes | None
    #: The key as the producer gave it (base64 text when ``key`` was bytes).
    partition_key: str | None
    ordering_key: bytes | None
    properties: dict[str, str]
    event_time: int | None
    publish_time: int
    producer_name: str
    sequence_id: int
    schema_version: bytes | None = None
    broker_publish_time: int | None = None
    broker_index: int | None = None
    replicated_from: str | None = None


def messages(entry: Entry, positions: Sequence[int] | None = None) -> list[Message]:
    """Build :class:`Message` objects for the chosen positions (all by default)."""
    meta = entry.metadata
    if positions is None:
        positions = range(entry.count)
    bem = entry.broker_entry_metadata
    broker_time = bem.broker_timestamp if bem and bem.HasField("broker_timestamp") else None
    # The index is that of the entry's last message; items count from the batch's
    # original size, so that compaction (which drops items) changes no index.
    first_index = None
    if bem and bem.HasField("index"):
        size = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
        first_index = bem.index - size + 1
    data = entry.data
    out = []
    for pos in positions:
        batch_index = entry.batch_indexes[pos]
        id_text = entry.id_text(batch_index)
        start, size = entry.starts[pos], entry.sizes[pos]
        src = entry.smms[pos] if entry.smms is not None else meta
        if entry.smms is not None:
            seq = src.sequence_id if src.HasField("sequence_id") else meta.sequence_id + batch_index
        else:
            seq = meta.sequence_id
        if src.HasField("partition_key") and not src.null_partition_key:
            pkey: str | None = text(src.partition_key)
            key: bytes | None = decode_key(
                src.partition_key, src.partition_key_b64_encoded, message_id=id_text
            )
        else:
            pkey = key = None
        out.append(
            Message(
                message_id=entry.message_id(batch_index),
                value=None if src.null_value else bytes(data[start : start + size]),
                key=key,
                partition_key=pkey,
                ordering_key=src.ordering_key if src.HasField("ordering_key") else None,
                properties={text(kv.key): text(kv.value) for kv in src.properties},
                event_time=src.event_time or None,
                publish_time=meta.publish_time,
                producer_name=text(meta.producer_name),
                sequence_id=to_signed64(seq & _U64),
                schema_version=meta.schema_version if meta.HasField("schema_version") else None,
                broker_publish_time=broker_time,
                broker_index=(
                    None
                    if first_index is None
                    else to_signed64((first_index + max(batch_index, 0)) & _U64)
                ),
                replicated_from=(
                    text(meta.replicated_from) if meta.HasField("replicated_from") else None
                ),
            )
        )
    return out
