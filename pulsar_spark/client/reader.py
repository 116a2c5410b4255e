"""Reading one topic (or one partition) between two bounds, into Arrow.

A reader is a consumer on a **non-durable Exclusive** subscription with a
random name: the broker keeps no cursor once it closes, so nothing is left
behind. The end is fixed when the read starts (GetLastMessageId), so a read
is a bounded range, as a Spark task needs.

The broker re-delivers the start entry whole, so the start id is applied
here, item by item (inclusive or exclusive, respecting the batch index), as
are ``ack_set`` bits, ``compacted_out`` items and markers. Flow permits are
counted per received message and granted again at half the queue, which
returns the permits of filtered items too; the queue grows to hold a few
batches when one batch would nearly fill it. Each FLOW goes with a cumulative
ACK of the last entry processed (as the Java reader acknowledges): nothing is
kept for a non-durable subscription, but pulsar-lite re-dispatches what stays
unacknowledged. Entries delivered again are dropped by position.

A start by publish time SEEKs the fresh subscription (before any FLOW) and
re-subscribes under the same name if the broker closes the consumer for the
seek, as Apache Pulsar does; the prefix of messages published before that
time is skipped here too, so a broker that ignored the seek costs a scan, not
a wrong answer.

On a lost connection, CLOSE_CONSUMER or TOPIC_MIGRATED the reader looks the
topic up again and re-subscribes from the last entry it processed
(exclusive), with backoff bounded by the operation timeout: no message is
lost and none is delivered twice.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import TypeVar

import pyarrow as pa

from ..columnar import ArrowBatchBuilder
from ..protocol import PulsarApi_pb2 as pb
from ..protocol.chunks import ChunkAssembler, is_chunk
from ..protocol.entry import open_entry, select
from ..protocol.errors import ChunkError, PulsarError, ServerError
from ..protocol.framing import Frame, encode_command
from ..protocol.message_id import EARLIEST, LATEST, MessageId, to_signed64
from .connection import Connection
from .errors import ConnectionClosed, OperationTimeout
from .lookup import LookupService
from .names import TopicName
from .retry import Backoff, may_retry

__all__ = [
    "PartitionReader",
    "first_entry",
    "get_last_message_id",
    "last_message_id",
    "message_id_at_time",
    "newest_publish_time",
]

log = logging.getLogger(__name__)
T = pb.BaseCommand
R = TypeVar("R")
_U64 = 0xFFFF_FFFF_FFFF_FFFF


class _Inbox:
    """Frames the connection routes to one consumer, queued for the reading thread."""

    def __init__(self) -> None:
        self._frames: deque[Frame] = deque()
        self._ready = threading.Condition()
        self.error: PulsarError | None = None

    def frame_received(self, frame: Frame) -> None:
        with self._ready:
            self._frames.append(frame)
            self._ready.notify()

    def connection_closed(self, error: PulsarError) -> None:
        with self._ready:
            self.error = error
            self._ready.notify()

    def get(self, timeout: float) -> Frame | None:
        """The next frame; None after ``timeout``; the connection's error once drained."""
        with self._ready:
            if not self._frames and self.error is None:
                self._ready.wait(timeout)
            if self._frames:
                return self._frames.popleft()
            if self.error is not None:
                raise self.error
            return None


class _Reconnect(Exception):
    """The consumer must be re-created (CLOSE_CONSUMER, TOPIC_MIGRATED, lost connection)."""


def _is_no_messages(exc: ServerError) -> bool:
    # pulsar-lite answers GetLastMessageId on an empty topic with this error,
    # where Apache Pulsar returns entryId -1.
    return "has no messages" in exc.broker_message


def _beyond(end: MessageId, last: MessageId) -> bool:
    """Whether ``end`` lies after the topic's ``last`` message. A last id without
    a batch index (pulsar-lite's) stands for its whole entry."""
    end_key, last_key = (end.ledger, end.entry), (last.ledger, last.entry)
    if end_key != last_key or last.batch_index < 0:
        return end_key > last_key
    return end.batch_index > last.batch_index


