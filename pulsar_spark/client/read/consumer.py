"""A reader's consumer on one connection: inbox, subscribe, seek, flow window, acks,
last message id, close.

:class:`ReaderConsumer` is one attachment of a non-durable Exclusive
subscription; a reader makes a new one on every (re)subscribe.
:class:`FlowWindow` counts flow permits: granted again at half the window,
which grows to hold :attr:`FlowWindow.BATCHES_IN_FLIGHT` entries when batches
are so large that few fit, and shrinks to what a byte budget leaves room for.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import PulsarError, ServerError
from pulsar_spark.protocol.framing import Frame
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.schemas.info import SchemaInfo

from ..names import TopicName
from ..net.connection import Connection
from ..net.dispatch import Handler, IdKind, Key
from ..net.lookup import LookupService
from ..schemas import with_schema_context

__all__ = [
    "FlowWindow",
    "Inbox",
    "ReaderConsumer",
    "attach_consumer",
    "get_last_message_id",
    "last_and_mark_delete",
]

log = logging.getLogger(__name__)
T = pb.BaseCommand


class Inbox:
    """Frames the connection routes to one consumer, queued for the reading thread."""

    def __init__(self) -> None:
        self._frames: deque[Frame] = deque()
        self._ready = threading.Condition()
        self.error: PulsarError | None = None
        #: Bytes of the frames queued (their whole size on the wire).
        self.bytes = 0

    def frame_received(self, frame: Frame) -> None:
        with self._ready:
            self._frames.append(frame)
            self.bytes += frame.size
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
                frame = self._frames.popleft()
                self.bytes -= frame.size
                return frame
            if self.error is not None:
                raise self.error
            return None


def _is_no_messages(exc: ServerError) -> bool:
    # pulsar-lite answers GetLastMessageId on an empty topic with this error,
    # where Apache Pulsar returns entryId -1.
    return "has no messages" in exc.broker_message


def get_last_message_id(conn: Connection, consumer_id: int, topic: TopicName) -> MessageId | None:
    """The id of the last message of the topic a consumer is on; None when it is empty."""
    return last_and_mark_delete(conn, consumer_id, topic)[0]


def last_and_mark_delete(
    conn: Connection, consumer_id: int, topic: TopicName
) -> tuple[MessageId | None, MessageId | None]:
    """One GET_LAST_MESSAGE_ID: the id of the last message of the topic a consumer is
    on (None: it is empty), and its subscription's mark-delete position, where the
    broker tells it (None: it does not). The mark-delete position is an entry
    (batch index -1): everything up to it is acknowledged; entry -1 means before
    the first entry of its ledger."""
    request = commands.get_last_message_id(conn.new_id(IdKind.REQUEST), consumer_id)
    try:
        frame = conn.request(request)
    except ServerError as exc:
        if _is_no_messages(exc):
            return None, None
        raise
    answer = frame.command.getLastMessageIdResponse
    partition = max(topic.partition, -1)
    last: MessageId | None = MessageId.from_pb(answer.last_message_id, partition=partition)
    if last is not None and last.entry < 0:
        last = None
    mark_delete = None
    if answer.HasField("consumer_mark_delete_position"):
        found = MessageId.from_pb(answer.consumer_mark_delete_position, partition=partition)
        mark_delete = found.with_batch_index(-1)
    return last, mark_delete


def attach_consumer(
    conn: Connection, handler: Handler, subscribe: Callable[[int, int], pb.BaseCommand]
) -> Key:
    """Attach a consumer on ``conn``: ``handler`` registered under a fresh consumer
    id, then the SUBSCRIBE that ``subscribe(request_id, consumer_id)`` builds; the
    handler is removed again when that fails."""
    key = conn.new_key(IdKind.CONSUMER)
    # Register before SUBSCRIBE: messages may follow its SUCCESS at once.
    conn.add_handler(key, handler)
    try:
        conn.request(subscribe(conn.new_id(IdKind.REQUEST), key.ident))
    except BaseException:
        conn.remove_handler(key)
        raise
    return key


class ReaderConsumer:
    """A consumer on a non-durable Exclusive subscription, attached on one connection.

    Use :meth:`subscribe`. Its frames queue in :attr:`inbox`.
    """

    def __init__(self, conn: Connection, key: Key, inbox: Inbox, topic: TopicName) -> None:
        self.conn, self.key, self.inbox, self.topic = conn, key, inbox, topic

    @property
    def consumer_id(self) -> int:
        return self.key.ident

    @classmethod
    def subscribe(
        cls,
        lookup: LookupService,
        topic: TopicName,
        name: str,
        start: MessageId,
        schema: SchemaInfo | None = None,
        read_compacted: bool = False,
    ) -> ReaderConsumer:
        """Look ``topic`` up and subscribe as ``name`` from entry ``start``, with
        ``schema`` for the broker to check (an incompatible one raises
        ``IncompatibleSchemaError`` naming the topic and the schema type), reading
        the compacted view with ``read_compacted``."""
        inbox = Inbox()
        conn = lookup.connection_for(topic)
        try:
            key = attach_consumer(
                conn,
                inbox,
                lambda request_id, consumer_id: commands.subscribe(
                    request_id,
                    consumer_id,
                    topic=str(topic),
                    subscription=name,
                    durable=False,
                    earliest=start.is_earliest,
                    start_message_id=start,
                    schema=schema,
                    read_compacted=read_compacted,
                ),
            )
        except ServerError as exc:
            raise with_schema_context(exc, "reader on", topic, schema) from exc
        return cls(conn, key, inbox, topic)

    def seek_to_time(self, publish_time: int) -> bool:
        """SEEK to ``publish_time``; whether the broker closed the consumer for it
        (Apache Pulsar resets the cursor and closes the consumer: CLOSE_CONSUMER
        before SUCCESS; the non-durable subscription stays, with its new position,
        for a consumer that subscribes under the same name)."""
        self.conn.request(
            commands.seek_to_time(self.conn.new_id(IdKind.REQUEST), self.consumer_id, publish_time)
        )
        closed = False
        while (frame := self.inbox.get(0)) is not None:
            if frame.command.type in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
                closed = True
        if closed:
            self.detach()
        return closed

    def flow(self, permits: int) -> None:
        self.conn.send_command(commands.flow(self.consumer_id, permits))

    def acknowledge(self, ledger: int, entry: int) -> None:
        """Cumulative ACK of entry ``ledger:entry``."""
        self.conn.send_command(commands.ack_cumulative(self.consumer_id, MessageId(ledger, entry)))

    def last_message_id(self) -> MessageId | None:
        """The topic's last message id (see :func:`get_last_message_id`)."""
        return get_last_message_id(self.conn, self.consumer_id, self.topic)

    def detach(self) -> None:
        """Stop routing frames to the inbox (the broker's consumer is gone or going)."""
        self.conn.remove_handler(self.key)

    def close(self) -> None:
        """Detach and close the consumer on the broker; failures are only logged."""
        self.detach()
        conn = self.conn
        if conn.closed:
            return
        try:
            conn.request(
                commands.close_consumer(conn.new_id(IdKind.REQUEST), self.consumer_id), timeout=5
            )
        except PulsarError as exc:
            log.debug("closing consumer on %s: %s", self.topic, exc)


