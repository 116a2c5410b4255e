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
Any other SEND_ERROR re-creates this producer alone (CLOSE_PRODUCER, then
PRODUCER with epoch + 1 on the same pooled connection) and resends what is
pending: the readers and other producers sharing the connection carry on
(the Java client closes the whole connection instead).

Receipts come in order. A receipt for a later batch while an older one is
still pending means the older receipt was lost on a live connection: the
producer is re-created the same way and the unconfirmed batches are sent
again with their sequence ids (as the Java client resends after such a
gap): with deduplication the broker drops what it has; without, the
message may be stored twice, and a warning names the topic, producer and
sequence ids. A batch still unconfirmed ``send_timeout`` seconds after it
was sealed fails the producer with an error naming the topic and the
sequence ids (0: no send timeout, as the Java client's ``sendTimeout(0)``).
The last batch's lost receipt, which no later one reveals, is found by
:mod:`.receipt_watch` (overdue for the operation timeout with nothing moving).

The first creation is retried within the operation timeout when the failure
is retriable (:func:`.retry.classify`): ServiceNotReady during an unload, a
refused or lost connection during a restart, ProducerBusy while the broker
still holds the name for a connection it has not yet found dead.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import OrderedDict

from pulsar_spark.client.net.dispatch import Key, Kind
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import PulsarError, ServerError, server_error
from pulsar_spark.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, Frame
from pulsar_spark.protocol.schemas.info import SchemaInfo, version_from_bytes

from ..errors import ClientError, ConnectionClosed, OperationTimeout
from ..names import TopicName
from ..net.connection import Connection
from ..net.dispatch import route
from ..net.lookup import LookupService
from ..retry import Action, Backoff, classify, may_retry
from ..schemas import with_schema_context
from .outgoing import PendingBatch

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
        send_timeout: seconds a batch may wait for its receipt, reconnects included
            (0: no limit).
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
        self._pending_bytes = 0
        self._error: PulsarError | None = None
        self._conn: Connection | None = None
        self._key = Key(Kind.PRODUCER, -1)
        self._next_seq = 0
        #: The broker's last persisted sequence id for this producer name when it
        #: was created (-1: none, or no deduplication).
        self.last_sequence_id = -1
        self._closed = False
        #: 0: attached; 1: re-creating; more: closed again while re-creating.
        self._reconnecting = 0

    @property
    def schema_version(self) -> int | None:
        """The version of :attr:`schema` the broker gave (None: no schema, or a
        broker that keeps none, as pulsar-lite)."""
        return version_from_bytes(self._schema_version_bytes)

    # -- creation ------------------------------------------------------------------

    def _create_first(self) -> None:
        """The first creation, retried while :func:`.retry.classify` allows, within
        the operation timeout."""
        timeout = self.lookup.config.operation_timeout
        deadline = time.monotonic() + timeout
        backoff = Backoff()
        attempts = 0
        while True:
            attempts += 1
            # A CLOSE_PRODUCER (an unload) or a lost connection may come right after
            # PRODUCER_SUCCESS, before this thread has taken the new attachment as its
            # own: counted here, it is acted upon below, never by a reconnect racing us.
            with self._lock:
                self._reconnecting = 1
            try:
                self._create(first=True)
            except PulsarError as exc:
                delay = backoff.next()
                if classify(exc) is Action.FATAL or time.monotonic() + delay > deadline:
                    if attempts > 1 and hasattr(exc, "add_note"):  # Python 3.11+
                        exc.add_note(
                            f"(creating the producer: {attempts} attempts in {timeout:g} s)"
                        )
                    raise
                log.info("creating a producer on %s: %s; again in %.1f s", self.topic, exc, delay)
                time.sleep(delay)
            else:
                with self._lock:
                    again, self._reconnecting = self._reconnecting > 1, 0
                if again:
                    self._schedule_reconnect("closed while it was being created")
                return

    def _create(self, *, first: bool) -> None:
        conn = self.lookup.connection_for(self.topic)
        key = conn.new_key(Kind.PRODUCER)
        conn.add_handler(key, self)
        with self._lock:  # from now on, frames for ``key`` are this attachment's
            self._conn, self._key = conn, key
        command = commands.producer(
            conn.new_id(Kind.REQUEST),
            key.ident,
            topic=str(self.topic),
            epoch=self._epoch,
            producer_name=self.name or None,
            user_provided_name=self._user_name is not None,
            schema=self.schema,
        )
        command.producer.encrypted = self._encrypts()
        try:
            frame = conn.request(command)
        except ServerError as exc:
            conn.remove_handler(key)
            raise with_schema_context(exc, "producer on", self.topic, self.schema) from exc
        except OperationTimeout:
            # The broker may have created it after all: close it, or its name stays
            # busy on this live connection (as the Java client does).
            conn.remove_handler(key)
            with contextlib.suppress(PulsarError):
                conn.send_command(commands.close_producer(conn.new_id(Kind.REQUEST), key.ident))
            raise
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

    def _encrypts(self) -> bool:
        """Whether the payloads are encrypted (PRODUCER says so: a namespace that requires
        encryption refuses producers that do not)."""
        return False

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
            self._receipt(receipt.sequence_id, current=receipt.producer_id == self._key.ident)
            return
        key = route(command)
        if key is None or key.ident != self._key.ident:
            return  # for an attachment this producer left: only its receipts still count
        if command.type == T.SEND_ERROR:
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
                # This producer alone is re-created; the connection stays.
                self._schedule_reconnect(f"SEND_ERROR {error.message}", recreate=True)
        elif command.type in (T.CLOSE_PRODUCER, T.TOPIC_MIGRATED):
            self._schedule_reconnect(frame.type_name)

    def _receipt(self, sequence_id: int, *, current: bool) -> None:
        """A receipt (``current``: from the present attachment; an earlier one's,
        arriving after it was closed for a re-creation, still confirms)."""
        with self._lock:
            pending = self._pending
            batch = pending.pop(sequence_id, None)
            if batch is None:  # some brokers echo the highest id
                for first, waiting in pending.items():
                    if waiting.last == sequence_id:
                        batch = pending.pop(first)
                        break
                else:
                    return  # a duplicate receipt, or one for a batch that timed out
            if current and pending and next(iter(pending)) < batch.first and not self._reconnecting:
                self._receipts_lost(batch.first)
            if batch.chunks is not None:
                batch.chunks_confirmed += 1
                if batch.chunks_confirmed < len(batch.chunks):
                    pending[batch.first] = batch
                    pending.move_to_end(batch.first, last=False)
                    return
            self._pending_messages -= batch.count
            self._pending_bytes -= batch.size
            self._lock.notify_all()

    def _receipts_lost(self, confirmed: int) -> None:
        """A receipt for ``confirmed`` came while older batches wait: theirs were lost
        (lock held). Re-create the producer and resend them."""
        lost = [(b.first, b.last) for b in self._pending.values() if b.first < confirmed]
        ids = ", ".join(f"{a}" if a == z else f"{a}-{z}" for a, z in lost)
        log.warning(
            "producer %s on %s: no receipt for sequence ids %s although %d was confirmed: "
            "re-creating the producer and sending them again (the broker drops them if it "
            "deduplicates; otherwise they may be stored twice)",
            self.name,
            self.topic,
            ids,
            confirmed,
        )
        self._schedule_reconnect(f"receipts lost for {ids}", recreate=True)

    def connection_closed(self, error: PulsarError) -> None:
        self._schedule_reconnect(str(error))

    def _schedule_reconnect(self, reason: str, *, recreate: bool = False) -> None:
        """Re-attach in a thread of its own: after a lost connection, or (``recreate``)
        this producer alone on its live connection."""
        with self._lock:  # re-entrant: receipts call this with it held
            if self._closed or self._error is not None:
                return
            self._reconnecting += 1
            if self._reconnecting > 1:
                # Closed again while re-creating (a topic unloaded twice): the
                # reconnect under way must start over, or the broker would ignore
                # the SENDs of a producer it no longer has.
                return
        threading.Thread(target=self._reconnect, args=(reason, recreate), daemon=True).start()

    def _detach(self, recreate: bool) -> None:
        """Stop hearing from the current attachment; with ``recreate``, close the
        producer on its (live) connection first, and keep taking its receipts for an
        operation timeout (a broker may answer the close before the receipts of what
        it was still persisting: pulsar-lite does): they confirm, and spare a resend."""
        conn, key = self._conn, self._key
        if conn is None:
            return
        if recreate and not conn.closed:
            close = commands.close_producer(conn.new_id(Kind.REQUEST), key.ident)
            try:
                conn.request(close)
            except PulsarError as exc:
                log.info(
                    "closing producer %s on %s to re-create it: %s", self.name, self.topic, exc
                )
            later = threading.Timer(conn.operation_timeout, conn.remove_handler, (key,))
            later.daemon = True
            later.start()
            return
        conn.remove_handler(key)

    def _reconnect(self, reason: str, recreate: bool) -> None:
        self._detach(recreate)
        backoff = Backoff()
        timeout = self._send_timeout
        deadline = time.monotonic() + timeout if timeout > 0 else float("inf")
        while True:
            log.info("producer %s on %s reconnecting (%s)", self.name, self.topic, reason)
            if not recreate:
                time.sleep(backoff.next())
            recreate = False
            with self._lock:
                if self._closed or self._error is not None:
                    self._reconnecting = 0
                    return
                self._reconnecting = 1
            try:
                self._epoch += 1
                self._create(first=False)
            except PulsarError as exc:
                # The broker may still hold the producer of the lost connection for a
                # moment: its name is busy until then.
                if not may_retry(exc) or time.monotonic() > deadline:
                    with self._lock:
                        if self._error is None:
                            self._error = exc
                        self._reconnecting = 0
                        self._lock.notify_all()
                    return
                reason = str(exc)
                continue
            with self._lock:
                if self._reconnecting == 1:
                    self._reconnecting = 0
                    for batch in self._pending.values():
                        self._transmit(batch)
                    return
            reason = "closed again while re-creating"
            self._detach(False)
