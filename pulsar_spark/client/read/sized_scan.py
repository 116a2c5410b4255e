"""The sink of an id-level scan that also gives each message's payload size: what byte
budgets count.

:meth:`~.reader.PartitionReader.sizes` (and the client's
:meth:`~pulsar_spark.client.PulsarClient.scan_sizes`) delivers exactly the messages
:meth:`~.reader.PartitionReader.ids` does (same reader, same selection,
same order: the order messages complete), each as a :class:`SizedRef`: its id,
publish time and the size in bytes of its payload as the ``value`` column
holds it, decompressed. No Arrow is built:

* a message that is not in a batch: its metadata's ``uncompressed_size`` when
  it is compressed, else its payload's length (a chunked message: the whole
  message put together);
* an item of a batch: its own size (the batch is decompressed and split, as
  the id scan does anyway to see its items' ``compacted_out`` flags);
* an encrypted message, read without its key (the scan needs none): its
  ``uncompressed_size``, which the metadata keeps in clear (the plaintext
  before compression), or, when the producer left it out (no compression),
  its ciphertext less the 16-byte AES-GCM tag of each encrypted payload: the
  plaintext's length, as for a plain message;
* an encrypted batch, whose items are known only once decrypted: the id scan
  gives it whole, once per message it holds; the first of those carries the
  batch's size as above (its items' values and their few bytes of per-item
  metadata: a budget is kept, by a small margin) and the others 0, so that
  the sizes of a range add up to what it holds, and a range never ends
  inside it.

Used by the stream reader's byte limit (``maxBytesPerTrigger``): the driver
learns payload sizes over the binary protocol, without the admin API.
"""

from __future__ import annotations

from typing import NamedTuple

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.crypto.fields import TAG_SIZE
from pulsar_spark.protocol.entry import Entry
from pulsar_spark.protocol.ids.message_id import MessageId

from .sinks import Delivered, IdSink, Pick

__all__ = ["SizedIdSink", "SizedRef"]


class SizedRef(NamedTuple):
    """One message found by a sized scan."""

    #: Its id; for a chunked message, its first chunk's entry (batch index -1).
    message_id: MessageId
    #: Its publish time, epoch milliseconds.
    publish_time: int
    #: Bytes of its payload, decompressed (see the module docstring).
    size: int


class SizedIdSink(IdSink):
    """:class:`~.sinks.IdSink` that also records each message's payload size."""

    def __init__(self) -> None:
        super().__init__()
        self._sizes: list[int] = []

    def add(self, message: Delivered, pick: Pick) -> None:
        seen: list[tuple[Entry, list[int]]] = []

        def picking(entry: Entry) -> list[int]:
            positions = pick(entry)
            seen.append((entry, positions))
            return positions

        before = len(self._refs)
        super().add(message, picking)
        added = len(self._refs) - before
        if added == 0:
            return
        metadata = message.metadata
        entry, positions = seen[-1]
        if entry.batched and entry.located:  # a batch the id scan split: item sizes
            sizes = entry.sizes
            self._sizes.extend(sizes[p] for p in positions)
        elif len(metadata.encryption_keys):  # not decrypted: sizes from the metadata
            size = _encrypted_size(metadata, message.payload)
            if metadata.HasField("num_messages_in_batch"):
                self._sizes.extend([size] + [0] * (added - 1))
            else:
                self._sizes.extend([size] * added)
        else:
            self._sizes.extend([_single_size(metadata, message.payload)] * added)

    def flush(self) -> list[SizedRef]:  # type: ignore[override]
        refs = super().flush()
        sizes, self._sizes = self._sizes, []
        if len(sizes) != len(refs):  # pragma: no cover - add() keeps them in step
            msg = f"sized scan: {len(refs)} messages but {len(sizes)} sizes"
            raise AssertionError(msg)
        return [SizedRef(r.message_id, r.publish_time, s) for r, s in zip(refs, sizes, strict=True)]


def _single_size(metadata: pb.MessageMetadata, payload: bytes | memoryview) -> int:
    if metadata.compression != pb.NONE and metadata.HasField("uncompressed_size"):
        return int(metadata.uncompressed_size)
    return len(payload)


def _encrypted_size(metadata: pb.MessageMetadata, payload: bytes | memoryview) -> int:
    """An encrypted message's (or batch's) plaintext size, before compression."""
    if metadata.HasField("uncompressed_size"):
        return int(metadata.uncompressed_size)
    # A chunked message's chunks are each encrypted (each has a tag); the id scan cut them.
    pieces = 0 if metadata.num_chunks_from_msg > 1 else 1
    return max(0, len(payload) - TAG_SIZE * pieces)
