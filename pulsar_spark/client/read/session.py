"""A reader's consumer session on one topic (or partition): subscribe (and seek by time),
flow and acknowledgements, reconnect with backoff, and the probes that need no
decoding (:func:`first_entry` at a position, :func:`last_message_id`).

:class:`ReaderSession` keeps where the read resumes: the last entry processed,
exclusive, or the start before any. :class:`~.reader.PartitionReader` builds
the bounded read on it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.ids.message_id import EARLIEST, MessageId, to_signed64
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.protocol.schemas.info import SchemaInfo

from ..config import DEFAULT_READ_BUFFER_BYTES
from ..errors import ClientError, ConnectionClosed, InvalidArgument, OperationTimeout
from ..names import TopicName
from ..net.capabilities import BrokerKind
from ..net.lookup import LookupService
from ..retry import Backoff, may_retry
from .bounds import FROM_EARLIEST
from .consumer import FlowWindow, Inbox, ReaderConsumer
from .sub_names import fresh_name

__all__ = [
    "DEFAULT_BUFFER_BYTES",
    "MIN_BUFFER_BYTES",
    "ReaderSession",
    "first_entry",
    "last_message_id",
]

log = logging.getLogger(__name__)
T = pb.BaseCommand
R = TypeVar("R")

#: Bytes a read holds at most by default (:class:`~.config.ClientConfig`).
DEFAULT_BUFFER_BYTES = DEFAULT_READ_BUFFER_BYTES
#: The smallest budget accepted.
MIN_BUFFER_BYTES = 1 << 20


class ReaderSession:
    """A non-durable consumer of ``topic`` that survives reconnects.

    Args:
        lookup: discovery and connections.
        topic: the topic (a partition name for a partitioned topic).
        start: where the read starts (a :class:`~pulsar_spark.protocol.ids.position.Position`):
            earliest, latest, ``from:X`` (X included), ``after:X``, or ``time:`` a publish time, to
            start at the first message published at or after it (a seek).
        receiver_queue_size: flow permits (messages) outstanding; the window
            grows for large batches (:class:`~.consumer.FlowWindow`).
        buffer_bytes: bytes the read may hold (in flight, queued, being put
            together or built into rows): permits are held back beyond it. None:
            the client's ``read_buffer_bytes`` (:class:`~.config.ClientConfig`).
        idle_timeout: seconds a probe waits for a frame before looking again.
        operation_timeout: how long a reconnect or a probe may last.
        schema: sent in SUBSCRIBE, for the broker to check against the topic's.

    Raises:
        InvalidArgument: a ``receiver_queue_size`` below 1.
    """

    def __init__(
        self,
        lookup: LookupService,
        topic: TopicName,
        *,
        start: Position = FROM_EARLIEST,
        receiver_queue_size: int = 1000,
        idle_timeout: float = 2.0,
        operation_timeout: float = 30.0,
        schema: SchemaInfo | None = None,
        buffer_bytes: int | None = None,
    ) -> None:
        if receiver_queue_size < 1:
            msg = f"receiver_queue_size must be at least 1, not {receiver_queue_size}"
            raise InvalidArgument(msg)
        if buffer_bytes is None:
            buffer_bytes = getattr(lookup.config, "read_buffer_bytes", DEFAULT_BUFFER_BYTES)
        if buffer_bytes < MIN_BUFFER_BYTES:
            msg = f"buffer_bytes must be at least {MIN_BUFFER_BYTES} (1 MiB), not {buffer_bytes}"
            raise InvalidArgument(msg)
        #: Bytes the read may hold.
        self.buffer_bytes = buffer_bytes
        config = getattr(lookup, "config", None)
        #: Subscriptions are named ``<prefix>-<hex>`` (:mod:`.sub_names`).
        self.subscription_prefix: str | None = getattr(config, "subscription_prefix", None)
        #: Subscribe with ``read_compacted`` (the client's setting).
        self.read_compacted: bool = getattr(config, "read_compacted", False)
        self.lookup = lookup
        self.topic = topic
        self.partition = topic.partition
        self.schema = schema
        timed = start.kind == "time"
        self._start = EARLIEST if timed else start.id_or()
        self._start_inclusive = start.inclusive
        #: The publish time to seek to; None once a message at or after it came.
        self._start_time = start.time_ms
        self._window = FlowWindow(receiver_queue_size, buffer_bytes)
        self._idle = idle_timeout
        self._timeout = operation_timeout
        self._consumer: ReaderConsumer | None = None
        self._inbox = Inbox()
        #: (ledger, entry) of the last entry processed: where a reconnect resumes.
        self._processed: tuple[int, int] | None = None
        #: The last (ledger, entry) acknowledged, and the bytes received since.
        self._acked: tuple[int, int] | None = None
        self._unacked_bytes = 0
        self.reconnects = 0
        #: Re-subscribed since the last message (the next one is checked for a gap).
        self._resubscribed = False
        self._backoff = Backoff()
        self._progress_at = time.monotonic()

    def peek_entry(self) -> tuple[MessageId, pb.MessageMetadata] | None:
        """The first entry at or after the start, not decoded: its position (batch
        index -1) and metadata; None when there is none. Nothing is reassembled or
        decompressed (an entry may be one chunk of a message). Closes the reader."""
        try:
            return self._retrying(self._peek)
        finally:
            self.close()

    def last_message_id(self) -> MessageId | None:
        """The id of the topic's last message, asked through a consumer that
        receives nothing (no FLOW); None when the topic is empty. Closes the reader."""
        try:
            self._retrying(lambda: self._attach(self._fresh_name()))
            return self._retrying(lambda: self._live().last_message_id())
        finally:
            self.close()

    def close(self) -> None:
        """Close the consumer (the non-durable subscription goes with it)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()

    # -- subscription ----------------------------------------------------------------

    def _live(self) -> ReaderConsumer:
        assert self._consumer is not None
        return self._consumer

    def _resume_point(self) -> tuple[MessageId, bool]:
        if self._processed is None:
            return self._start, self._start_inclusive
        ledger, entry = self._processed
        return MessageId(ledger, entry, self.partition, -1), False

    def _subscribe(self) -> None:
        # A fresh name on every (re)subscribe: the subscription is non-durable
        # anyway, and pulsar-lite serves a reused name from its first start id.
        name = self._fresh_name()
        seek_time = self._start_time if self._processed is None else None
        if seek_time is not None and seek_time < 0:
            seek_time = None  # before 1970, before every message (the SEEK's time is unsigned)
        self._attach(name)
        if seek_time is not None and self._live().seek_to_time(seek_time):
            self._consumer = None  # closed by the broker for the seek: attach again
            self._attach(name)
        self._live().flow(self._window.restart(self._buffered()))

    def _fresh_name(self) -> str:
        return fresh_name(self.subscription_prefix)

    def _attach(self, name: str) -> None:
        start, _ = self._resume_point()
        consumer = ReaderConsumer.subscribe(
            self.lookup, self.topic, name, start, self.schema, self.read_compacted
        )
        caps = consumer.conn.capabilities
        if self.read_compacted and caps.kind is BrokerKind.LITE:
            consumer.close()  # it would read every message: refused rather than ignored
            msg = (
                f"read_compacted: {caps.server_version or 'pulsar-lite'} has no topic "
                f"compaction, so {self.topic} cannot be read compacted; read without it "
                "(every message), or from Apache Pulsar"
            )
            raise ClientError(msg)
        self._consumer, self._inbox = consumer, consumer.inbox

    def _reconnect(self, reason: str) -> None:
        """Re-create the consumer from the resume point, with backoff."""
        self.close()
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
                self._resubscribed = True
                return
            except PulsarError as exc:
                if not may_retry(exc):
                    raise
                reason = str(exc)

    def _retrying(self, action: Callable[[], R]) -> R:
        """Run ``action``; on a retriable error reconnect and run it again."""
        while True:
            try:
                return action()
            except PulsarError as exc:  # noqa: PERF203 - a retry loop
                if not may_retry(exc):
                    raise
                self._reconnect(str(exc))

    # -- probes ----------------------------------------------------------------------

    def _peek(self) -> tuple[MessageId, pb.MessageMetadata] | None:
        """The first entry at or after the start, undecoded (see :meth:`peek_entry`)."""
        if self._consumer is None:  # else a reconnect subscribed again already
            self._subscribe()
        last = self._live().last_message_id()
        start = self._start
        if last is None or (
            not start.is_earliest and (last.ledger, last.entry) < (start.ledger, start.entry)
        ):
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

    def _mark_processed(self, ledger: int, entry_id: int) -> None:
        self._processed = (ledger, entry_id)
        self._progress_at = time.monotonic()
        self._backoff.reset()

    def _buffered(self) -> int:
        """Bytes the read holds besides those in flight (a reader adds its own)."""
        return self._inbox.bytes

    def _top_up(self) -> None:
        """Grant the permits the budget has room for again (after rows went out, or
        while nothing comes: acknowledging then too)."""
        idle = not self._inbox.bytes
        permits = self._window.top_up(self._buffered(), idle=idle)
        if permits or idle:
            self._flow(permits)

    def _count_permits(self, used: int, nbytes: int = 0) -> None:
        permits = self._window.count(used, nbytes, self._buffered())
        self._unacked_bytes += nbytes
        # Acknowledged with each FLOW, and every quarter budget: pulsar-lite stops
        # dispatching to a consumer that leaves too much unacknowledged.
        if permits or self._unacked_bytes >= self.buffer_bytes >> 2:
            self._flow(permits)

    def _flow(self, permits: int) -> None:
        if self._consumer is not None:
            with contextlib.suppress(ConnectionClosed):  # a reconnect grants a full queue
                self._acknowledge_processed()
                if permits:
                    self._live().flow(permits)

    def _acknowledge_processed(self) -> None:
        """Acknowledge (cumulatively) what was processed, as the Java reader does.

        The subscription is non-durable, so nothing is kept; but pulsar-lite
        re-dispatches entries that stay unacknowledged, sometimes the same entry
        again and again (seen: 300 times the frames of a 1,000-entry read).
        """
        self._unacked_bytes = 0
        if self._processed is None or self._processed == self._acked:
            return
        ledger, entry_id = self._acked = self._processed
        self._live().acknowledge(ledger, entry_id)

    def _newest_publish_time(self) -> int | None:
        """The publish time (ms) of the topic's last entry; None when it is empty."""
        last = ReaderSession(
            self.lookup, self.topic, start=Position.latest(), operation_timeout=self._timeout
        ).last_message_id()
        if last is None:
            return None
        entry = MessageId(last.ledger, last.entry, last.partition, -1)
        found = ReaderSession(
            self.lookup,
            self.topic,
            start=Position.at(entry),
            receiver_queue_size=1,
            operation_timeout=self._timeout,
        ).peek_entry()
        return None if found is None else found[1].publish_time


def first_entry(
    lookup: LookupService, topic: TopicName, at: MessageId, *, operation_timeout: float = 30.0
) -> tuple[MessageId, pb.MessageMetadata] | None:
    """The first entry of ``topic`` (one partition) at or after ``at``, not decoded:
    its position (batch index -1) and metadata; None when there is none.

    Nothing is reassembled or decompressed: a probe of whether an entry still
    exists, or of the publish time of the last one (which may be a chunk).
    """
    session = ReaderSession(
        lookup,
        topic,
        start=Position.at(at),
        receiver_queue_size=1,
        operation_timeout=operation_timeout,
    )
    return session.peek_entry()


def last_message_id(
    lookup: LookupService, topic: TopicName, *, operation_timeout: float = 30.0
) -> MessageId | None:
    """The id of the last message of ``topic`` (one partition); None when it is empty."""
    session = ReaderSession(
        lookup, topic, start=Position.latest(), operation_timeout=operation_timeout
    )
    return session.last_message_id()