def get_last_message_id(conn: Connection, consumer_id: int, topic: TopicName) -> MessageId | None:
    """The id of the last message of the topic a consumer is on; None when it is empty."""
    request = pb.CommandGetLastMessageId(consumer_id=consumer_id, request_id=conn.new_id("request"))
    try:
        frame = conn.request(T(type=T.GET_LAST_MESSAGE_ID, getLastMessageId=request))
    except ServerError as exc:
        if _is_no_messages(exc):
            return None
        raise
    last = frame.command.getLastMessageIdResponse.last_message_id
    message_id = MessageId.from_pb(last, partition=max(topic.partition, -1))
    if message_id.entry < 0:
        return None
    return message_id


class PartitionReader:
    """Reads one non-partitioned topic or one partition as RecordBatches.

    Args:
        lookup: discovery and connections.
        topic: the topic (a partition name for a partitioned topic).
        start: first position: EARLIEST, LATEST or a message id.
        start_inclusive: whether the message at ``start`` is read.
        start_time: a publish time in ms; when given, the read starts at the
            first message published at or after it (a seek) and ``start`` is
            ignored.
        end: last position to read (LATEST = the last message when the read
            starts).
        end_inclusive: whether the message at ``end`` is read.
        receiver_queue_size: flow permits (messages) outstanding. When batches
            are so large that few fit, the reader raises its window to hold
            :attr:`BATCHES_IN_FLIGHT` of them (up to :attr:`MAX_WINDOW`
            messages), so that the broker never waits for a FLOW between two
            entries.
        batch_rows, batch_bytes: when to emit a RecordBatch.
        idle_timeout: seconds without data before checking whether the end
            was already passed (it may be a marker the broker never sends).
        operation_timeout: how long a reconnect or a stall may last.
        missing_start: called with (start, first entry) when the start is a
            message id whose entry is gone (retention, truncation, deletion):
            the broker began at a later entry. It may raise to fail the read.
    """

    #: Seconds without a message, while the broker has more, before re-subscribing.
    STALL = 10.0
    #: Seconds the read waits past its end for the missing chunks of a message it
    #: began (the Java consumer's expireTimeOfIncompleteChunkedMessage).
    CHUNK_WAIT = 60.0
    #: Entries the flow window holds at least (see ``receiver_queue_size``).
    BATCHES_IN_FLIGHT = 4
    #: Most messages the window grows to for large batches.
    MAX_WINDOW = 50_000

    def __init__(
        self,
        lookup: LookupService,
        topic: TopicName,
        *,
        start: MessageId = EARLIEST,
        start_inclusive: bool = True,
        start_time: int | None = None,
        end: MessageId = LATEST,
        end_inclusive: bool = True,
        receiver_queue_size: int = 1000,
        batch_rows: int = 10_000,
        batch_bytes: int = 64 << 20,
        idle_timeout: float = 2.0,
        operation_timeout: float = 30.0,
        missing_start: Callable[[MessageId, MessageId], None] | None = None,
    ) -> None:
        if receiver_queue_size < 1:
            msg = f"receiver_queue_size must be at least 1, not {receiver_queue_size}"
            raise ValueError(msg)
        self.lookup = lookup
        self.topic = topic
        self.partition = topic.partition
        self._start = EARLIEST if start_time is not None else start
        self._start_inclusive = start_inclusive or start_time is not None
        #: The publish time to seek to; None once a message at or after it came.
        self._start_time = start_time
        self._end = end
        self._end_inclusive = end_inclusive
        self._queue = receiver_queue_size
        self._missing_start = missing_start
        #: (ledger, entry) of the first entry that begins a message read (a chunked
        #: message begins at its first chunk, though its id is its last chunk's).
        self.first_start: tuple[int, int] | None = None
        self._batch_rows = batch_rows
        self._batch_bytes = batch_bytes
        self._idle = idle_timeout
        self._timeout = operation_timeout
        self._conn: Connection | None = None
        self._consumer_id = -1
        self._inbox = _Inbox()
        self._permits_used = 0
        self._chunks = ChunkAssembler()
        #: When the last chunk came (how long a chunked message has been waited for).
        self._chunk_at = 0.0
        #: (ledger, entry) of the last entry processed: where a reconnect resumes.
        self._processed: tuple[int, int] | None = None
        #: The last (ledger, entry) acknowledged.
        self._acked: tuple[int, int] | None = None
        self.reconnects = 0
        self.end_of_topic = False
        self._backoff = Backoff()
        self._progress_at = time.monotonic()
        self._idle_since = time.monotonic()
        self._stall_reconnect_at = 0.0

    # -- subscription ----------------------------------------------------------------

    def _resume_point(self) -> tuple[MessageId, bool]:
        if self._processed is None:
            return self._start, self._start_inclusive
        ledger, entry = self._processed
        return MessageId(ledger, entry, self.partition, -1), False

    def _subscribe(self) -> None:
        # A fresh name on every (re)subscribe: the subscription is non-durable
        # anyway, and pulsar-lite serves a reused name from its first start id.
        name = f"reader-{uuid.uuid4().hex[:10]}"
        seek_time = self._start_time if self._processed is None else None
        self._open_consumer(name)
        if seek_time is not None:
            self._seek_time(name, seek_time)
        self._permits_used = 0
        self._flow(self._queue)

    def _seek_time(self, name: str, publish_time: int) -> None:
        """SEEK the new consumer to ``publish_time``; re-attach if the broker closes it."""
        assert self._conn is not None
        conn = self._conn
        seek = pb.CommandSeek(
            consumer_id=self._consumer_id, request_id=conn.new_id("request"),
            message_publish_time=publish_time,
        )
        conn.request(T(type=T.SEEK, seek=seek))
        # Apache Pulsar resets the cursor and closes the consumer (CLOSE_CONSUMER
        # before SUCCESS); the non-durable subscription stays, with its new
        # position, for a consumer that subscribes under the same name.
        closed = False
        while (frame := self._inbox.get(0)) is not None:
            if frame.command.type in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
                closed = True
        if closed:
            conn.remove_handler("consumer", self._consumer_id)
            self._conn = None
            self._open_consumer(name)

    def _open_consumer_at_latest(self) -> None:
        """A consumer that receives nothing (no FLOW): for GetLastMessageId."""
        self._open_consumer(f"reader-{uuid.uuid4().hex[:10]}")

    def _open_consumer(self, name: str) -> None:
        start, _ = self._resume_point()
        conn = self.lookup.connection_for(self.topic)
        consumer_id = conn.new_id("consumer")
        inbox = _Inbox()
        # Register before SUBSCRIBE: messages may follow its SUCCESS at once.
        conn.add_handler("consumer", consumer_id, inbox)
        subscribe = pb.CommandSubscribe(
            topic=str(self.topic),
            subscription=name,
            subType=pb.CommandSubscribe.Exclusive,
            consumer_id=consumer_id,
            request_id=conn.new_id("request"),
            durable=False,
            start_message_id=start.to_pb(with_batch_index=False),
            initialPosition=(
                pb.CommandSubscribe.Earliest if start.is_earliest else pb.CommandSubscribe.Latest
            ),
        )
        try:
            conn.request(T(type=T.SUBSCRIBE, subscribe=subscribe))
        except BaseException:
            conn.remove_handler("consumer", consumer_id)
            raise
        self._conn, self._consumer_id, self._inbox = conn, consumer_id, inbox

    def _flow(self, permits: int) -> None:
        assert self._conn is not None
        flow = pb.CommandFlow(consumer_id=self._consumer_id, messagePermits=permits)
        self._conn.send(encode_command(T(type=T.FLOW, flow=flow)))

    def _reconnect(self, reason: str) -> None:
        """Re-create the consumer from the resume point, with backoff."""
        self._drop_consumer()
        # The deadline runs from the last progress, so a connection that keeps
        # failing before any message arrives cannot loop for ever.
        deadline = self._progress_at + self._timeout
        while True:
            delay = self._backoff.next()
            if time.monotonic() + delay > deadline:
                msg = (
                    f"reader on {self.topic} made no progress for {self._timeout:g} s of "
                    f"reconnects; last failure: {reason}"
                )
                raise OperationTimeout(msg)
            self.reconnects += 1
            log.info("reader on %s reconnecting in %.2f s (%s)", self.topic, delay, reason)
            time.sleep(delay)
            try:
                self._subscribe()
                return
            except PulsarError as exc:
                if not may_retry(exc):
                    raise
                reason = str(exc)

    def _drop_consumer(self) -> None:
        conn, consumer_id = self._conn, self._consumer_id
        self._conn = None
        if conn is None:
            return
        conn.remove_handler("consumer", consumer_id)
        if not conn.closed:
            close = pb.CommandCloseConsumer(
                consumer_id=consumer_id, request_id=conn.new_id("request")
            )
            try:
                conn.request(T(type=T.CLOSE_CONSUMER, close_consumer=close), timeout=5)
            except PulsarError as exc:
                log.debug("closing consumer on %s: %s", self.topic, exc)

    def close(self) -> None:
        """Close the consumer (the non-durable subscription goes with it)."""
        self._drop_consumer()

    # -- reading ---------------------------------------------------------------------

    def _end_position(self) -> MessageId | None:
        """The end, fixed now (see :attr:`_end_inclusive`); None when there is
        nothing to read."""
        assert self._conn is not None
        last = get_last_message_id(self._conn, self._consumer_id, self.topic)
        if last is None:
            return None
        if self._end.is_latest or _beyond(self._end, last):
            end, self._end_inclusive = last, True
        else:
            end = self._end
        start, inclusive = self._resume_point()
        end_key, start_key = (end.ledger, end.entry), (start.ledger, start.entry)
        if not start.is_earliest and (start.is_latest or end_key < start_key):
            return None
        if not inclusive and start.batch_index < 0 and end_key == start_key:
            return None
        if (not self._end_inclusive and end.batch_index < 0 and not start.is_earliest
                and end_key <= start_key):
            return None  # the read ends before the entry it starts at
        return end

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._read()
        finally:
            self.close()

    def _retrying(self, action: Callable[[], R]) -> R:
        """Run ``action``; on a retriable error reconnect and run it again."""
        while True:
            try:
                return action()
            except PulsarError as exc:  # noqa: PERF203 - a retry loop
                if not may_retry(exc):
                    raise
                self._reconnect(str(exc))

    def _peek(self) -> tuple[MessageId, pb.MessageMetadata] | None:
        """The first entry at or after the start, undecoded (see :func:`first_entry`)."""
        if self._conn is None:  # else a reconnect subscribed again already
            self._subscribe()
        assert self._conn is not None
        last = get_last_message_id(self._conn, self._consumer_id, self.topic)
        start = self._start
        if last is None or (not start.is_earliest and (last.ledger, last.entry) < (
                start.ledger, start.entry)):
            return None
        deadline = time.monotonic() + self._timeout
        while (left := deadline - time.monotonic()) > 0:
            frame = self._inbox.get(min(left, self._idle))
            if frame is None:
                continue
            kind = frame.command.type
            if kind == T.MESSAGE:
                found = frame.command.message.message_id
                ledger, entry_id = to_signed64(found.ledgerId), to_signed64(found.entryId)
                assert frame.metadata is not None
                return MessageId(ledger, entry_id, self.partition, -1), frame.metadata
            if kind == T.REACHED_END_OF_TOPIC:
                return None
            if kind in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
                msg = f"{frame.type_name} while probing {self.topic}"
                raise ConnectionClosed(msg)
        msg = f"no entry of {self.topic} at or after {start} came within {self._timeout:g} s"
        raise OperationTimeout(msg)

    def _read(self) -> Iterator[pa.RecordBatch]:
        if self._start_time is not None:
            # pulsar-lite drops the connection on a SEEK past the newest message
            # (Apache Pulsar moves to the end): look before seeking.
            newest = newest_publish_time(self.lookup, self.topic, operation_timeout=self._timeout)
            if newest is None or newest < self._start_time:
                return
        self._retrying(self._subscribe)
        end = self._retrying(self._end_position)
        if end is None:
            return
        builder = ArrowBatchBuilder(str(self.topic), self.partition)
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
                if self._passed_end(end):
                    break
                continue
            self._idle_since = time.monotonic()
            kind = frame.command.type
            if kind == T.MESSAGE:
                if self._on_message(frame, builder, end):
                    break
                if builder.rows >= self._batch_rows or builder.value_bytes >= self._batch_bytes:
                    yield builder.build()
            elif kind == T.REACHED_END_OF_TOPIC:
                self.end_of_topic = True
                self._drop_incomplete("the topic was terminated before its last chunk")
                break
            elif kind in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
                self._reconnect(frame.type_name)
        if builder.rows:
            yield builder.build()

    def _on_message(self, frame: Frame, builder: ArrowBatchBuilder, end: MessageId) -> bool:
        """Take one MESSAGE frame; True once the end has been reached."""
        message = frame.command.message
        ledger = to_signed64(message.message_id.ledgerId)
        entry_id = to_signed64(message.message_id.entryId)
        metadata, payload = frame.metadata, frame.payload
        assert metadata is not None and payload is not None
        self._count_permits(metadata.num_messages_in_batch if metadata.HasField(
            "num_messages_in_batch") else 1)
        if self._processed is None and self._missing_start is not None:
            self._check_first_entry(ledger, entry_id)
        beyond = (ledger, entry_id) > (end.ledger, end.entry) or (
            not self._end_inclusive and end.batch_index < 0
            and (ledger, entry_id) == (end.ledger, end.entry)  # the exclusive end
        )
        if beyond and is_chunk(metadata) and metadata.uuid in self._chunks:
            if metadata.chunk_id == 0:
                # The producer began that message again past the end: the next range
                # reads it whole from there; the copy begun here is never completed.
                self._chunks.discard(metadata.uuid)
            else:
                beyond = False  # a missing chunk of a message begun in the range
        if beyond:
            # In flight when the end was reached, or (while chunked messages begun
            # before the end are completed) a message of a later range: skipped.
            if not self._chunks.pending:
                return True
            if time.monotonic() - self._chunk_at > self.CHUNK_WAIT:
                self._drop_incomplete(f"no further chunk came for {self.CHUNK_WAIT:.0f} s")
                return True
            if self._processed is None or (ledger, entry_id) > self._processed:
                self._mark_processed(ledger, entry_id)  # the read moves on all the same
            return False
        if self._processed is not None and (ledger, entry_id) <= self._processed:
            return False  # re-delivered after a reconnect
        if self._start_time is not None:
            if metadata.publish_time < self._start_time:
                self._mark_processed(ledger, entry_id)  # before the seek time
                return (ledger, entry_id) >= (end.ledger, end.entry)
            self._start_time = None
        if self.first_start is None and (not is_chunk(metadata) or metadata.chunk_id == 0):
            self.first_start = (ledger, entry_id)
        if is_chunk(metadata):
            self._chunk_at = time.monotonic()
            whole = self._chunks.add(ledger, entry_id, metadata, payload, partition=self.partition)
            if self._chunks.evicted:
                msg = (
                    f"{self.topic}: more than {self._chunks.max_pending} chunked messages "
                    f"interleaved; message {self._chunks.evicted[0]!r} would be lost"
                )
                raise ChunkError(msg, message_id=f"{ledger}:{entry_id}:{self.partition}:-1")
            if whole is None:
                self._mark_processed(ledger, entry_id)
                return self._at_end(ledger, entry_id, end)
            metadata, payload = whole.metadata, whole.payload
        # The broker bounds the compressed size only: a message (batch, or chunks put
        # together) may inflate well past max_message_size; the assembler's bound
        # still guards against a size that lies.
        entry = open_entry(
            ledger, entry_id, self.partition, metadata, payload,
            broker_entry_metadata=frame.broker_entry_metadata,
            limit=self._chunks.max_message_size,
            split=False,  # the builder locates the items of many entries at once
        )
        start, inclusive = self._resume_point()
        positions = select(entry, ack_set=message.ack_set, start=start, start_inclusive=inclusive)
        if (ledger, entry_id) == (end.ledger, end.entry) and end.batch_index >= 0:
            indexes = entry.batch_indexes
            limit = end.batch_index if self._end_inclusive else end.batch_index - 1
            positions = [p for p in positions if indexes[p] <= limit]
        builder.add(entry, positions)
        self._mark_processed(ledger, entry_id)
        return self._at_end(ledger, entry_id, end)

    def _check_first_entry(self, ledger: int, entry_id: int) -> None:
        """Report a start entry that is gone: the broker began in a later ledger.

        Brokers remove whole ledgers (retention, truncation, deletion), so a first
        entry further on in the start's own ledger means the entries between were
        not dispatched (markers), not lost.
        """
        start = self._start
        if start.is_earliest or start.is_latest or self._start_time is not None:
            return
        if ledger > start.ledger:
            assert self._missing_start is not None
            self._missing_start(start, MessageId(ledger, entry_id, self.partition, -1))

    def _at_end(self, ledger: int, entry_id: int, end: MessageId) -> bool:
        """Whether the read is over after the entry at (ledger, entry_id).

        A chunked message belongs to the range that holds its first chunk: when
        the end falls between its chunks, the read goes on past the end for its
        remaining chunks (and only those), and the next range, which starts
        after its first chunks, drops the rest as begun before it.
        """
        return (ledger, entry_id) >= (end.ledger, end.entry) and not self._chunks.pending

    def _drop_incomplete(self, why: str) -> None:
        """Give up on chunked messages that will not be completed, loudly."""
        for name, (ledger, entry_id) in self._chunks.incomplete():
            log.warning(
                "%s: dropping chunked message %r (first chunk %d:%d): %s", self.topic, name,
                ledger, entry_id, why,
            )
        self._chunks.clear()

    def _mark_processed(self, ledger: int, entry_id: int) -> None:
        self._processed = (ledger, entry_id)
        self._progress_at = time.monotonic()
        self._backoff.reset()

    def _count_permits(self, used: int) -> None:
        self._permits_used += used
        want = min(self.BATCHES_IN_FLIGHT * used, self.MAX_WINDOW)
        if want > self._queue:  # grant the difference with the next FLOW
            self._permits_used += want - self._queue
            self._queue = want
        if self._permits_used >= max(self._queue // 2, 1):
            permits, self._permits_used = self._permits_used, 0
            with contextlib.suppress(ConnectionClosed):  # a reconnect grants a full queue
                self._acknowledge_processed()
                self._flow(permits)

    def _acknowledge_processed(self) -> None:
        """Acknowledge (cumulatively) what was processed, as the Java reader does.

        The subscription is non-durable, so nothing is kept; but pulsar-lite
        re-dispatches entries that stay unacknowledged, sometimes the same entry
        again and again (seen: 300 times the frames of a 1,000-entry read).
        """
        if self._processed is None or self._processed == self._acked:
            return
        assert self._conn is not None
        ledger, entry_id = self._acked = self._processed
        ack = pb.CommandAck(
            consumer_id=self._consumer_id, ack_type=pb.CommandAck.Cumulative,
            message_id=[pb.MessageIdData(ledgerId=ledger & _U64, entryId=entry_id & _U64)],
        )
        self._conn.send(encode_command(T(type=T.ACK, ack=ack)))

    def _passed_end(self, end: MessageId) -> bool:
        """After a quiet spell: is there nothing more to come before ``end``?

        When the broker has more but sends nothing for :attr:`STALL` seconds, the
        consumer is re-created: a subscription that raced with a topic unload can
        stay attached to the closed topic, answering requests but never
        dispatching (seen on Apache Pulsar 4.0 under repeated unloads).
        """
        assert self._conn is not None
        try:
            last = get_last_message_id(self._conn, self._consumer_id, self.topic)
        except PulsarError as exc:
            if not may_retry(exc):
                raise
            self._reconnect(str(exc))
            return False
        seen = self._processed or (-1, -1)
        quiet = time.monotonic() - self._idle_since
        if last is None or (last.ledger, last.entry) <= seen:
            if not self._chunks.pending:
                return True  # the end (say, a marker) will never be dispatched
            # Chunks still to come for a message begun in the range: wait as long
            # as a Pulsar consumer keeps an incomplete chunked message.
            waited = time.monotonic() - self._chunk_at
            if waited < self.CHUNK_WAIT:
                return False
            self._drop_incomplete(f"no further chunk was published for {waited:.0f} s")
            return True
        if quiet > self._timeout:
            msg = (
                f"reader on {self.topic} received nothing for {self._timeout:g} s while "
                f"waiting for messages up to {end} (last processed {seen})"
            )
            raise OperationTimeout(msg)
        if quiet > self.STALL and time.monotonic() - self._stall_reconnect_at > self.STALL:
            self._stall_reconnect_at = time.monotonic()
            self._reconnect(f"nothing dispatched for {quiet:.0f} s although the broker has "
                            f"messages up to {last}")
        return False


def first_entry(
    lookup: LookupService, topic: TopicName, at: MessageId, *, operation_timeout: float = 30.0
) -> tuple[MessageId, pb.MessageMetadata] | None:
    """The first entry of ``topic`` (one partition) at or after ``at``, not decoded:
    its position (batch index -1) and metadata; None when there is none.

    Nothing is reassembled or decompressed: a probe of whether an entry still
    exists, or of the publish time of the last one (which may be a chunk).
    """
    reader = PartitionReader(lookup, topic, start=at, receiver_queue_size=1,
                             operation_timeout=operation_timeout)
    try:
        return reader._retrying(reader._peek)
    finally:
        reader.close()


def message_id_at_time(
    lookup: LookupService, topic: TopicName, publish_time: int, *, operation_timeout: float = 30.0
) -> MessageId | None:
    """The id of the first message of ``topic`` (one partition) published at or
    after ``publish_time`` (ms), found by a SEEK; None when there is none."""
    reader = PartitionReader(
        lookup, topic, start_time=publish_time, receiver_queue_size=100, batch_rows=1,
        operation_timeout=operation_timeout,
    )
    for batch in reader:  # closes the reader when left
        if batch.num_rows:
            found = MessageId.parse(batch.column("messageId")[0].as_py())
            begun = reader.first_start
            if begun is not None and begun < (found.ledger, found.entry):
                # A chunked message: it begins at its first chunk (its id is its last
                # chunk's), and a range that ends here must not hold its first chunks.
                return MessageId(begun[0], begun[1], found.partition, -1)
            return found
    return None


def last_message_id(
    lookup: LookupService, topic: TopicName, *, operation_timeout: float = 30.0
) -> MessageId | None:
    """The id of the last message of ``topic`` (one partition); None when it is empty."""
    reader = PartitionReader(lookup, topic, start=LATEST, operation_timeout=operation_timeout)
    try:
        reader._retrying(reader._open_consumer_at_latest)
        assert reader._conn is not None
        return reader._retrying(
            lambda: get_last_message_id(reader._conn, reader._consumer_id, topic)  # type: ignore[arg-type]
        )
    finally:
        reader.close()


def newest_publish_time(
    lookup: LookupService, topic: TopicName, *, operation_timeout: float = 30.0
) -> int | None:
    """The publish time (ms) of the last entry of ``topic``; None when it is empty."""
    last = last_message_id(lookup, topic, operation_timeout=operation_timeout)
    if last is None:
        return None
    entry = MessageId(last.ledger, last.entry, last.partition, -1)
    found = first_entry(lookup, topic, entry, operation_timeout=operation_timeout)
    return None if found is None else found[1].publish_time
