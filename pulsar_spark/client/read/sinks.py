"""What a reader turns the messages it selects into: Arrow record batches, or ids only.

The reader (:mod:`.reader`) decides which messages of each entry a read
delivers, the same way for both sinks; a sink only receives each entry with
a function that picks its messages:

* :class:`ArrowSink` decodes them into RecordBatches with the row schema;
* :class:`IdSink` keeps each message's id and publish time
  (:class:`MessageRef`), without building Arrow, and without decompressing
  payloads that are not batches (a batch is opened to see its items'
  ``compacted_out`` flags, as the Arrow path does; an encrypted batch is not:
  it is given whole, so that a range never ends inside it).

A chunked message is delivered once its last chunk came, as the whole
message: the Arrow row carries its last chunk's id, while a
:class:`MessageRef` gives the position where it begins, its first chunk (batch
index -1), which is where a range that holds it must start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import pyarrow as pa

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.entry import Entry, open_entry
from pulsar_spark.protocol.ids.message_id import MessageId

if TYPE_CHECKING:
    from pulsar_spark.protocol.crypto.decrypt import Decryptor

__all__ = ["ArrowSink", "Delivered", "IdSink", "MessageRef", "Pick"]


class MessageRef(NamedTuple):
    """One message found by an id-level scan."""

    #: Its id; for a chunked message, its first chunk's entry (batch index -1).
    message_id: MessageId
    #: Its publish time, epoch milliseconds.
    publish_time: int


@dataclass(slots=True)
class Delivered:
    """One entry's worth of messages handed to a sink (a chunked message put together)."""

    ledger: int
    entry: int
    partition: int
    metadata: pb.MessageMetadata
    payload: bytes | memoryview
    broker_entry_metadata: pb.BrokerEntryMetadata | None
    #: (ledger, entry) where the message begins: its first chunk, else its own entry.
    begins: tuple[int, int]
    #: Most bytes decompression may allocate.
    limit: int
    #: Decrypts an encrypted entry (or applies its crypto failure action).
    decrypt: Decryptor | None = None

    def open(self, *, split: bool) -> Entry:
        return open_entry(
            self.ledger,
            self.entry,
            self.partition,
            self.metadata,
            self.payload,
            broker_entry_metadata=self.broker_entry_metadata,
            limit=self.limit,
            split=split,
            decrypt=self.decrypt,
        )


#: Given an opened entry, the positions (into its items) of the messages delivered.
Pick = Callable[[Entry], list[int]]


class ArrowSink:
    """Rows into RecordBatches of about ``batch_rows`` rows or ``batch_bytes`` bytes."""

    def __init__(self, topic: str, partition: int, *, batch_rows: int, batch_bytes: int) -> None:
        self._builder = ArrowBatchBuilder(topic, partition)
        self._batch_rows, self._batch_bytes = batch_rows, batch_bytes

    def add(self, message: Delivered, pick: Pick) -> None:
        # split=False: the builder locates the items of many entries at once.
        entry = message.open(split=False)
        chunked = message.begins != (message.ledger, message.entry)
        self._builder.add(entry, pick(entry), first_chunk=message.begins if chunked else None)

    @property
    def full(self) -> bool:
        builder = self._builder
        return builder.rows >= self._batch_rows or builder.value_bytes >= self._batch_bytes

    @property
    def held_bytes(self) -> int:
        """Bytes held for the rows being built."""
        return self._builder.value_bytes

    @property
    def pending(self) -> bool:
        return self._builder.rows > 0

    def flush(self) -> pa.RecordBatch:
        return self._builder.build()


class IdSink:
    """Message ids and publish times, handed out entry by entry."""

    def __init__(self) -> None:
        self._refs: list[MessageRef] = []

    def add(self, message: Delivered, pick: Pick) -> None:
        metadata = message.metadata
        batched = metadata.HasField("num_messages_in_batch")
        # An encrypted batch's items are known only once it is decrypted, which ids need no
        # key for: it is given whole (batch index -1), once per message it holds.
        sealed = batched and len(metadata.encryption_keys) > 0
        if batched and not sealed:
            entry = message.open(split=True)
        else:  # one message: nothing in its payload decides whether it is delivered
            entry = Entry(
                message.ledger, message.entry, message.partition, metadata, b"", (-1,), False
            )
        positions = pick(entry)
        if not positions:
            return
        publish_time = metadata.publish_time
        if sealed:
            mid = MessageId(message.ledger, message.entry, message.partition, -1)
            held = len(metadata.compacted_batch_indexes) or metadata.num_messages_in_batch
            self._refs.extend([MessageRef(mid, publish_time)] * max(held, 1))
            return
        if message.begins != (message.ledger, message.entry):  # a chunked message
            ledger, entry_id = message.begins
            self._refs.append(
                MessageRef(MessageId(ledger, entry_id, message.partition, -1), publish_time)
            )
            return
        indexes = entry.batch_indexes
        self._refs.extend(
            MessageRef(
                MessageId(message.ledger, message.entry, message.partition, indexes[p]),
                publish_time,
            )
            for p in positions
        )

    @property
    def full(self) -> bool:
        return bool(self._refs)

    #: Ids hold no payloads.
    held_bytes = 0

    @property
    def pending(self) -> bool:
        return bool(self._refs)

    def flush(self) -> list[MessageRef]:
        refs, self._refs = self._refs, []
        return refs
