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

An encrypted entry (its metadata carries ``encryption_keys``) is never
decompressed or split unless it was decrypted first: :func:`open_entry`
decrypts it with the :class:`~pulsar_spark.protocol.crypto.decrypt.Decryptor` it is given, which
applies the crypto failure action when it cannot (fail, discard: an entry of
no messages with :attr:`Entry.discarded` set, consume: one message holding the
ciphertext, with :attr:`Entry.encrypted_with` naming its keys); with no
decryptor it raises :class:`~pulsar_spark.protocol.crypto.errors.MissingPrivateKey`.
:func:`messages` builds Python objects for tools and tests; the Arrow path
(:mod:`pulsar_spark.columnar`) reads the same :class:`Entry` columns without them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import PulsarApi_pb2 as pb
from .batch import BatchItems, check_count, split_batch
from .codecs import decompress
from .errors import BatchDecodeError, ProtocolError
from .framing import DEFAULT_MAX_FRAME_SIZE
from .ids.message_id import MessageId

if TYPE_CHECKING:
    from .crypto.decrypt import Decryptor

__all__ = [
    "Entry",
    "open_entry",
    "select",
]


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
    #: An encrypted entry that did not decrypt, discarded (action ``discard``):
    #: it holds no messages.
    discarded: bool = False
    #: The key names of an entry handed on still encrypted (action ``consume``):
    #: its one message's payload is the ciphertext. Empty otherwise.
    encrypted_with: tuple[str, ...] = ()

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
    decrypt: Decryptor | None = None,
) -> Entry:
    """Decrypt (when encrypted), decompress and (unless ``split=False``) split one entry.

    Args:
        ledger, entry, partition: where the entry lives (for ids and errors).
        metadata: its MessageMetadata.
        payload: the frame's payload (for a chunked message, the reassembled one).
        limit: most bytes decompression may allocate; a larger declared
            ``uncompressed_size`` is corruption.
        split: locate a batch's items now, parsing each item's metadata; with
            ``False`` only the item count is checked against the payload size,
            and a batch that does not split fails where its items are located.
        decrypt: decrypts an encrypted entry, or applies its crypto failure
            action; needed only for encrypted entries (a reader passes it on).

    Raises:
        CorruptMessage: (a subclass of) with the entry's message id in it.
        DecryptionError: an encrypted entry not decrypted (no decryptor, or its
            failure action is ``fail``), naming the id and the key names.
    """
    where = f"{ledger}:{entry}:{partition}:-1"
    batched = metadata.HasField("num_messages_in_batch")
    items = None
    if len(metadata.encryption_keys) and (batched or len(payload) or not metadata.null_value):
        if decrypt is None:
            from .crypto.fields import missing_key_error

            raise missing_key_error(metadata, message_id=where)
        opened = decrypt.open(metadata, payload, message_id=where)
        if opened.outcome == "discarded":
            none = BatchItems([], [], [])
            return Entry(
                ledger, entry, partition, metadata, b"", (), batched, broker_entry_metadata,
                none, discarded=True,
            )  # fmt: skip
        if opened.outcome == "encrypted":
            data = opened.payload
            return Entry(
                ledger, entry, partition, opened.metadata, data, (-1,), False,
                broker_entry_metadata, BatchItems([], [0], [len(data)]),
                encrypted_with=opened.key_names,
            )  # fmt: skip
        payload = opened.payload
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
            kept: Sequence[int] = metadata.compacted_batch_indexes
            count = len(kept) if kept else metadata.num_messages_in_batch
            whole = None
            if kept and metadata.num_messages_in_batch > count:
                # Compactors before Pulsar 4.2 keep only the listed items in the payload;
                # newer ones keep every item and flag the dropped ones compacted_out.
                whole = _every_item(data, metadata.num_messages_in_batch)
                if whole is not None:
                    _kept_indexes(kept)
                    count, kept = metadata.num_messages_in_batch, ()
            if whole is not None:
                items = whole
            elif split:
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
    if entry.is_marker or entry.discarded:
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


def _every_item(data: bytes | bytearray | memoryview, count: int) -> BatchItems | None:
    """The batch's items when its payload holds exactly ``count`` of them, else None."""
    try:
        return split_batch(data, count)
    except BatchDecodeError:
        return None


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
