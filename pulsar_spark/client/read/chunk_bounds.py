"""Chunked messages at the edges of a bounded read: put together, waited for past the
end, or given up on loudly.

A chunked message belongs to the range that holds its first chunk: when the
read's end falls between its chunks, the read goes on past the end for its
remaining chunks (and only those), up to the reader's ``CHUNK_WAIT`` seconds
after the last chunk came, and the next range, which starts after its first
chunks, drops the rest as begun before it.

A message begun in the range that is still incomplete when the read is over
(no further chunk came for ``CHUNK_WAIT`` s: the producer stopped mid-message,
or its remaining chunks were removed; or the topic was terminated before its
last chunk) is data lost from the read, given as an :class:`IncompleteChunked`
(topic, uuid, first chunk's id, cause):

* when the user chose dropping (``drop_incomplete``, the Java consumer's
  ``autoAckOldestChunkedMessageOnQueueFull``), it is dropped with a WARNING;
* else, to the read's ``report`` (:data:`ChunkLossReport`, as the reader's
  ``missing_start`` gets lost entries, :mod:`.gaps`), which may raise to
  fail the read (Spark: ``DataLossError`` with ``failOnDataLoss``) or return
  to skip it (then it says so itself; :func:`skip_incomplete` logs a WARNING);
* else the read fails with :class:`~..protocol.errors.ChunkError` naming it:
  a read given no report never drops a message quietly.

Id scans that plan reads (the stream's admission control, time lookups) skip
such a message with a WARNING (:func:`skip_incomplete`): the read that delivers
the range reports it.

An incomplete message is bounded by count, by bytes and by age
(:class:`~.chunk_limits.ChunkLimits`, from the client's configuration): beyond any
bound the read fails naming the message and its first chunk, or, when the user
chose dropping, drops the oldest with a WARNING naming them. The age is measured
from the first chunk's arrival and checked as each chunk comes (only chunks add to
what is held): a message no later chunk completes within the expiry is not kept.

Chunks of an end-to-end encrypted message are each encrypted on their own:
they are decrypted one by one before they are put together
(:func:`~..protocol.encryption.open_chunk`), and one its crypto failure action
discards counts as a chunk taken.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.chunks import ChunkAssembler, ChunkedMessage, is_chunk
from pulsar_spark.protocol.crypto.decrypt import open_chunk
from pulsar_spark.protocol.errors import ChunkError
from pulsar_spark.protocol.ids.message_id import MessageId

from ..names import TopicName
from .chunk_limits import ChunkLimits

if TYPE_CHECKING:
    from pulsar_spark.protocol.crypto.decrypt import Decryptor

__all__ = ["ChunkBounds", "ChunkLossReport", "IncompleteChunked", "skip_incomplete"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IncompleteChunked:
    """A chunked message begun in a read's range that the read gives up on: lost data."""

    #: The topic (partition) read.
    topic: str
    #: The message's uuid (its producer's name and sequence id).
    uuid: str
    #: The id of its first chunk's entry (batch index -1).
    first_chunk: MessageId
    #: Why it will not be completed ("no further chunk came for 60 s", ...).
    cause: str

    def __str__(self) -> str:
        return (
            f"{self.topic}: chunked message {self.uuid!r} (first chunk {self.first_chunk}) "
            f"is incomplete: {self.cause}"
        )


#: Called with each chunked message the read gives up on (see the module docstring):
#: it may raise to fail the read; when it returns, the message is skipped.
ChunkLossReport = Callable[[IncompleteChunked], None]


def skip_incomplete(lost: IncompleteChunked) -> None:
    """A :data:`ChunkLossReport` that skips the message with a WARNING naming it."""
    _log.warning("%s; skipped, the read goes on without it", lost)


class _Reader(Protocol):
    topic: TopicName
    partition: int
    CHUNK_WAIT: float


