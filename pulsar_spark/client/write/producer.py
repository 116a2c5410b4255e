"""A producer: messages queued into batches, sealed, sent, flushed; one topic or partition.

Messages are gathered into a batch (max messages, max bytes, max delay),
sealed into one SEND frame (``sequence_id`` = first, ``highest_sequence_id``
= last, ``num_messages``; :mod:`.outgoing`) and kept in a bounded pending
window (bounded by messages and by bytes) until the broker's SEND_RECEIPT for it
arrives; a batch unconfirmed after the send timeout fails the producer. :meth:`Producer.flush`
returns once every receipt is in. A message whose (compressed) payload does
not fit the broker's ``max_message_size`` is sent alone, in chunks. Receipts,
errors and reconnects are handled by :class:`~.session.ProducerSession`.
The rows of an Arrow table are encoded column by column (:mod:`.columnar_send`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pulsar_spark.columnar.rows.encode import (
    InvalidRows,
    Item,
    encode_head,
    encode_pre,
    encode_tail,
)
from pulsar_spark.columnar.rows.send_items import columnar_rows
from pulsar_spark.protocol.codecs import codec_by_name
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.schemas.info import SchemaInfo

from ..crypto_keys import KeySpec, producer_encryptor
from ..errors import ClientError, InvalidArgument, OperationTimeout
from ..names import TopicName
from ..net.lookup import LookupService
from .columnar_send import explicit_ids, send_columnar, send_rows
from .outgoing import OpenBatch, item_bytes, seal
from .receipt_watch import ReceiptWatch, warn_overdue
from .session import ProducerSession

__all__ = [
    "DEFAULT_MAX_PENDING_BYTES",
    "Producer",
]

#: The byte window of a producer: 32 MiB (six 5 MB messages), as the Java client's
#: 64 MiB ``memoryLimitBytes`` is for all producers of a client.
DEFAULT_MAX_PENDING_BYTES = 32 * 1024 * 1024


class Producer(ProducerSession):
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
            :attr:`schema_version`.
        encryption_keys, public_key: end-to-end encryption: key names (``"a,b"`` or
            a list) and their public keys (a PEM URL for every name, or name -> URL
            as JSON or a mapping); each payload is encrypted last, after
            compression (and each chunk on its own), as the official producers do.
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
        super().__init__(
            lookup,
            topic,
            producer_name=producer_name,
            send_timeout=send_timeout,
            chunk_max_size=chunk_max_size,
            schema=schema,
        )
        #: What each payload goes through before it is sent: its codec, then (end-to-end
        #: encryption) the encryptor. One attribute: see the note in ProducerSession.
        self._sealing = (codec_by_name(compression), encryptor)
        self._batching = batching
        self._max_messages = batch_max_messages if batching else 1
        self._max_bytes = batch_max_bytes
        #: At most so many messages and bytes sent and unconfirmed.
        self._window = (max(max_pending_messages, self._max_messages), max_pending_bytes)
        self._chunking = chunking
        #: The batch being filled.
        self._open = OpenBatch()
        #: Held by a sender from its first message to its last (its window waits
        #: release the producer lock, never this one): the messages of two senders
        #: never interleave out of sequence-id order.
        self._sending = threading.Lock()
        self._watch = ReceiptWatch()
        self._create_first()
        threading.Thread(
            target=self._timer_loop,
            args=(batch_max_delay,),
            daemon=True,
            name=f"pulsar-producer-{topic}",
        ).start()

    def _encrypts(self) -> bool:
        return self._sealing[1] is not None

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
            self._queue(sequence_id, pre, null, payload, size + len(payload))
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
            self._queue(sequence_id, pre, null, value, size)
        return True

    def _batch_limit(self) -> int:
        """Bytes of one batch's items at most: the message limit, less room for the
        metadata, what a codec may add and what encryption adds."""
        limit = self._message_limit()
        limit -= limit // 64 + 1024
        encryptor = self._sealing[1]
        if encryptor is not None:
            limit -= encryptor.overhead  # wrapped keys, IV, tag
        return limit

    def _queue(
        self, sequence_id: int | None, pre: bytes, null: bool, value: bytes, size: int
    ) -> None:
        """Queue one encoded message (lock held); ``size`` is its share of a batch."""
        if sequence_id is not None:
            self._take_sequence_id(sequence_id)
        seq = self._next_seq
        self._next_seq += 1
        item = (seq, pre, null, value)
        if not self._batching:
            self._seal_alone(item)
            return
        # A batch never exceeds the message limit (chunks are never batched):
        # a message too big to share one goes alone, in chunks if need be.
        limit = self._batch_limit()
        if size >= min(self._max_bytes, limit):
            self._seal()
            self._seal_alone(item)
            return
        batch = self._open
        if batch.bytes + size > limit:
            self._seal()
        batch.add(item_bytes(item), 1, seq, seq, size)
        if batch.count >= self._max_messages or batch.bytes >= self._max_bytes:
            self._seal()

    def _take_sequence_id(self, sequence_id: int) -> None:
        """Make ``sequence_id`` the next one (lock held)."""
        if sequence_id < self._next_seq:
            msg = (
                f"producer {self.name} on {self.topic}: sequence id {sequence_id} is below "
                f"the next one, {self._next_seq}: ids must increase"
            )
            raise ClientError(msg)
        self._next_seq = sequence_id

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
        without a Python step per row (:mod:`.columnar_send`).

        Raises:
            InvalidArgument: both kinds of ids, ids not one per row or not increasing.
        """
        seqs = explicit_ids(table, first_sequence_id, sequence_ids)
        if not self._batching or not columnar_rows(table):
            return send_rows(self, table, seqs)
        return send_columnar(self, table, seqs)

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

    def _seal(self) -> None:
        """Turn the open batch into a SEND frame and send it (lock held)."""
        if not self._open.count:
            return
        payload, count, first, last, size = self._open.take()
        self._wait_for_room(count, size)
        self._dispatch((payload, count, first, last), count, batched=True)

    def _seal_alone(self, item: Item) -> None:
        """Send one message alone (chunked if too big; lock held)."""
        self._wait_for_room(1, len(item[3]))
        self._dispatch([item], 1, batched=False)

    def _dispatch(
        self,
        items: list[Item] | tuple[bytes | memoryview, int, int, int],
        count: int,
        *,
        batched: bool,
    ) -> None:
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
        self._error = OperationTimeout(msg)
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
            self._seal()
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
                    batch = self._open
                    if batch.count and time.monotonic() - batch.opened_at >= max_delay:
                        try:
                            self._seal()
                        except PulsarError as exc:  # raised to the next sender
                            if self._error is None:
                                self._error = exc
                                self._lock.notify_all()
            finally:
                self._sending.release()
