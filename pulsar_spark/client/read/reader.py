"""The partition reader: which messages of one topic (or partition) a bounded read
delivers, into Arrow batches or as ids only.

A reader is a consumer on a **non-durable Exclusive** subscription with a
random name (:mod:`.consumer`): the broker keeps no cursor once it closes,
so nothing is left behind. The end is fixed when the read starts
(GetLastMessageId), so a read is a bounded range, as a Spark task needs.

The broker re-delivers the start entry whole, so the start id is applied
here, item by item (inclusive or exclusive, respecting the batch index), as
are ``ack_set`` bits, ``compacted_out`` items and markers, the same whatever
the messages become (:mod:`.sinks`): RecordBatches when the reader is
iterated, ``(id, publish time)`` pairs from :meth:`PartitionReader.ids`,
with payload sizes from :meth:`PartitionReader.sizes`. Entries delivered again
are dropped by position.

A start by publish time SEEKs the fresh subscription (before any FLOW) and
re-subscribes under the same name if the broker closes the consumer for the
seek, as Apache Pulsar does; the prefix of messages published before that
time is skipped here too, so a broker that ignored the seek costs a scan, not
a wrong answer. :meth:`PartitionReader.message_id_at_time` turns a publish time
into a message id the same way (a SEEK and an id-level scan).

On a lost connection, CLOSE_CONSUMER or TOPIC_MIGRATED the reader looks the
topic up again and re-subscribes from the last entry it processed
(exclusive), with backoff bounded by the operation timeout (:mod:`.retry`):
no message is lost and none is delivered twice. Chunked messages across the
read's end, completed or lost, are handled by :class:`~.chunk_bounds.ChunkBounds`,
entries lost (a ledger removed, a topic deleted and created again) by
:class:`~.gaps.GapWatch`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import TYPE_CHECKING, cast

import pyarrow as pa

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.chunks import is_chunk
from pulsar_spark.protocol.entry import Entry, select
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.framing import Frame
from pulsar_spark.protocol.ids.message_id import LATEST, MessageId, to_signed64
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.protocol.schemas.info import SchemaInfo

from ..errors import BrokerUnsupported, OperationTimeout
from ..names import TopicName
from ..net.lookup import LookupService
from ..net.waiter import quiet_for
from ..retry import may_retry
from .bounds import FROM_EARLIEST, TO_LATEST
from .chunk_bounds import ChunkBounds, ChunkLossReport, skip_incomplete
from .end import end_position
from .gaps import GapWatch, entry_needed
from .session import ReaderSession
from .sinks import ArrowSink, Delivered, IdSink, MessageRef
from .sized_scan import SizedIdSink, SizedRef

if TYPE_CHECKING:
    from pulsar_spark.protocol.crypto.decrypt import Decryptor

__all__ = [
    "PartitionReader",
]

log = logging.getLogger(__name__)
T = pb.BaseCommand


class PartitionReader(ReaderSession):
    """Reads one non-partitioned topic or one partition: RecordBatches when
    iterated, message ids from :meth:`ids` (with payload sizes from :meth:`sizes`);
    closes its consumer when done.

    Args (besides those of :class:`~.session.ReaderSession`: lookup, topic,
    start, receiver_queue_size, operation_timeout, schema):
        end: where the read ends (a :class:`~pulsar_spark.protocol.ids.position.Position`):
            latest (the last message when the read starts), ``after:X`` (X included),
            ``from:X`` (it stops before X), or ``time:`` a publish time, to stop before the first
            message published at or after it (resolved by a seek when the read starts).
        batch_rows, batch_bytes: when to emit a RecordBatch (at most a quarter of
            ``buffer_bytes``).
        buffer_bytes: bytes the read holds at most (in flight, queued, chunked
            messages being put together, rows being built); None: the client's.
        drop_incomplete_chunks, chunk_loss: what becomes of incomplete chunked
            messages (beyond half of ``buffer_bytes``, or never completed): see
            :class:`~.chunk_bounds.ChunkBounds` (its ``drop_incomplete``, ``report``).
        decrypt: decrypts end-to-end encrypted messages (and chunks), or applies
            its crypto failure action; without it they fail the read, named.
        idle_timeout: seconds without data before checking whether the end
            was already passed (it may be a marker the broker never sends).
        missing_start: called with (held, next) when the entries after ``held`` and
            before ``next`` are gone (retention, truncation, ...: :mod:`.gaps`).
            It may raise to fail the read; without it a WARNING names them.
    """

    #: Seconds with nothing moving, while the broker has more, before re-subscribing.
    STALL = 10.0
    #: Seconds the read waits past its end for the missing chunks of a message it
    #: began (the Java consumer's expireTimeOfIncompleteChunkedMessage).
    CHUNK_WAIT = 60.0

    def __init__(
        self,
        lookup: LookupService,
        topic: TopicName,
        *,
        start: Position = FROM_EARLIEST,
        end: Position = TO_LATEST,
        receiver_queue_size: int = 1000,
        batch_rows: int = 10_000,
        batch_bytes: int = 64 << 20,
        idle_timeout: float = 2.0,
        operation_timeout: float = 30.0,
        missing_start: Callable[[MessageId, MessageId], None] | None = None,
        schema: SchemaInfo | None = None,
        buffer_bytes: int | None = None,
        drop_incomplete_chunks: bool = False,
        decrypt: Decryptor | None = None,
        chunk_loss: ChunkLossReport | None = None,
    ) -> None:
        super().__init__(
            lookup,
            topic,
            start=start,
            receiver_queue_size=receiver_queue_size,
            idle_timeout=idle_timeout,
            operation_timeout=operation_timeout,
            schema=schema,
            buffer_bytes=buffer_bytes,
        )
        # An end includes what it names unless it is from:X (the start of what follows).
        self._end = LATEST if end.kind == "time" else end.id_or()
        self._end_inclusive = end.kind != "from"
        self._end_time = end.time_ms
        self._gaps = GapWatch(lookup, topic, self.partition, operation_timeout, missing_start)
        #: The last entry the read must deliver (:func:`~.gaps.entry_needed`).
        self._needed: tuple[int, int] | None = None
        self._batch_rows = batch_rows
        self._batch_bytes = min(batch_bytes, self.buffer_bytes // 4)
        self._chunks = ChunkBounds(
            self, log, max_bytes=self.buffer_bytes // 2, drop_incomplete=drop_incomplete_chunks,
            decrypt=decrypt, report=chunk_loss,
        )  # fmt: skip
        self._sink: ArrowSink | IdSink | None = None
        self.end_of_topic = False
        #: (ledger, entry) of the first message begun in the read (a plain message, or
        #: a chunked message's first chunk) once past a start time; None before. A
        #: chunked message completes after the messages interleaved with its chunks.
        self.first_begun: tuple[int, int] | None = None
        self._idle_since = time.monotonic()
        self._stall_reconnect_at = 0.0

    # -- public ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._read(
                ArrowSink(
                    str(self.topic),
                    self.partition,
                    batch_rows=self._batch_rows,
                    batch_bytes=self._batch_bytes,
                )
            )
        finally:
            self.close()

    def ids(self, limit: int | None = None) -> Generator[MessageRef, None, None]:
        """The id and publish time of each message the read delivers, at most
        ``limit`` of them (all when None), with exactly the selection of the Arrow
        path; no Arrow is built, and payloads that are not batches are not
        decompressed. A chunked message is given by its first chunk's entry, and
        comes (as its Arrow row does) once its last chunk is read: after the
        messages stored between its chunks, whose ids are greater."""
        return self._refs(IdSink(), limit)

    def sizes(self, limit: int | None = None) -> Generator[SizedRef, None, None]:
        """:meth:`ids`, each with the size of the message's payload as the ``value``
        column holds it (:mod:`.sized_scan`); still no Arrow is built."""
        # SizedIdSink flushes SizedRefs: the id path's refs, each with a size.
        return cast(Generator[SizedRef, None, None], self._refs(SizedIdSink(), limit))

    @classmethod
    def message_id_at_time(
        cls,
        lookup: LookupService,
        topic: TopicName,
        publish_time: int,
        *,
        operation_timeout: float = 30.0,
    ) -> MessageId | None:
        """The id of the first message of ``topic`` (one partition) published at or
        after ``publish_time`` (ms), found by a SEEK and an id-level scan; None when
        there is none.

        A chunked message begins at its first chunk (its id is its last chunk's): a
        range that ends at the id given here must not hold its first chunks. The scan
        gives messages as they complete, so a message completed first (a plain one
        between the chunks) may come after one begun earlier: the answer is the entry
        of the first message begun. One never completed is skipped with a WARNING
        (:func:`~.chunk_bounds.skip_incomplete`).
        """
        reader = cls(
            lookup,
            topic,
            start=Position.at_time(publish_time),
            receiver_queue_size=100,
            operation_timeout=operation_timeout,
            chunk_loss=skip_incomplete,
        )
        with contextlib.closing(reader.ids(limit=1)) as refs:
            found = next(refs, None)
        if found is None:
            return None
        begun = reader.first_begun
        found_id = found.message_id
        if begun is not None and begun < (found_id.ledger, found_id.entry):
            return MessageId(begun[0], begun[1], found_id.partition, -1)
        return found_id

    def _refs(self, sink: IdSink, limit: int | None) -> Generator[MessageRef, None, None]:
        """What ``sink`` makes of each message the read delivers, at most ``limit``."""
        count = 0
        try:
            if limit is not None and limit < 1:
                return
            for refs in self._read(sink):
                for ref in refs:
                    yield ref
                    count += 1
                    if count == limit:
                        return
        finally:
            self.close()

    # -- reading ---------------------------------------------------------------------

    def _end_position(self) -> MessageId | None:
        """The end, fixed now; None when there is nothing to read."""
        start, inclusive = self._resume_point()
        found = end_position(
            self._live().last_message_id(), self._end, self._end_inclusive, start, inclusive
        )
        if found is None:
            return None
        end, self._end_inclusive = found
        self._needed = entry_needed(end, self._end_inclusive)
        return end

    def _read(self, sink: ArrowSink | IdSink) -> Iterator[pa.RecordBatch | list[MessageRef]]:
        if self._end_time is not None:  # stop before the first message at or after it
            found = self.message_id_at_time(
                self.lookup, self.topic, self._end_time, operation_timeout=self._timeout
            )
            if found is not None:
                self._end, self._end_inclusive = found, False
            self._end_time = None
        if self._start_time is not None:
            # pulsar-lite drops the connection on a SEEK past the newest message
            # (Apache Pulsar moves to the end): look before seeking.
            newest = self._newest_publish_time()
            if newest is None or newest < self._start_time:
                return
        self._sink = sink
        self._retrying(self._subscribe)
        end = self._retrying(self._end_position)
        if end is None:
            return
        self._idle_since = time.monotonic()
        while True:
            try:
                frame = self._inbox.get(self._idle)
            except PulsarError as exc:
                if not may_retry(exc):
                    raise
                self._reconnect(str(exc))
                continue
            if frame is None:
                self._top_up()
                if self._passed_end(end):
                    break
                continue
            self._idle_since = time.monotonic()
            kind = frame.command.type
            if kind == T.MESSAGE:
                if self._on_message(frame, sink, end):
                    break
                if sink.full:
                    yield sink.flush()
                    self._top_up()
            elif kind == T.REACHED_END_OF_TOPIC:
                self.end_of_topic = True
                self._chunks.give_up("the topic was terminated before its last chunk")
                break
            elif kind in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
                self._reconnect(frame.type_name)
        if sink.pending:
            yield sink.flush()

    def _on_message(self, frame: Frame, sink: ArrowSink | IdSink, end: MessageId) -> bool:
        """Take one MESSAGE frame; True once the end has been reached."""
        message = frame.command.message
        ledger = to_signed64(message.message_id.ledgerId)
        entry_id = to_signed64(message.message_id.entryId)
        metadata = frame.metadata
        assert metadata is not None and frame.payload is not None
        payload: bytes | memoryview = frame.payload
        self._count_permits(
            metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1,
            frame.size,
        )
        if self._processed is None:
            self._resubscribed = False  # the start is checked, not a resume point
            if self._start_time is None:
                self._gaps.first_entry(ledger, entry_id, self._start, self._reached())
        elif self._resubscribed:
            self._resubscribed = False
            self._gaps.first_after_resubscribe(ledger, entry_id, self._processed)
        beyond = (ledger, entry_id) > (end.ledger, end.entry) or (
            not self._end_inclusive
            and end.batch_index < 0
            and (ledger, entry_id) == (end.ledger, end.entry)  # the exclusive end
        )
        if beyond:
            beyond = self._chunks.beyond_end(metadata)
        if beyond:
            self._gaps.past_end(ledger, entry_id, self._reached(), self._needed)
            # In flight when the end was reached, or (while chunked messages begun
            # before the end are completed) a message of a later range: skipped.
            done = self._chunks.past_end_done()
            if not done and (self._processed is None or (ledger, entry_id) > self._processed):
                self._mark_processed(ledger, entry_id)  # the read moves on all the same
            return done
        if self._processed is not None and (ledger, entry_id) <= self._processed:
            return False  # re-delivered after a reconnect
        if self._start_time is not None:
            if metadata.publish_time < self._start_time:
                self._mark_processed(ledger, entry_id)  # before the seek time
                return (ledger, entry_id) >= (end.ledger, end.entry)
            self._start_time = None
        begins = (ledger, entry_id)
        if is_chunk(metadata):
            if metadata.chunk_id == 0 and self._before_start(ledger, entry_id):
                # The message begins before the read's start (after:X with X its first
                # chunk): it belongs to the range before, which completes it.
                self._mark_processed(ledger, entry_id)
                return self._at_end(ledger, entry_id, end)
            if metadata.chunk_id == 0 and self.first_begun is None:
                self.first_begun = begins
            whole = self._chunks.add(ledger, entry_id, metadata, payload)
            if whole is None:
                self._mark_processed(ledger, entry_id)
                return self._at_end(ledger, entry_id, end)
            metadata, payload, begins = whole.metadata, whole.payload, whole.first
        elif self.first_begun is None:
            self.first_begun = begins
        # The broker bounds the compressed size only: a message (batch, or chunks put
        # together) may inflate well past max_message_size; the assembler's bound
        # still guards against a size that lies.
        delivered = Delivered(
            ledger,
            entry_id,
            self.partition,
            metadata,
            payload,
            frame.broker_entry_metadata,
            begins,
            self._chunks.max_message_size,
            self._chunks.decrypt,
        )
        sink.add(delivered, functools.partial(self._pick, ack_set=message.ack_set, end=end))
        self._mark_processed(ledger, entry_id)
        return self._at_end(ledger, entry_id, end)

    def _pick(self, entry: Entry, *, ack_set: Sequence[int], end: MessageId) -> list[int]:
        """Positions of the messages of ``entry`` this read delivers."""
        start, inclusive = self._resume_point()
        positions = select(entry, ack_set=ack_set, start=start, start_inclusive=inclusive)
        if (entry.ledger, entry.entry) == (end.ledger, end.entry) and end.batch_index >= 0:
            indexes = entry.batch_indexes
            limit = end.batch_index if self._end_inclusive else end.batch_index - 1
            positions = [p for p in positions if indexes[p] <= limit]
        return positions

    def _before_start(self, ledger: int, entry_id: int) -> bool:
        """Whether entry (ledger, entry_id) lies before the read's start (an exclusive
        start excludes its own entry, as :func:`~..protocol.entry.select` does for an
        entry that is not a batch)."""
        start, inclusive = self._resume_point()
        key, bound = (ledger, entry_id), (start.ledger, start.entry)
        return key < bound or (key == bound and not inclusive)

    def _buffered(self) -> int:
        sink = self._sink
        held = self._inbox.bytes + self._chunks.held_bytes
        return held if sink is None else held + sink.held_bytes

    def _reached(self) -> tuple[int, int]:
        """(ledger, entry) of the last entry the read holds: processed, or before its start."""
        start = self._start
        if self._processed is not None or start.is_earliest or self._start_time is not None:
            return self._processed or (-1, -1)
        if self._start_inclusive or start.batch_index >= 0:
            return (start.ledger, start.entry - 1)
        return (start.ledger, start.entry)

    def _at_end(self, ledger: int, entry_id: int, end: MessageId) -> bool:
        """Whether the read is over after the entry at (ledger, entry_id): at or past
        the end, with no chunked message begun in the range still to complete."""
        return (ledger, entry_id) >= (end.ledger, end.entry) and not self._chunks.pending

    def _passed_end(self, end: MessageId) -> bool:
        """After a quiet spell: is there nothing more to come before ``end``?

        When the broker has more but nothing arrives
        (:func:`~pulsar_spark.client.net.waiter.quiet_for`; our
        writes, these checks' among them, do not count) for :attr:`STALL` s, the consumer
        is re-created: a subscription that raced with a topic unload can stay attached
        to the closed topic, answering requests but never dispatching (Apache Pulsar 4.0).
        """
        try:
            last = self._live().last_message_id()
        except PulsarError as exc:
            if not may_retry(exc):
                raise
            self._reconnect(str(exc))
            return False
        seen = self._processed or (-1, -1)
        quiet = quiet_for(self._idle_since, self._live().conn.arriving_at, self._timeout)
        reached = self._reached()
        if self._gaps.topic_short(last, reached, self._needed):
            return True  # what was left to read is gone (reported)
        if self._gaps.behind(last, reached, self._needed):
            # The topic still holds what the read needs: the answer came from a consumer
            # left on a topic instance an unload closed. Subscribe again.
            self._reconnect(
                f"the broker answered {last} as the last message id, but the topic still "
                "holds the entries the read needs"
            )
            return False
        if last is None or (last.ledger, last.entry) <= seen:
            # The end (say, a marker) will never be dispatched; but chunks may still
            # come for a message begun in the range.
            return self._chunks.nothing_to_wait_for()
        caps = self._live().conn.capabilities
        limit = min(self.STALL, self._timeout)
        if caps.last_id_may_be_marker and quiet > limit:
            # On this release the last id may be a marker that is never sent; nothing in
            # the protocol tells that from a stalled topic, so say both.
            msg = (
                f"reading {self.topic} up to its last message: the broker "
                f"({caps.server_version}) answers {last} as the last message id, but "
                f"dispatched nothing after {seen} for {quiet:.0f} s. "
                "Apache Pulsar releases before 3.0.5, 3.2.3 and 3.3 may answer the "
                "position of a marker (a transaction's commit or abort, a replicated "
                "subscription's snapshot) that is never delivered, so the read cannot "
                "see its end. Upgrade the broker, or end the read at a message id "
                "that was delivered (Spark: endingOffsets)."
            )
            raise BrokerUnsupported(msg)
        if quiet > self._timeout:
            msg = (
                f"reader on {self.topic} received nothing for {self._timeout:g} s while "
                f"waiting for messages up to {end} (last processed {seen})"
            )
            raise OperationTimeout(msg)
        if quiet > self.STALL and time.monotonic() - self._stall_reconnect_at > self.STALL:
            self._stall_reconnect_at = time.monotonic()
            self._reconnect(
                f"nothing dispatched for {quiet:.0f} s although the broker has "
                f"messages up to {last}"
            )
        return False
