"""A producer: messages queued into batches, sealed, sent, confirmed, flushed; one topic or
partition, attached to its broker under its name and epoch, re-created after a reconnect.

Messages are gathered into a batch (max messages, max bytes, max delay; the rows of
an Arrow table column by column, without a Python step per row: :mod:`.batcher`),
sealed into one SEND frame (``sequence_id`` = first, ``highest_sequence_id``
= last, ``num_messages``; :mod:`.outgoing`) and kept in a bounded pending
window (bounded by messages and by bytes) until the broker's SEND_RECEIPT for it
arrives; a batch unconfirmed after the send timeout fails the producer. :meth:`Producer.flush`
returns once every receipt is in. A message whose (compressed) payload does
not fit the broker's ``max_message_size`` is sent alone, in chunks.

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
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pulsar_spark.columnar.rows.encode import (
    InvalidRows,
    Item,
    Rows,
    encode_head,
    encode_pre,
    encode_tail,
)
from pulsar_spark.columnar.rows.send_items import columnar_rows, item_block
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.codecs import codec_by_name
from pulsar_spark.protocol.errors import PulsarError, ServerError, server_error
from pulsar_spark.protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, Frame
from pulsar_spark.protocol.schemas.info import SchemaInfo, version_from_bytes

from ..crypto_keys import KeySpec, producer_encryptor
from ..errors import ClientError, ConnectionClosed, InvalidArgument, OperationTimeout
from ..names import TopicName
from ..net.connection import Connection
from ..net.dispatch import IdKind, Key, route
from ..net.lookup import LookupService
from ..retry import Action, Backoff, classify, may_retry
from ..schemas import with_schema_context
from ..txn import Transaction, TransactionFailed
from .batcher import Batcher
from .outgoing import Packed, PendingBatch, seal
from .receipt_watch import ReceiptWatch, warn_overdue

__all__ = [
    "DEFAULT_MAX_PENDING_BYTES",
    "Producer",
    "encoded_rows",
    "explicit_ids",
]

log = logging.getLogger(__name__)
T = pb.BaseCommand

#: The byte window of a producer: 32 MiB (six 5 MB messages), as the Java client's
#: 64 MiB ``memoryLimitBytes`` is for all producers of a client.
DEFAULT_MAX_PENDING_BYTES = 32 * 1024 * 1024

#: SEND_ERROR codes that resending cannot cure.
_FATAL_SEND_ERRORS = frozenset({pb.ChecksumError, pb.TopicTerminatedError, pb.NotAllowedError})


def explicit_ids(
    table: pa.Table | pa.RecordBatch,
    first_sequence_id: int | None,
    sequence_ids: Sequence[int] | np.ndarray | None,
) -> np.ndarray | None:
    """The rows' explicit sequence ids (None: the producer's next ones).

    Raises:
        InvalidArgument: both kinds given, not one id per row, or ids that do not increase.
    """
    n = int(table.num_rows)
    if sequence_ids is None:
        if first_sequence_id is None:
            return None
        return np.arange(first_sequence_id, first_sequence_id + n, dtype=np.int64)
    if first_sequence_id is not None:
        msg = "give first_sequence_id or sequence_ids, not both"
        raise InvalidArgument(msg)
    ids = np.asarray(sequence_ids, np.int64)
    if ids.shape != (n,):
        msg = f"sequence_ids has {len(ids)} ids for {n} rows"
        raise InvalidArgument(msg)
    falls = np.flatnonzero(ids[1:] <= ids[:-1])
    if len(falls):
        row = int(falls[0]) + 1
        msg = f"sequence_ids must increase: row {row} has {ids[row]} after {ids[row - 1]}"
        raise InvalidArgument(msg)
    return ids


def encoded_rows(table: pa.Table | pa.RecordBatch) -> Rows:
    """The rows of ``table`` encoded one by one for :meth:`.Producer.send_encoded`.

    Raises:
        InvalidArgument: (a ClientError) columns other than value, key, properties
            and eventTime, no value column, or a negative event time.
    """
    try:
        return Rows(table)
    except InvalidRows as exc:
        raise InvalidArgument(str(exc)) from exc


class Producer:
    """Sends messages to one (non-partitioned or partition) topic.

    Args:
        lookup: discovery and connections.
        topic: the topic.
        producer_name: a fixed name (for deduplication); the broker's otherwise.
        compression: ``None``, ``"lz4"``, ``"zlib"``, ``"zstd"`` or ``"snappy"``.
        batching: gather messages into batches.
        batch_max_messages, batch_max_bytes, batch_max_delay: when a batch is sealed.
        max_pending_messages: messages sent but not yet confirmed, at most.
        max_pending_bytes: bytes of batches sent but not yet confirmed, at most (a
            single batch larger than that still goes, alone).
        send_timeout: seconds a message may wait for its receipt, reconnects
            included; 0: no limit (recommended with broker deduplication).
        chunking: send messages larger than the broker's ``max_message_size`` in
            chunks (the default); when off, such a message fails the send.
        chunk_max_size: a smaller limit for metadata + payload of one chunk.
        schema: the topic's schema for the broker to register or check (values
            are sent as given: encoding them is the caller's); its version is
            :attr:`schema_version`, and goes into every message, as the Java client does.
        encryption_keys, public_key: end-to-end encryption: key names (``"a,b"`` or
            a list) and their public keys (a PEM URL for every name, or name -> URL
            as JSON or a mapping); each payload is encrypted last, after
            compression (and each chunk on its own), as the official producers do.
        transaction: every message goes into this :class:`~..txn.Transaction` (the
            topic is registered in it before the first send). A send whose receipt is
            in doubt (the connection dropped, a receipt was lost) is never sent again
            inside it: the transaction fails (:class:`~..txn.TransactionFailed`), to be
            aborted and written again in a new one.
    """

    def __init__(
        self,
        lookup: LookupService,
        topic: TopicName,
        *,
        producer_name: str | None = None,
        compression: str | None = None,
        batching: bool = True,
        batch_max_messages: int = 10_000,
        batch_max_bytes: int = 1024 * 1024,
        batch_max_delay: float = 0.01,
        max_pending_messages: int = 100_000,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        send_timeout: float = 30.0,
        chunking: bool = True,
        chunk_max_size: int | None = None,
        schema: SchemaInfo | None = None,
        encryption_keys: str | Sequence[str] | None = None,
        public_key: KeySpec | None = None,
        transaction: Transaction | None = None,
    ) -> None:
        encryptor = producer_encryptor(str(topic), encryption_keys, public_key)
        if chunk_max_size is not None and chunk_max_size < 1024:
            msg = f"chunk_max_size must be at least 1024 bytes, not {chunk_max_size}"
            raise ClientError(msg)
        if not send_timeout >= 0:
            msg = f"send_timeout must be 0 (no limit) or a positive number, not {send_timeout!r}"
            raise InvalidArgument(msg)
        if max_pending_bytes < 1 or max_pending_messages < 1:
            msg = (
                "max_pending_messages and max_pending_bytes must be at least 1, not "
                f"{max_pending_messages} and {max_pending_bytes}"
            )
            raise InvalidArgument(msg)
        # A Producer keeps under 30 instance attributes: past that, CPython (3.11, 3.12)
        # stops sharing the instance dict's keys and every self.x in the per-message
        # path gets slower (send_batch ~7% slower).
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
        self._key = Key(IdKind.PRODUCER, -1)
        #: The broker's last persisted sequence id for this producer name when it
        #: was created (-1: none, or no deduplication).
        self.last_sequence_id = -1
        self._closed = False
        #: 0: attached; 1: re-creating; more: closed again while re-creating.
        self._reconnecting = 0
        #: What each payload goes through before it is sent: its codec, then (end-to-end
        #: encryption) the encryptor. One attribute: see the note above.
        self._sealing = (codec_by_name(compression), encryptor)
        self._batcher = Batcher(
            batching=batching,
            max_messages=batch_max_messages,
            max_bytes=batch_max_bytes,
            limit=self._batch_limit,
            ship=self._ship,
            who=self._who,
        )
        #: At most so many messages and bytes sent and unconfirmed.
        self._window = (max(max_pending_messages, self._batcher.max_messages), max_pending_bytes)
        self._chunking = chunking
        #: Held by a sender from its first message to its last (its window waits
        #: release the producer lock, never this one): the messages of two senders
        #: never interleave out of sequence-id order.
        self._sending = threading.Lock()
        self._watch = ReceiptWatch()
        self._txn = transaction
        self._create_first()
        threading.Thread(
            target=self._timer_loop,
            args=(batch_max_delay,),
            daemon=True,
            name=f"pulsar-producer-{topic}",
        ).start()

    @property
    def schema_version(self) -> int | None:
        """The version of :attr:`schema` the broker gave (None: no schema, or a
        broker that keeps none, as pulsar-lite)."""
        return version_from_bytes(self._schema_version_bytes)

    @property
    def batch_max_messages(self) -> int:
        """Messages in one batch at most (1 without batching)."""
        return self._batcher.max_messages

    def _who(self) -> str:
        return f"producer {self.name} on {self.topic}"

    # -- sending -------------------------------------------------------------------

    def send(
        self,
        value: bytes | None,
        key: str | bytes | None = None,
        properties: dict[str, str] | None = None,
        event_time: int | None = None,
        sequence_id: int | None = None,
    ) -> bool:
        """Queue one message (``value`` None = a tombstone); blocks while the
        pending window is full.

        ``sequence_id`` sets the message's sequence id instead of the next one:
        ids must increase, gaps allowed. With a producer name and broker
        deduplication, a message whose id is at or below the broker's
        :attr:`last_sequence_id` (when the producer was created) is a replay the
        broker would drop: it is not sent, and False is returned.

        Raises:
            PulsarError: an earlier batch failed for good.
            ClientError: a ``sequence_id`` below one already used.
        """
        if sequence_id is not None and sequence_id <= self.last_sequence_id:
            return False
        head, size = encode_head(key, properties)
        null = value is None
        payload = b"" if value is None else bytes(value)
        try:
            tail = encode_tail(event_time, isinstance(key, bytes))
        except InvalidRows as exc:
            raise InvalidArgument(str(exc)) from exc
        pre = encode_pre(head, payload, tail)
        with self._sending, self._lock:
            self._raise_if_failed()
            self._batcher.queue(sequence_id, pre, null, payload, size + len(payload))
        return True

    def send_encoded(
        self, sequence_id: int | None, pre: bytes, null: bool, value: bytes, size: int
    ) -> bool:
        """:meth:`send` of a message already encoded (a row of
        :class:`~..columnar.rows.Rows`: its metadata fields ``pre``, tombstone flag,
        payload and share of a batch ``size``); False for a replay, as :meth:`send`."""
        if sequence_id is not None and sequence_id <= self.last_sequence_id:
            return False
        with self._sending, self._lock:
            self._raise_if_failed()
            self._batcher.queue(sequence_id, pre, null, value, size)
        return True

    def send_batch(
        self,
        table: pa.Table | pa.RecordBatch,
        first_sequence_id: int | None = None,
        *,
        sequence_ids: Sequence[int] | np.ndarray | None = None,
    ) -> int:
        """Send the rows of an Arrow table: ``value`` (plus optional ``key``,
        ``properties`` and ``eventTime``); with ``first_sequence_id``, row i gets
        sequence id ``first_sequence_id + i``; with ``sequence_ids`` (increasing, gaps
        allowed: the rows of one partition) row i gets ``sequence_ids[i]``. Returns the
        rows sent (replays the broker already has are skipped, see :meth:`send`).

        The rows are encoded column by column into batch items and cut into batches
        without a Python step per row (:mod:`.batcher`).

        Raises:
            InvalidArgument: both kinds of ids, ids not one per row or not increasing,
                rows that cannot be encoded (the message names the row).
            ClientError: an id below one already used.
            PulsarError: the producer failed.
        """
        seqs = explicit_ids(table, first_sequence_id, sequence_ids)
        if not self._batcher.batching or not columnar_rows(table):
            return self._send_rows(table, seqs)
        return self._send_columnar(table, seqs)

    def _send_columnar(self, table: pa.Table | pa.RecordBatch, ids: np.ndarray | None) -> int:
        """:meth:`send_batch` column by column: the rows are encoded into one buffer of
        batch items (:func:`~..columnar.rows.send_items.item_block`) while only the send
        lock is held (receipts keep flowing), then cut into batches under the producer
        lock."""
        n = int(table.num_rows)
        if not n:
            return 0
        batcher = self._batcher
        with self._sending:
            self._raise_if_failed()
            if ids is not None:
                seqs = ids
                if int(seqs[0]) <= self.last_sequence_id:  # replays the broker has
                    keep = seqs > self.last_sequence_id
                    if not keep.any():
                        return 0
                    table = table.filter(pa.array(keep))
                    seqs = seqs[keep]
            else:
                # Only senders move the next id, and they hold the send lock.
                first = batcher.next_seq
                seqs = np.arange(first, first + n, dtype=np.int64)
            try:
                block = item_block(table, seqs)
            except InvalidRows as exc:
                raise InvalidArgument(str(exc)) from exc
            with self._lock:
                self._raise_if_failed()
                batcher.queue_block(block, seqs, table)
        return len(seqs)

    def _send_rows(self, table: pa.Table | pa.RecordBatch, ids: np.ndarray | None) -> int:
        """:meth:`send_batch` row by row (no batching, or columns of other types)."""
        rows = encoded_rows(table)
        last = self.last_sequence_id
        sent = 0
        with self._sending, self._lock:
            self._raise_if_failed()
            queue = self._batcher.queue
            seqs: list[int] | list[None] = [None] * rows.n if ids is None else ids.tolist()
            for seq, pre, null, value, size in zip(
                seqs, rows.pres, rows.nulls, rows.values, rows.sizes, strict=True
            ):
                if seq is not None and seq <= last:
                    continue
                queue(seq, pre, null, value, size)
                sent += 1
        return sent

    def _batch_limit(self) -> int:
        """Bytes of one batch's items at most: the message limit, less room for the
        metadata, what a codec may add and what encryption adds."""
        limit = self._message_limit()
        limit -= limit // 64 + 1024
        encryptor = self._sealing[1]
        if encryptor is not None:
            limit -= encryptor.overhead  # wrapped keys, IV, tag
        return limit

    def _ship(
        self,
        items: list[Item] | Packed,
        count: int,
        size: int,
        batched: bool,
    ) -> None:
        """A batch the batcher closed (or a message alone): sent once the pending
        window has room (lock held)."""
        self._wait_for_room(count, size)
        self._dispatch(items, count, batched=batched)

    def _wait_for_room(self, count: int, size: int) -> None:
        """Wait until ``count`` more messages of ``size`` bytes fit the pending window
        (lock held; one batch larger than the window still goes, alone)."""
        most, most_bytes = self._window
        while (
            self._pending
            and (self._pending_messages + count > most or self._pending_bytes + size > most_bytes)
            and self._error is None
        ):
            self._lock.wait(1.0)  # receipts notify; the send timeout is checked here too
            self._expire()
        self._raise_if_failed()

    def _dispatch(
        self,
        items: list[Item] | Packed,
        count: int,
        *,
        batched: bool,
    ) -> None:
        txn = self._txn
        if txn is not None:
            txn.register(str(self.topic))  # once: before the first send to the topic
        batch = seal(
            items,
            producer=self.name,
            topic=str(self.topic),
            batched=batched,
            codec=self._sealing[0],
            limit=self._message_limit(),
            chunking=self._chunking,
            schema_version=self._schema_version_bytes,
            encryptor=self._sealing[1],
            txn=None if txn is None else txn.id,
        )
        self._pending[batch.first] = batch
        self._pending_messages += count
        self._pending_bytes += batch.size
        self._transmit(batch)

    def _expire(self) -> None:
        """Fail the producer when its oldest batch waited longer than the send
        timeout; re-create it when that batch's receipt is overdue (lock held)."""
        timeout = self._send_timeout
        if not self._pending or self._error is not None:
            return
        oldest = next(iter(self._pending.values()))
        now = time.monotonic()
        waited = now - oldest.created
        if timeout <= 0 or waited < timeout:
            overdue = self._watch.overdue(oldest, None if self._reconnecting else self._conn, now)
            if overdue is not None:
                batches = list(self._pending.values())
                reason = warn_overdue(self.name, str(self.topic), batches, overdue)
                self._schedule_reconnect(reason, recreate=True)
            return
        batches = list(self._pending.values())
        msg = (
            f"producer {self.name} on {self.topic}: messages with sequence ids "
            f"{batches[0].first} to {batches[-1].last} ({self._pending_messages} messages) "
            f"not confirmed within the send timeout of {timeout:g} s (the oldest waited "
            f"{waited:.1f} s); they may or may not be stored"
        )
        self._fail(OperationTimeout(msg))
        self._pending.clear()
        self._pending_messages = self._pending_bytes = 0
        self._lock.notify_all()

    def flush(self, timeout: float | None = None) -> None:
        """Send the open batch and wait until every message is confirmed, or ``timeout``
        seconds at most (None: as long as the send timeout lets the messages wait;
        with no send timeout, until they are confirmed).

        Raises:
            PulsarError: a batch failed for good, or receipts did not come in time.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._sending, self._lock:
            self._batcher.seal()
            while self._pending and self._error is None:
                left = 1.0 if deadline is None else deadline - time.monotonic()
                if left <= 0:
                    msg = (
                        f"producer {self.name} on {self.topic}: {self._pending_messages} "
                        f"messages unconfirmed after {timeout:g} s"
                    )
                    raise OperationTimeout(msg)
                self._lock.wait(min(left, 1.0))
                self._expire()
            self._raise_if_failed()

    def close(self) -> None:
        """Flush, then close the producer on the broker."""
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._lock.notify_all()
            self._close_on_broker()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _timer_loop(self, max_delay: float) -> None:
        while True:
            time.sleep(max_delay)
            with self._lock:
                if self._closed:
                    return
                if self._pending:
                    self._expire()
            # A sender at work seals its batches itself.
            if not self._sending.acquire(blocking=False):
                continue
            try:
                with self._lock:
                    try:
                        self._batcher.seal_due(max_delay)
                    except PulsarError as exc:  # raised to the next sender
                        if self._error is None:
                            self._fail(exc)
            finally:
                self._sending.release()

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
        key = conn.new_key(IdKind.PRODUCER)
        conn.add_handler(key, self)
        with self._lock:  # from now on, frames for ``key`` are this attachment's
            self._conn, self._key = conn, key
        command = commands.producer(
            conn.new_id(IdKind.REQUEST),
            key.ident,
            topic=str(self.topic),
            epoch=self._epoch,
            producer_name=self.name or None,
            user_provided_name=self._user_name is not None,
            schema=self.schema,
            txn_enabled=self._txn is not None,
        )
        # PRODUCER says whether the payloads are encrypted: a namespace that requires
        # encryption refuses producers that do not.
        command.producer.encrypted = self._sealing[1] is not None
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
                conn.send_command(commands.close_producer(conn.new_id(IdKind.REQUEST), key.ident))
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
            self._batcher.next_seq = max(success.last_sequence_id + 1, 0)

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
            close = commands.close_producer(conn.new_id(IdKind.REQUEST), key.ident)
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
                    self._fail(
                        server_error(
                            error.error,
                            error.message,
                            context=f"producer {self.name} sending message {error.sequence_id} "
                            f"to {self.topic}",
                        )
                    )
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
            if self._txn is not None and self._pending:
                self._in_doubt(reason)
                return
            self._reconnecting += 1
            if self._reconnecting > 1:
                # Closed again while re-creating (a topic unloaded twice): the
                # reconnect under way must start over, or the broker would ignore
                # the SENDs of a producer it no longer has.
                return
        threading.Thread(target=self._reconnect, args=(reason, recreate), daemon=True).start()

    def _in_doubt(self, reason: str) -> None:
        """A transactional producer's sends whose receipts are in doubt (lock held): sent
        again, they could be stored twice in the transaction; it fails instead."""
        batches = list(self._pending.values())
        msg = (
            f"producer {self.name} on {self.topic}: the receipts of messages with sequence "
            f"ids {batches[0].first} to {batches[-1].last} are in doubt ({reason}); in "
            f"transaction {self._txn.id if self._txn else None} they are not sent again: "
            "abort it and write them in a new one"
        )
        self._fail(TransactionFailed(msg))

    def _fail(self, error: PulsarError) -> None:
        """The producer failed for good (lock held): every later call raises ``error``,
        and its transaction, if any, can only abort."""
        self._error = error
        if self._txn is not None:
            self._txn.fail(str(error))
        self._lock.notify_all()

    def _detach(self, recreate: bool) -> None:
        """Stop hearing from the current attachment; with ``recreate``, close the
        producer on its (live) connection first, and keep taking its receipts for an
        operation timeout (a broker may answer the close before the receipts of what
        it was still persisting: pulsar-lite does): they confirm, and spare a resend."""
        conn, key = self._conn, self._key
        if conn is None:
            return
        if recreate and not conn.closed:
            close = commands.close_producer(conn.new_id(IdKind.REQUEST), key.ident)
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
                            self._fail(exc)
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