class ChunkBounds:
    """The chunked messages a reader is putting together.

    Args:
        reader: for its topic, its partition, its ``CHUNK_WAIT`` (read at each
            use, so that a test may change it on the class) and its client's
            ``chunk_limits`` (``reader.lookup.config``; the defaults without one).
        log: where warnings about dropped messages go.
        report: told of each message begun in the range that stays incomplete
            (see the module docstring); None: the read fails naming it.
        max_bytes: most bytes the messages being put together may hold (a part
            of the read's budget); beyond it the read fails, naming the message.
        drop_incomplete: beyond the bounds (count, bytes, age), drop the oldest
            incomplete messages with a WARNING naming each, as the Java consumer
            does (``autoAckOldestChunkedMessageOnQueueFull``), instead of failing;
            also when the limits say so.
        decrypt: decrypts encrypted chunks (or applies the crypto failure action).
        limits: instead of the client's.
        clock: seconds, for the age of incomplete messages.
    """

    def __init__(
        self,
        reader: _Reader,
        log: logging.Logger,
        *,
        max_bytes: int | None = None,
        drop_incomplete: bool = False,
        decrypt: Decryptor | None = None,
        limits: ChunkLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
        report: ChunkLossReport | None = None,
    ) -> None:
        if limits is None:
            config = getattr(getattr(reader, "lookup", None), "config", None)
            limits = getattr(config, "chunk_limits", None) or ChunkLimits()
        self.limits = limits
        self._reader = reader
        self.decrypt = decrypt
        self._log = log
        self._report = report
        self._drop = drop_incomplete or limits.drop_incomplete
        self._assembler = ChunkAssembler(
            max_pending=limits.max_pending, max_bytes=max_bytes, make_room=self._drop
        )
        self._clock = clock
        #: When the last chunk came (how long a chunked message has been waited for).
        self._chunk_at = 0.0
        #: uuid -> when its first chunk came, oldest first (entries of messages no
        #: longer being put together go when met at the head, or when they end).
        self._began: dict[str, float] = {}

    @property
    def pending(self) -> int:
        """Messages begun and not complete yet."""
        return self._assembler.pending

    @property
    def held_bytes(self) -> int:
        """Bytes held by the messages being put together."""
        return self._assembler.held_bytes

    @property
    def max_message_size(self) -> int:
        return self._assembler.max_message_size

    def add(
        self, ledger: int, entry_id: int, metadata: pb.MessageMetadata, payload: bytes | memoryview
    ) -> ChunkedMessage | None:
        """Take one chunk; the whole message once this was its last chunk.

        Raises:
            ChunkError: inconsistent chunks, or too many messages interleaved.
        """
        now = self._chunk_at = self._clock()
        chunks = self._assembler
        reader = self._reader
        where = f"{ledger}:{entry_id}:{reader.partition}:-1"
        opened = open_chunk(self.decrypt, metadata, payload, message_id=where)
        if opened is None:  # discarded (crypto failure action): logged and counted there
            return None
        whole = chunks.add(ledger, entry_id, *opened, partition=reader.partition)
        began = self._began
        if whole is not None:
            began.pop(metadata.uuid, None)
        elif metadata.chunk_id == 0 and self.limits.expiry and metadata.uuid in chunks:
            began.pop(metadata.uuid, None)  # begun (again): the youngest
            began[metadata.uuid] = now
        if chunks.evicted and self._drop:
            for name in chunks.evicted:
                began.pop(name, None)
                self._log.warning(
                    "%s: dropping incomplete chunked message %r to stay within %d messages "
                    "(maxPendingChunkedMessage) and %s bytes being put together",
                    *(reader.topic, name, chunks.max_pending, chunks.max_bytes),
                )
            chunks.evicted.clear()
        if chunks.evicted:
            msg = (
                f"{reader.topic}: more than {chunks.max_pending} chunked messages "
                f"interleaved (maxPendingChunkedMessage); message {chunks.evicted[0]!r} "
                "would be lost"
            )
            raise ChunkError(msg, message_id=where)
        if began:
            self._expire(now)
        return whole

    def _expire(self, now: float) -> None:
        """Fail on (or drop, with a WARNING) the messages begun more than the expiry ago.

        Raises:
            ChunkError: naming the oldest such message and its first chunk, unless
                dropping was chosen.
        """
        began, chunks, expiry = self._began, self._assembler, self.limits.expiry
        while began:
            uuid, at = next(iter(began.items()))
            if uuid not in chunks:
                del began[uuid]  # completed, evicted or given up since
                continue
            age = now - at
            if age <= expiry:
                return
            del began[uuid]
            ledger, entry_id = dict(chunks.incomplete())[uuid]
            reader = self._reader
            first = f"{ledger}:{entry_id}:{reader.partition}:-1"
            if not self._drop:
                msg = (
                    f"{reader.topic}: chunked message {uuid!r} (first chunk {first}) is "
                    f"still incomplete {age:.1f} s after its first chunk came, beyond the "
                    f"expiry of incomplete chunked messages ({expiry:g} s, "
                    "expireTimeOfIncompleteChunkedMessageMillis); give a longer expiry "
                    "(0: none), or autoAckOldestChunkedMessageOnQueueFull=true to drop "
                    "such messages with a warning"
                )
                raise ChunkError(msg, message_id=first)
            chunks.discard(uuid)
            self._log.warning(
                "%s: dropping incomplete chunked message %r (first chunk %s): no chunk "
                "completed it within %g s (expireTimeOfIncompleteChunkedMessageMillis)",
                *(reader.topic, uuid, first, expiry),
            )

    def beyond_end(self, metadata: pb.MessageMetadata) -> bool:
        """For an entry past the read's end: False when it is a missing chunk of a
        message begun in the range (it is read all the same), True otherwise."""
        chunks = self._assembler
        if not (is_chunk(metadata) and metadata.uuid in chunks):
            return True
        if metadata.chunk_id == 0:
            # The producer began that message again past the end: the next range
            # reads it whole from there; the copy begun here is never completed.
            chunks.discard(metadata.uuid)
            self._began.pop(metadata.uuid, None)
            return True
        return False

    def past_end_done(self) -> bool:
        """An entry past the end came: whether the read is over (see :meth:`_over`)."""
        return self._over()

    def nothing_to_wait_for(self) -> bool:
        """The broker has nothing more: whether the read is over (see :meth:`_over`)."""
        return self._over()

    def _over(self) -> bool:
        """True when no message begun in the range waits for chunks, or when the wait
        for them is over (they are given up on, see :meth:`give_up`): chunks still to
        come are waited for as long as a Pulsar consumer keeps an incomplete chunked
        message."""
        if not self._assembler.pending:
            return True
        wait = self._reader.CHUNK_WAIT
        quiet = self._clock() - self._chunk_at
        if quiet <= wait:
            return False
        self.give_up(
            f"no further chunk came for {quiet:.1f} s (say, the producer stopped "
            "mid-message, or the remaining chunks were removed)"
        )
        return True

    def give_up(self, why: str) -> None:
        """Give up on the chunked messages begun in the read, which will not be
        completed: each is dropped with a WARNING when dropping was chosen, else
        given to the read's report, else the read fails naming it.

        Raises:
            ChunkError: naming the first such message, when the read has no report.
        """
        reader = self._reader
        incomplete = self._assembler.incomplete()
        self._assembler.clear()
        self._began.clear()
        for uuid, (ledger, entry_id) in incomplete:
            first = MessageId(ledger, entry_id, reader.partition, -1)
            lost = IncompleteChunked(str(reader.topic), uuid, first, why)
            if self._drop:
                self._log.warning(
                    "%s: dropping chunked message %r (first chunk %s): %s",
                    *(reader.topic, uuid, first, why),
                )
            elif self._report is not None:
                self._report(lost)
            else:
                msg = (
                    f"{lost}. The read was given no chunk loss report to skip it "
                    "(chunk_loss), nor chose to drop incomplete chunked messages "
                    "(ChunkLimits(drop_incomplete=True))"
                )
                raise ChunkError(msg, message_id=str(first))
