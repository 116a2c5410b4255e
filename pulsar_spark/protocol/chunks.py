"""Chunked messages: :class:`ChunkAssembler` puts the chunks of a large message back together.

A producer splits a message larger than the broker's ``max_message_size``
into chunks, each its own entry, after compressing it whole. Every chunk
repeats the metadata and adds::

    uuid                  producer_name + "-" + sequence_id, the same on all chunks
    chunk_id              0 .. num_chunks_from_msg - 1
    num_chunks_from_msg   how many chunks (> 1)
    total_chunk_msg_size  size of the whole (still compressed) payload

Chunks are never batched. The message is complete when its last chunk
arrives; it is then decompressed whole with the metadata's
``uncompressed_size``, and its id is the last chunk's, with
``first_chunk_message_id`` pointing at the first.

Rules for chunk streams that are not a clean 0..n-1 run:

* chunk 0 again for a known uuid: start that message over (a re-send);
* a chunk id at or below the last one seen: a duplicate, dropped;
* a chunk id after a gap: corruption, :class:`ChunkError`;
* a chunk id > 0 with no message started (a read that began mid-message):
  dropped, since the message began before the reader's start.

Dropped chunks are counted in :attr:`ChunkAssembler.dropped` so that the
reader can return their flow permits.

Memory is bounded by count (``max_pending`` messages at once, the oldest
evicted and named in :attr:`ChunkAssembler.evicted`, as the Java consumer's
``maxPendingChunkedMessage``) and by bytes (``max_bytes`` held by all the
messages being put together: a chunk that would take them beyond it raises
:class:`ChunkError` naming the message, rather than losing it quietly).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from . import PulsarApi_pb2 as pb
from .errors import ChunkError
from .framing import DEFAULT_MAX_FRAME_SIZE

__all__ = ["ChunkAssembler", "ChunkedMessage", "is_chunk"]


def is_chunk(metadata: pb.MessageMetadata) -> bool:
    """Whether an entry is one chunk of a larger message."""
    return not metadata.HasField("num_messages_in_batch") and metadata.num_chunks_from_msg > 1


@dataclass(slots=True)
class ChunkedMessage:
    """A reassembled message: first chunk's metadata, whole payload, both ids."""

    metadata: pb.MessageMetadata
    payload: bytes
    #: (ledger, entry) of the first and of the last chunk.
    first: tuple[int, int]
    last: tuple[int, int]


@dataclass(slots=True)
class _Pending:
    metadata: pb.MessageMetadata
    first: tuple[int, int]
    parts: list[bytes | memoryview] = field(default_factory=list)
    size: int = 0
    last_chunk: int = 0


