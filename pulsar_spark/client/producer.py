"""A producer: messages queued into batches, sealed, sent, flushed; one topic or partition.

Messages are gathered into a batch (max messages, max bytes, max delay),
sealed into one SEND frame (``sequence_id`` = first, ``highest_sequence_id``
= last, ``num_messages``; :mod:`.outgoing`) and kept in a bounded pending
window (bounded by messages and by bytes) until the broker's SEND_RECEIPT for it
arrives; a batch unconfirmed after the send timeout fails the producer. :meth:`Producer.flush`
returns once every receipt is in. A message whose (compressed) payload does
not fit the broker's ``max_message_size`` is sent alone, in chunks. Receipts,
errors and reconnects are handled by :class:`~.producer_session.ProducerSession`.
Rows of an Arrow table are encoded by :mod:`..columnar.rows`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pyarrow as pa

from ..columnar.rows import InvalidRows, Item, Rows, encode_head, encode_pre, encode_tail
from ..protocol.codecs import codec_by_name
from ..protocol.errors import PulsarError
from ..protocol.schema_info import SchemaInfo
from .crypto_keys import KeySpec, producer_encryptor
from .errors import ClientError, InvalidArgument, OperationTimeout
from .lookup import LookupService
from .names import TopicName
from .outgoing import seal
from .producer_session import ProducerSession

__all__ = ["DEFAULT_MAX_PENDING_BYTES", "Producer", "encoded_rows"]

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
        batch_max_messages: int = 1000,
        batch_max_bytes: int = 128 * 1024,
        batch_max_delay: float = 0.01,
        max_pending_messages: int = 10_000,
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
        self._items: list[Item] = []
        self._bytes = 0
        self._opened_at = 0.0
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
        with self._lock:
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
        with self._lock:
            self._raise_if_failed()
            self._queue(sequence_id, pre, null, value, size)
        return True

    def _queue(
        self, sequence_id: int | None, pre: bytes, null: bool, value: bytes, size: int
    ) -> None:
        """Queue one encoded message (lock held); ``size`` is its share of a batch."""
        if sequence_id is not None:
            self._take_sequence_id(sequence_id)
        if self._batching:
            # A batch never exceeds the message limit (chunks are never batched):
            # a message too big to share one goes alone, in chunks if need be.
            limit = self._message_limit()
            limit -= limit // 64 + 1024  # metadata, and what a codec may add
            encryptor = self._sealing[1]
            if encryptor is not None:
                limit -= encryptor.overhead  # wrapped keys, IV, tag
            if size >= min(self._max_bytes, limit):
                self._seal()
                self._items.append((self._next_seq, pre, null, value))
                self._next_seq += 1
                self._seal(batched=False)
                return
            if self._bytes + size > limit:
                self._seal()
        if not self._items:
            self._opened_at = time.monotonic()
        self._items.append((self._next_seq, pre, null, value))
        self._next_seq += 1
        self._bytes += size
        if len(self._items) >= self._max_messages or self._bytes >= self._max_bytes:
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
        self, table: pa.Table | pa.RecordBatch, first_sequence_id: int | None = None
    ) -> int:
        """Send the rows of an Arrow table: ``value`` (plus optional ``key``,
        ``properties`` and ``eventTime``); with ``first_sequence_id``, row i gets
        sequence id ``first_sequence_id + i``. Returns the rows sent (replays the
        broker already has are skipped, see :meth:`send`)."""
        rows = encoded_rows(table)
        last = self.last_sequence_id
        sent = 0
        with self._lock:
            self._raise_if_failed()
            queue = self._queue
            seqs: range | list[None] = (
                range(first_sequence_id, first_sequence_id + rows.n)
                if first_sequence_id is not None
                else [None] * rows.n
            )
            for seq, pre, null, value, size in zip(
                seqs, rows.pres, rows.nulls, rows.values, rows.sizes, strict=True
            ):
                if seq is not None and seq <= last:
                    continue
                queue(seq, pre, null, value, size)
                sent += 1
        return sent

    def _seal(self, batched: bool | None = None) -> None:
        """Turn the open batch into a SEND frame and send it (lock held)."""
        items, size, self._items, self._bytes = self._items, self._bytes, [], 0
        if not items:
            return
        batched = self._batching if batched is None else batched
        count = len(items)
        size = size or len(items[0][3])  # a message sent alone is not counted in _bytes
        most, most_bytes = self._window
        while (
            self._pending
            and (self._pending_messages + count > most or self._pending_bytes + size > most_bytes)
            and self._error is None
        ):
            self._lock.wait(1.0)  # receipts notify; the send timeout is checked here too
            self._expire()
        self._raise_if_failed()
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
        timeout (lock held)."""
        timeout = self._send_timeout
        if not self._pending or timeout <= 0 or self._error is not None:
            return
        oldest = next(iter(self._pending.values()))
        waited = time.monotonic() - oldest.created
        if waited < timeout:
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
        with self._lock:
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
                if self._items and time.monotonic() - self._opened_at >= max_delay:
                    try:
                        self._seal()
                    except PulsarError as exc:  # raised to the next sender
                        if self._error is None:
                            self._error = exc
                            self._lock.notify_all()


def encoded_rows(table: pa.Table | pa.RecordBatch) -> Rows:
    """The rows of ``table`` encoded for :meth:`Producer.send_encoded`.

    Raises:
        InvalidArgument: (a ClientError) columns other than value, key, properties
            and eventTime, no value column, or a negative event time.
    """
    try:
        return Rows(table)
    except InvalidRows as exc:
        raise InvalidArgument(str(exc)) from exc
