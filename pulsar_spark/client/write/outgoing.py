"""A producer's outgoing batches: queued messages sealed into one SEND (metadata,
compression, chunks), kept until the broker confirms them.

A batch of several messages carries ``num_messages_in_batch`` and the
``highest_sequence_id``; a message sent alone copies its item metadata
(properties, key, event time, tombstone and null key flags) into the message
metadata. A message whose (compressed) payload does not fit the message limit
is split into chunks: one SEND per chunk (``is_chunk``), all sharing the message's
sequence id and ``uuid``, each chunk's metadata plus payload within the limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from pulsar_spark.columnar.rows.encode import Item, encode_items, single_metadata
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.codecs import compress
from pulsar_spark.protocol.crypto.encrypt import TAG_SIZE, Encryptor
from pulsar_spark.protocol.errors import EncodeError
from pulsar_spark.protocol.framing import encode_payload_command
from pulsar_spark.protocol.txn import TxnId

from ..errors import ClientError

__all__ = ["OpenBatch", "Packed", "PendingBatch", "seal"]


_ITEM_FIELDS = (
    "partition_key",
    "partition_key_b64_encoded",
    "event_time",
    "null_value",
    "null_partition_key",
)


@dataclass(slots=True)
class PendingBatch:
    """One SEND (or the SENDs of one chunked message) awaiting its receipts."""

    first: int
    last: int
    count: int
    batched: bool
    metadata: bytes
    payload: bytes | memoryview
    #: (metadata, payload) of each chunk of a chunked message; None otherwise.
    chunks: list[tuple[bytes, bytes]] | None = None
    #: chunks whose receipt came (receipts arrive in order).
    chunks_confirmed: int = 0
    #: Monotonic time of sealing: the send timeout counts from it.
    created: float = 0.0
    #: Bytes held (metadata and payload), for the producer's byte window.
    size: int = 0
    #: The transaction the batch belongs to (its SENDs carry it too); None: none.
    txn: TxnId | None = None

    def frames(self, producer_id: int) -> list[bytes]:
        """The frames to (re)send, for the producer's current id (chunks not yet
        confirmed only)."""
        command = commands.send(
            producer_id,
            sequence_id=self.first,
            num_messages=self.count,
            highest_sequence_id=self.last if self.batched else None,
            is_chunk=self.chunks is not None,
            txn=self.txn,
        )
        if self.chunks is None:
            return [encode_payload_command(command, self.metadata, self.payload)]
        return [
            encode_payload_command(command, metadata, payload)
            for metadata, payload in self.chunks[self.chunks_confirmed :]
        ]


class OpenBatch:
    """The batch being filled: its items' bytes (parts laid end to end, as
    :func:`~..columnar.rows.encode_items` would lay them out), count, first and last
    sequence ids, size as the producer counts it, and when its first item came."""

    __slots__ = ("bytes", "count", "first", "last", "opened_at", "parts")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self.count = self.bytes = 0
        self.first = self.last = -1
        self.opened_at = 0.0

    def add(self, part: bytes | memoryview, count: int, first: int, last: int, size: int) -> None:
        """Append ``count`` items (ids ``first`` to ``last``) of ``size`` bytes."""
        if not self.count:
            self.first, self.opened_at = first, time.monotonic()
        self.parts.append(part)
        self.count += count
        self.last = last
        self.bytes += size

    def take(self) -> tuple[bytes | memoryview, int, int, int, int]:
        """(payload, count, first, last, size), leaving the batch empty."""
        parts = self.parts
        payload = parts[0] if len(parts) == 1 else b"".join(parts)
        taken = (payload, self.count, self.first, self.last, self.bytes)
        self.parts, self.count, self.bytes = [], 0, 0
        return taken


class Packed(NamedTuple):
    """Items already laid out as a batch payload (what :meth:`OpenBatch.take` gives):
    its bytes, how many messages, and their first and last sequence ids."""

    payload: bytes | memoryview
    messages: int
    first: int
    last: int


def seal(
    items: list[Item] | Packed,
    *,
    producer: str,
    topic: str,
    batched: bool,
    codec: int,
    limit: int,
    chunking: bool,
    schema_version: bytes = b"",
    encryptor: Encryptor | None = None,
    txn: TxnId | None = None,
) -> PendingBatch:
    """Seal a batch (``items``, or what :meth:`OpenBatch.take` gives: the items' bytes,
    count, first and last ids), or one message alone when not ``batched`` (``items``
    holds it); chunked when it exceeds ``limit``; ``schema_version`` (the producer's,
    when it has one) goes into the metadata. With an ``encryptor`` the (compressed)
    payload is encrypted, last; a chunked message is split first and each chunk
    encrypted on its own (as the official producers do). A batch of transaction
    ``txn`` carries its id in the metadata (what readers and the broker's recovery go
    by) and in its SENDs (what the broker routes by).

    Raises:
        EncodeError: a batch over the limit (the producer keeps batches within it).
        ClientError: a message over the limit with ``chunking`` off, or metadata
            that alone exceeds it.
    """
    if isinstance(items, Packed):
        payload, count, first, last = items
    else:
        first, last, count = items[0].seq, items[-1].seq, len(items)
        payload = encode_items(items) if batched else items[0].value
    meta = pb.MessageMetadata(
        producer_name=producer,
        sequence_id=first,
        publish_time=int(time.time() * 1000),
    )
    if schema_version:
        meta.schema_version = schema_version
    if txn is not None:
        meta.txnid_most_bits, meta.txnid_least_bits = txn
    if batched:
        meta.num_messages_in_batch = count
        meta.highest_sequence_id = last
    else:
        assert isinstance(items, list)
        smm = single_metadata(items[0])
        meta.properties.extend(smm.properties)
        for name in _ITEM_FIELDS:
            if smm.HasField(name):
                setattr(meta, name, getattr(smm, name))
    if codec:
        meta.compression = codec  # type: ignore[assignment]
        meta.uncompressed_size = len(payload)
        payload = compress(codec, payload)
    plain = payload
    if encryptor is not None:
        payload = encryptor.encrypt(meta, plain, now=time.monotonic())
    metadata = meta.SerializeToString()
    batch = PendingBatch(first, last, count, batched, metadata, payload, txn=txn)
    batch.created, batch.size = time.monotonic(), len(metadata) + len(payload)
    if len(metadata) + len(payload) > limit:
        if batched:  # send() keeps batches within the limit
            msg = f"producer {producer} on {topic}: a batch outgrew the message limit"
            raise EncodeError(msg)
        if not chunking:
            msg = (
                f"producer {producer} on {topic}: message {meta.sequence_id} is "
                f"{len(payload)} bytes, over the {limit}-byte message limit, and chunking "
                "is off"
            )
            raise ClientError(msg)
        who = f"producer {producer} on {topic}"
        batch.chunks = _chunks(meta, plain, limit, who, encryptor)
        batch.payload = b""  # the chunks hold it: keep it once
        batch.size = sum(len(m) + len(p) for m, p in batch.chunks)
    return batch


def _chunks(
    meta: pb.MessageMetadata,
    payload: bytes | memoryview,
    limit: int,
    who: str,
    encryptor: Encryptor | None = None,
) -> list[tuple[bytes, bytes]]:
    """Split one message into chunks whose metadata + payload fit the limit (each
    chunk encrypted on its own, with the encryption fields ``meta`` already has)."""
    meta.uuid = f"{meta.producer_name}-{meta.sequence_id}"
    meta.total_chunk_msg_size = len(payload)
    meta.num_chunks_from_msg = 1
    meta.chunk_id = 0
    # Chunk metadata only grows by the varints of the chunk fields: leave room.
    room = limit - meta.ByteSize() - 32 - (TAG_SIZE if encryptor is not None else 0)
    if room < 1:
        msg = f"{who}: metadata alone exceeds {limit} bytes"
        raise ClientError(msg)
    count = -(-len(payload) // room)
    meta.num_chunks_from_msg = count
    chunks = []
    for i in range(count):
        meta.chunk_id = i
        part = bytes(payload[i * room : (i + 1) * room])
        if encryptor is not None:
            part = encryptor.encrypt(meta, part, now=time.monotonic())
        chunks.append((meta.SerializeToString(), part))
    return chunks
