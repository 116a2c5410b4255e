"""An id-level scan that also gives each message's payload size: what byte budgets count.

:func:`scan_sizes` delivers exactly the messages
:meth:`~.client.PulsarClient.scan_ids` does (same reader, same selection,
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

from collections.abc import Generator
from typing import TYPE_CHECKING, NamedTuple

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.crypto.fields import TAG_SIZE
from pulsar_spark.protocol.entry import Entry
from pulsar_spark.protocol.ids.message_id import MessageId

from .bounds import BoundLike, end_bound, start_bound
from .chunk_bounds import skip_incomplete
from .reader import PartitionReader
from .sinks import Delivered, IdSink, Pick

if TYPE_CHECKING:
    from ..client import PulsarClient

__all__ = ["SizedRef", "scan_reader", "scan_sizes"]


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


def scan_sizes(
    client: PulsarClient,
    topic: str,
    start: BoundLike = "earliest",
    end: BoundLike = "latest",
    limit: int | None = None,
    receiver_queue_size: int | None = None,
) -> Generator[SizedRef, None, None]:
    """The :class:`SizedRef` of each message between ``start`` and ``end`` (bounds
    as :meth:`~.client.PulsarClient.scan_ids` takes them), at most ``limit`` of them
    (all when None), in the order messages complete. ``topic`` is a non-partitioned
    topic or one partition. Leaving the iterator early (``close()``) ends the read.

    Raises:
        ClientError: a partitioned topic, or a malformed bound.
    """
    return _deliver(scan_reader(client, topic, start, end, limit, receiver_queue_size), limit)


def scan_reader(
    client: PulsarClient,
    topic: str,
    start: BoundLike,
    end: BoundLike,
    limit: int | None,
    receiver_queue_size: int | None,
) -> PartitionReader:
    """The reader of an id scan, sized (:func:`scan_sizes`) or not
    (:meth:`~.client.PulsarClient.scan_ids`): ``topic`` one partition, the consumer's
    window ``receiver_queue_size`` (by default ``limit``, at most 1000). A chunked message
    begun in the range and never completed is skipped with a WARNING
    (:func:`~.chunk_bounds.skip_incomplete`): a scan plans reads, the read reports it."""
    name = client._one_partition(topic, "scan")
    if receiver_queue_size is None:
        receiver_queue_size = 1000 if limit is None else min(max(limit, 1), 1000)
    return PartitionReader(
        client._lookup,
        name,
        start=start_bound(start),
        end=end_bound(end),
        receiver_queue_size=receiver_queue_size,
        operation_timeout=client.operation_timeout,
        chunk_loss=skip_incomplete,
    )


def _deliver(reader: PartitionReader, limit: int | None) -> Generator[SizedRef, None, None]:
    count = 0
    try:
        if limit is not None and limit < 1:
            return
        # The reader's sink protocol (add / full / pending / flush): the id path, sized.
        for refs in reader._read(SizedIdSink()):
            for ref in refs:
                assert isinstance(ref, SizedRef)
                yield ref
                count += 1
                if count == limit:
                    return
    finally:
        reader.close()