class FlowWindow:
    """Flow permits (messages) outstanding, granted again at half the window, and
    held back while the bytes a read buffers use up its budget.

    Permits count messages, so the bytes they bring are estimated: from the
    largest entry a permit may bring (:attr:`FIRST_GUESS`, the broker's default
    message size) until entries come, then from bytes per message seen (a rise
    at once, a fall slowly). The permits granted keep the estimated bytes in
    flight, plus those ``buffered`` (said by the caller: inbox, messages being
    put together, rows being built), within ``budget``. When nothing is in
    flight, nothing is queued and the budget is spent, one entry's permits are
    granted all the same: the read goes on one entry at a time (what it holds
    is bounded by its own limits: a batch flushed, chunked messages refused).

    Args:
        size: the receiver queue size.
        budget: bytes a read may hold; None: no byte bound.
    """

    #: Entries the window holds at least (see :meth:`count`).
    BATCHES_IN_FLIGHT = 4
    #: Most messages the window grows to for large batches.
    MAX_WINDOW = 50_000
    #: Bytes a permit may bring before any entry came (5 MiB: a broker's default).
    FIRST_GUESS = 5 << 20

    def __init__(self, size: int, budget: int | None = None) -> None:
        self.size = size
        self.budget = budget
        #: Permits granted and not used yet, as the broker counts them (a batch
        #: larger than what is left takes it below 0).
        self.outstanding = 0
        #: Estimated bytes per message; 0 until an entry came.
        self._per_message = 0.0

    def restart(self, buffered: int = 0) -> int:
        """A fresh consumer: the permits to grant it (the window, within the budget)."""
        self.outstanding = 0
        return self.top_up(buffered, idle=True)

    def count(self, used: int, nbytes: int = 0, buffered: int = 0) -> int:
        """Count one entry of ``used`` messages and ``nbytes`` bytes; the permits to
        grant now (0: none yet), with ``buffered`` bytes held.

        When an entry is so large that few fit, the window grows to hold
        :attr:`BATCHES_IN_FLIGHT` of them (up to :attr:`MAX_WINDOW`), so that the
        broker never waits for a FLOW between two entries.
        """
        self.outstanding -= used
        want = min(self.BATCHES_IN_FLIGHT * used, self.MAX_WINDOW)
        if want > self.size:
            self.size = want
        if nbytes and used > 0:
            per = nbytes / used
            seen = self._per_message
            self._per_message = per if per > seen else seen - (seen - per) / 16
        return self.top_up(buffered, idle=False)

    def top_up(self, buffered: int, *, idle: bool) -> int:
        """The permits to grant now with ``buffered`` bytes held; ``idle``: nothing
        is queued (so a read with no permits out would wait for ever).

        Permits go out once half the window is missing; a quarter when the budget
        keeps the window small (large messages: pulsar-lite dispatches a few of
        them per FLOW and then waits for the next one), any when idle.
        """
        target = self._target(buffered)
        missing = target - self.outstanding
        if target <= 0:
            missing = 1 - self.outstanding if idle and self.outstanding <= 0 else 0
        else:
            least = 1 if idle else max(target // (2 if target == self.size else 4), 1)
            missing = missing if missing >= least else 0
        self.outstanding += missing
        return missing

    def _target(self, buffered: int) -> int:
        """Permits that may be out: the window, or fewer for the bytes left."""
        if self.budget is None:
            return self.size
        per = self._per_message or self.FIRST_GUESS
        return max(0, min(self.size, int((self.budget - buffered) / per)))