class ChunkAssembler:
    """Puts chunks back together, with bounded memory.

    Args:
        max_pending: most messages being assembled at once; beyond it the
            oldest incomplete one is evicted and counted in :attr:`evicted`.
        max_message_size: largest whole (compressed) message accepted;
            a larger ``total_chunk_msg_size`` is corruption.
        max_bytes: most bytes all messages being assembled may hold; None:
            no bound but ``max_pending`` times ``max_message_size``.
        make_room: beyond ``max_bytes``, evict the oldest other messages (named
            in :attr:`evicted`) rather than raise, while that makes room.
    """

    def __init__(
        self,
        *,
        max_pending: int = 100,
        max_message_size: int = 64 * DEFAULT_MAX_FRAME_SIZE,
        max_bytes: int | None = None,
        make_room: bool = False,
    ) -> None:
        self.max_pending = max_pending
        self.max_message_size = max_message_size
        self.max_bytes = max_bytes
        self.make_room = make_room
        #: Bytes held by the messages being assembled.
        self.held_bytes = 0
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        #: Chunks dropped as duplicates or as the tail of a message begun before the read.
        self.dropped = 0
        #: uuids of incomplete messages evicted to respect ``max_pending``.
        self.evicted: list[str] = []

    @property
    def pending(self) -> int:
        return len(self._pending)

    def __contains__(self, uuid: str) -> bool:
        """Whether a message with this uuid is being assembled."""
        return uuid in self._pending

    def incomplete(self) -> list[tuple[str, tuple[int, int]]]:
        """(uuid, (ledger, entry) of the first chunk) of each message being assembled."""
        return [(uuid, p.first) for uuid, p in self._pending.items()]

    def clear(self) -> None:
        """Forget the messages being assembled."""
        self._pending.clear()
        self.held_bytes = 0

    def discard(self, uuid: str) -> None:
        """Forget the message with this uuid, if it is being assembled."""
        pending = self._pending.pop(uuid, None)
        if pending is not None:
            self.held_bytes -= pending.size

    def add(
        self,
        ledger: int,
        entry: int,
        metadata: pb.MessageMetadata,
        payload: bytes | memoryview,
        *,
        partition: int = -1,
    ) -> ChunkedMessage | None:
        """Take one chunk; return the whole message when this was its last chunk.

        Args:
            ledger, entry, partition: where the chunk lives (for error messages).

        Raises:
            ChunkError: inconsistent chunk metadata (also between the chunks of
                one message), a gap, or a size beyond limits. The message's
                partial chunks are dropped.
        """
        uuid = metadata.uuid
        chunk_id = metadata.chunk_id
        count = metadata.num_chunks_from_msg
        total = metadata.total_chunk_msg_size
        where = f"{ledger}:{entry}:{partition}:-1"
        if not metadata.HasField("uuid") or not 0 <= chunk_id < count:
            msg = f"chunk {chunk_id} of {count} (uuid {uuid!r}) has inconsistent chunk metadata"
            raise ChunkError(msg, message_id=where)
        if not 0 <= total <= self.max_message_size:
            msg = (
                f"chunked message {uuid!r} declares {total} bytes, above the limit of "
                f"{self.max_message_size}"
            )
            raise ChunkError(msg, message_id=where)
        pending = self._pending.get(uuid)
        if chunk_id == 0:
            self.discard(uuid)  # begun again: the chunks held so far go
            pending = _Pending(metadata, (ledger, entry))
            self._pending[uuid] = pending
            self._evict()
        elif pending is None or chunk_id <= pending.last_chunk:
            self.dropped += 1
            return None
        elif chunk_id != pending.last_chunk + 1:
            self.discard(uuid)
            msg = (
                f"chunked message {uuid!r} jumps from chunk {pending.last_chunk} to "
                f"{chunk_id}: chunks are missing"
            )
            raise ChunkError(msg, message_id=where)
        elif (count, total) != (
            pending.metadata.num_chunks_from_msg,
            pending.metadata.total_chunk_msg_size,
        ):
            self.discard(uuid)
            first = pending.metadata
            msg = (
                f"chunk {chunk_id} of message {uuid!r} declares {count} chunks of "
                f"{total} bytes, but its first chunk declared {first.num_chunks_from_msg} "
                f"chunks of {first.total_chunk_msg_size} bytes"
            )
            raise ChunkError(msg, message_id=where)
        size = len(payload)
        limit = self.max_bytes
        if limit is not None and self.make_room:
            while self.held_bytes + size > limit and next(iter(self._pending)) != uuid:
                oldest, evicted = self._pending.popitem(last=False)
                self.held_bytes -= evicted.size
                self.evicted.append(oldest)
        if limit is not None and self.held_bytes + size > limit:
            first_ledger, first_entry = pending.first
            self.discard(uuid)
            msg = (
                f"chunked message {uuid!r} (first chunk {first_ledger}:{first_entry}, "
                f"{total} bytes) cannot be put together within {self.max_bytes} bytes: "
                f"{self.held_bytes} are held by the {self.pending} messages being put "
                "together; give the read a larger buffer"
            )
            raise ChunkError(msg, message_id=where)
        pending.last_chunk = chunk_id
        pending.parts.append(payload)
        pending.size += size
        self.held_bytes += size
        if pending.size > total:
            self.discard(uuid)
            msg = f"chunks of message {uuid!r} add up to more than its declared {total} bytes"
            raise ChunkError(msg, message_id=where)
        if chunk_id < count - 1:
            return None
        self.discard(uuid)
        if pending.size != total:
            msg = f"chunks of message {uuid!r} add up to {pending.size} bytes, not {total}"
            raise ChunkError(msg, message_id=where)
        return ChunkedMessage(
            pending.metadata, b"".join(pending.parts), pending.first, (ledger, entry)
        )

    def _evict(self) -> None:
        while len(self._pending) > self.max_pending:
            uuid, pending = self._pending.popitem(last=False)
            self.held_bytes -= pending.size
            self.evicted.append(uuid)
