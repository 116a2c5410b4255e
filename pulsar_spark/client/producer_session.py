"""A producer's attachment to the broker: creation under its name and epoch, receipts,
SEND_ERROR, and re-creation with resend after a reconnect.

Sequence ids continue from the broker's ``last_sequence_id`` when the
producer is first created. On a lost connection, CLOSE_PRODUCER or
TOPIC_MIGRATED the producer is created again under the same name (epoch + 1)
and every pending batch is sent again, in order, with its sequence ids: with
deduplication on, the broker drops what it already has, and its receipt for
a duplicate (``-1:-1``) counts as persisted. A chunked message is confirmed
once every chunk's receipt is in; a resend sends only the chunks not yet
confirmed.

SEND_ERROR is fatal for a checksum error, a terminated topic and a refused
message (``NotAllowedError``): the producer fails with the broker's message.
Any other SEND_ERROR drops the connection and resends, as the reference
clients do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict

from ..protocol import PulsarApi_pb2 as pb
from ..protocol import commands
from ..protocol.errors import PulsarError, ServerError, server_error
from ..protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, Frame
from ..protocol.schema_info import SchemaInfo, version_from_bytes
from .connection import Connection, Key, Kind
from .errors import ClientError, ConnectionClosed
from .lookup import LookupService
from .names import TopicName
from .outgoing import PendingBatch
from .retry import Backoff, may_retry
from .schemas import with_schema_context

__all__ = ["ProducerSession"]

log = logging.getLogger(__name__)
T = pb.BaseCommand

#: SEND_ERROR codes that resending cannot cure.
_FATAL_SEND_ERRORS = frozenset({pb.ChecksumError, pb.TopicTerminatedError, pb.NotAllowedError})


class ProducerSession:
    """The broker-facing half of a :class:`~.producer.Producer` (see the module).

    Args:
        lookup: discovery and connections.
        topic: the topic.
        producer_name: a fixed name (for deduplication); the broker's otherwise.
        send_timeout: seconds a batch may wait for its receipt, reconnects included.
        chunk_max_size: a smaller limit for metadata + payload of one message.
        schema: the schema the broker registers (or checks) for the topic; its
            version goes into every message, as the Java client does.
    """

    def __init__(
        self,
        lookup: LookupService,
        topic: TopicName,
        *,
        producer_name: str | None,
        send_timeout: float,
        chunk_max_size: int | None,
        schema: SchemaInfo | None = None,
    ) -> None:
        # A Producer (this plus its own) keeps under 30 instance attributes: past
        # that, CPython (3.11, 3.12) stops sharing the instance dict's keys and every
        # self.x in the per-message path gets slower (send_batch ~7% slower).
        self.lookup = lookup
        self.schema = schema
        #: The broker's version bytes of :attr:`schema` (empty: none).
        self._schema_version_bytes = b""
        self.topic = topic
        self._user_name = producer_name
        self.name = producer_name or ""
        self._epoch = 0
        self._send_timeout = send_timeout
        self._chunk_max_size = chunk_max_size
        self._lock = threading.Condition()
        self._pending: OrderedDict[int, PendingBatch] = OrderedDict()
        self._pending_messages = 0
        self._error: PulsarError | None = None
        self._conn: Connection | None = None
        self._key = Key(Kind.PRODUCER, -1)
        self._next_seq = 0
        #: The broker's last persisted sequence id for this producer name when it
        #: was created (-1: none, or no deduplication).
        self.last_sequence_id = -1
        self._closed = False
        self._reconnecting = False
        self._reconnect_again: str | None = None

    @property
    def schema_version(self) -> int | None:
        """The version of :attr:`schema` the broker gave (None: no schema, or a
        broker that keeps none, as pulsar-lite)."""
        return version_from_bytes(self._schema_version_bytes)

    # -- creation ------------------------------------------------------------------

    def _create(self, *, first: bool) -> None:
        conn = self.lookup.connection_for(self.topic)
        key = conn.new_key(Kind.PRODUCER)
        conn.add_handler(key, self)
        command = commands.producer(
            conn.new_id(Kind.REQUEST),
            key.ident,
            topic=str(self.topic),
            epoch=self._epoch,
            producer_name=self.name or None,
            user_provided_name=self._user_name is not None,
            schema=self.schema,
        )
        try:
            frame = conn.request(command)
        except ServerError as exc:
            conn.remove_handler(key)
            raise with_schema_context(exc, "producer on", self.topic, self.schema) from exc
        except BaseException:
            conn.remove_handler(key)
            raise
        success = frame.command.producer_success
        if self.schema is not None:
            version_from_bytes(success.schema_version)  # malformed bytes fail the creation
            self._schema_version_bytes = success.schema_version
        self.name = success.producer_name
        if first:
            self.last_sequence_id = success.last_sequence_id
            self._next_seq = max(success.last_sequence_id + 1, 0)
        self._conn, self._key = conn, key

    def _message_limit(self) -> int:
        """Metadata + payload of one message at most: the broker's limit, or ours."""
        limit = DEFAULT_MAX_MESSAGE_SIZE
        if self._conn is not None and self._conn.max_message_size:
            limit = self._conn.max_message_size
        if self._chunk_max_size is not None:
            limit = min(limit, self._chunk_max_size)
        return limit

    def _transmit(self, batch: PendingBatch) -> None:
        conn = self._conn
        if conn is None or self._reconnecting:
            return  # the reconnect resends everything pending
        # Encoded at each transmit: the producer id changes on a reconnect.
        frames = batch.frames(self._key.ident)
        with contextlib.suppress(ConnectionClosed):  # connection_closed() reconnects
            for frame in frames:
                conn.send(frame)

    def _close_on_broker(self) -> None:
        """Close the producer on the broker (failures are only logged)."""
        conn, key = self._conn, self._key
        if conn is not None and not conn.closed:
            conn.remove_handler(key)
            close = commands.close_producer(conn.new_id(Kind.REQUEST), key.ident)
            try:
                conn.request(close, timeout=5)
            except PulsarError as exc:
                log.debug("closing producer %s: %s", self.name, exc)

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            msg = f"producer {self.name} on {self.topic} is closed"
            raise ClientError(msg)

    # -- from the connection's reader thread ---------------------------------------------

    def frame_received(self, frame: Frame) -> None:
        command = frame.command
        if command.type == T.SEND_RECEIPT:
            receipt = command.send_receipt
            with self._lock:
                batch = self._pending.pop(receipt.sequence_id, None)
                if batch is None:  # some brokers echo the highest id
                    for first, pending in self._pending.items():
                        if pending.last == receipt.sequence_id:
                            batch = self._pending.pop(first)
                            break
                if batch is not None and batch.chunks is not None:
                    batch.chunks_confirmed += 1
                    if batch.chunks_confirmed < len(batch.chunks):
                        self._pending[batch.first] = batch
                        self._pending.move_to_end(batch.first, last=False)
                        return
                if batch is not None:
                    self._pending_messages -= batch.count
                    self._lock.notify_all()
        elif command.type == T.SEND_ERROR:
            error = command.send_error
            if error.error in _FATAL_SEND_ERRORS:
                with self._lock:
                    self._error = server_error(
                        error.error,
                        error.message,
                        context=f"producer {self.name} sending message {error.sequence_id} "
                        f"to {self.topic}",
                    )
                    self._lock.notify_all()
            else:
                # As the reference clients do: drop the connection, so that every
                # pending batch is sent again on a fresh one.
                self._schedule_reconnect(f"SEND_ERROR {error.message}", close_connection=True)
        elif command.type in (T.CLOSE_PRODUCER, T.TOPIC_MIGRATED):
            self._schedule_reconnect(frame.type_name)

    def connection_closed(self, error: PulsarError) -> None:
        self._schedule_reconnect(str(error))

    def _schedule_reconnect(self, reason: str, *, close_connection: bool = False) -> None:
        with self._lock:
            if self._closed:
                return
            if self._reconnecting:
                # Closed again while re-creating (a topic unloaded twice): the
                # reconnect under way must start over, or the broker would ignore
                # the SENDs of a producer it no longer has.
                self._reconnect_again = reason
                return
            self._reconnecting = True
        threading.Thread(
            target=self._reconnect, args=(reason, close_connection), daemon=True
        ).start()

    def _reconnect(self, reason: str, close_connection: bool) -> None:
        conn = self._conn
        if conn is not None:
            conn.remove_handler(self._key)
            if close_connection and not conn.closed:
                conn.close()
        backoff = Backoff()
        deadline = time.monotonic() + self._send_timeout
        while True:
            log.info("producer %s on %s reconnecting (%s)", self.name, self.topic, reason)
            time.sleep(backoff.next())
            try:
                self._epoch += 1
                with self._lock:
                    self._reconnect_again = None
                self._create(first=False)
                with self._lock:
                    again, self._reconnect_again = self._reconnect_again, None
                if again is None:
                    break
                reason = f"closed again while re-creating: {again}"
                if self._conn is not None:
                    self._conn.remove_handler(self._key)
                continue
            except PulsarError as exc:
                # The broker may still hold the producer of the lost connection for a
                # moment: its name is busy until then.
                if not may_retry(exc) or time.monotonic() > deadline:
                    with self._lock:
                        self._error = exc
                        self._reconnecting = False
                        self._lock.notify_all()
                    return
                reason = str(exc)
        with self._lock:
            self._reconnecting = False
            for batch in self._pending.values():
                self._transmit(batch)
