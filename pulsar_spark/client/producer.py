"""A producer with batching, receipts and resend on reconnect.

Messages are gathered into a batch (max messages, max bytes, max delay),
sealed into one SEND frame (``sequence_id`` = first, ``highest_sequence_id``
= last, ``num_messages``) and kept in a bounded pending window until the
broker's SEND_RECEIPT for it arrives. :meth:`Producer.flush` returns once
every receipt is in.

Sequence ids continue from the broker's ``last_sequence_id`` when the
producer is first created. On a lost connection, CLOSE_PRODUCER or
TOPIC_MIGRATED the producer is created again under the same name (epoch + 1)
and every pending batch is sent again, in order, with its sequence ids: with
deduplication on, the broker drops what it already has, and its receipt for
a duplicate (``-1:-1``) counts as persisted.

A message whose (compressed) payload does not fit the broker's
``max_message_size`` is sent in chunks: one SEND per chunk (``is_chunk``),
all sharing the message's sequence id and ``uuid``, each chunk's metadata
plus payload within the limit. It is confirmed once every chunk's receipt is
in; a resend after a reconnect sends only the chunks not yet confirmed.

SEND_ERROR is fatal for a checksum error, a terminated topic and a refused
message (``NotAllowedError``): the producer fails with the broker's message.
Any other SEND_ERROR drops the connection and resends, as the reference
clients do.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import logging
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..protocol import PulsarApi_pb2 as pb
from ..protocol.codecs import codec_by_name, compress
from ..protocol.errors import EncodeError, PulsarError, server_error
from ..protocol.framing import DEFAULT_MAX_MESSAGE_SIZE, Frame, encode_payload_command
from ..protocol.wire import encode_varint
from .connection import Connection
from .errors import ClientError, ConnectionClosed, OperationTimeout
from .lookup import LookupService
from .names import TopicName
from .retry import Backoff, may_retry

__all__ = ["Producer"]

log = logging.getLogger(__name__)
T = pb.BaseCommand


#: SEND_ERROR codes that resending cannot cure.
_FATAL_SEND_ERRORS = frozenset({pb.ChecksumError, pb.TopicTerminatedError, pb.NotAllowedError})


#: A queued message: (sequence id, SingleMessageMetadata fields 1-6 encoded,
#: null_value, payload).
_Item = tuple[int, bytes, bool, bytes]

_U32 = struct.Struct(">I")
_SMALL_VARINTS = [bytes((i,)) for i in range(128)]


@dataclass(slots=True)
class _Batch:
    first: int
    last: int
    count: int
    send: pb.CommandSend
    metadata: bytes
    payload: bytes
    #: (metadata, payload) of each chunk of a chunked message; None otherwise.
    chunks: list[tuple[bytes, bytes]] | None = None
    #: chunks whose receipt came (receipts arrive in order).
    chunks_confirmed: int = 0


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
        send_timeout: seconds a batch may wait for its receipt, reconnects included.
        chunking: send messages larger than the broker's ``max_message_size`` in
            chunks (the default); when off, such a message fails the send.
        chunk_max_size: a smaller limit for metadata + payload of one chunk.
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
        send_timeout: float = 30.0,
        chunking: bool = True,
        chunk_max_size: int | None = None,
    ) -> None:
        if chunk_max_size is not None and chunk_max_size < 1024:
            msg = f"chunk_max_size must be at least 1024 bytes, not {chunk_max_size}"
            raise ClientError(msg)
        self.lookup = lookup
        self.topic = topic
        self._codec = codec_by_name(compression)
        self._batching = batching
        self._max_messages = batch_max_messages if batching else 1
        self._max_bytes = batch_max_bytes
        self._max_delay = batch_max_delay
        self._max_pending = max(max_pending_messages, self._max_messages)
        self._send_timeout = send_timeout
        self._chunking = chunking
        self._chunk_max_size = chunk_max_size
        self._user_name = producer_name
        self.name = producer_name or ""
        self._epoch = 0
        self._lock = threading.Condition()
        self._items: list[_Item] = []
        self._bytes = 0
        self._opened_at = 0.0
        self._pending: OrderedDict[int, _Batch] = OrderedDict()
        self._pending_messages = 0
        self._error: PulsarError | None = None
        self._conn: Connection | None = None
        self._producer_id = -1
        self._next_seq = 0
        self.last_sequence_id = -1
        self._closed = False
        self._reconnecting = False
        self._reconnect_again: str | None = None
        self._create(first=True)
        self._timer = threading.Thread(target=self._timer_loop, daemon=True,
                                       name=f"pulsar-producer-{topic}")
        self._timer.start()

    # -- creation ------------------------------------------------------------------

    def _create(self, *, first: bool) -> None:
        conn = self.lookup.connection_for(self.topic)
        producer_id = conn.new_id("producer")
        conn.add_handler("producer", producer_id, self)
        command = pb.CommandProducer(
            topic=str(self.topic), producer_id=producer_id, request_id=conn.new_id("request"),
            epoch=self._epoch, user_provided_producer_name=self._user_name is not None,
        )
        if self.name:
            command.producer_name = self.name
        try:
            frame = conn.request(T(type=T.PRODUCER, producer=command))
        except BaseException:
            conn.remove_handler("producer", producer_id)
            raise
        success = frame.command.producer_success
        self.name = success.producer_name
        if first:
            #: The broker's last persisted sequence id for this producer name when it
            #: was created (-1: none, or no deduplication).
            self.last_sequence_id = success.last_sequence_id
            self._next_seq = max(success.last_sequence_id + 1, 0)
        self._conn, self._producer_id = conn, producer_id

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
        head, size = _head(key, properties)
        null = value is None
        payload = b"" if null else bytes(value)
        pre = _pre(head, payload, _tail(event_time, isinstance(key, bytes)))
        with self._lock:
            self._raise_if_failed()
            self._queue(sequence_id, pre, null, payload, size + len(payload))
        return True

    def _send_encoded(
        self, sequence_id: int | None, pre: bytes, null: bool, value: bytes, size: int
    ) -> bool:
        """:meth:`send` of a message already encoded by :class:`_Rows`."""
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
    def send_batch(self, table, first_sequence_id: int | None = None) -> int:
        """Send the rows of an Arrow table: ``value`` (plus optional ``key``,
        ``properties`` and ``eventTime``); with ``first_sequence_id``, row i gets
        sequence id ``first_sequence_id + i``. Returns the rows sent (replays the
        broker already has are skipped, see :meth:`send`)."""
        rows = _Rows(table)
        last = self.last_sequence_id
        sent = 0
        with self._lock:
            self._raise_if_failed()
            queue = self._queue
            seqs: range | list[None] = (
                range(first_sequence_id, first_sequence_id + rows.n)
                if first_sequence_id is not None else [None] * rows.n
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
        items, self._items, self._bytes = self._items, [], 0
        if not items:
            return
        batched = self._batching if batched is None else batched
        count = len(items)
        while self._pending_messages + count > self._max_pending and self._error is None:
            if not self._lock.wait(self._send_timeout):
                msg = f"producer on {self.topic}: no receipts for {self._send_timeout:g} s"
                self._error = OperationTimeout(msg)
        self._raise_if_failed()
        # Items carry their ids (consecutive unless given explicitly).
        first, last = items[0][0], items[-1][0]
        meta = pb.MessageMetadata(
            producer_name=self.name, sequence_id=first, publish_time=int(time.time() * 1000),
        )
        if batched:
            payload = _encode_items(items)
            meta.num_messages_in_batch = count
            meta.highest_sequence_id = last
        else:
            smm = _smm(items[0])
            payload = items[0][3]
            meta.properties.extend(smm.properties)
            for name in ("partition_key", "partition_key_b64_encoded", "event_time",
                         "null_value"):
                if smm.HasField(name):
                    setattr(meta, name, getattr(smm, name))
        if self._codec:
            meta.compression = self._codec
            meta.uncompressed_size = len(payload)
            payload = compress(self._codec, payload)
        send = pb.CommandSend(producer_id=0, sequence_id=first, num_messages=count)
        if batched:
            send.highest_sequence_id = last
        metadata = meta.SerializeToString()
        batch = _Batch(first, last, count, send, metadata, payload)
        if len(metadata) + len(payload) > self._message_limit():
            if batched:  # send() keeps batches within the limit
                msg = f"producer {self.name} on {self.topic}: a batch outgrew the message limit"
                raise EncodeError(msg)
            batch.chunks = self._chunk(meta, payload)
            batch.send.is_chunk = True
        self._pending[first] = batch
        self._pending_messages += count
        self._transmit(batch)

    def _message_limit(self) -> int:
        """Metadata + payload of one message at most: the broker's limit, or ours."""
        limit = DEFAULT_MAX_MESSAGE_SIZE
        if self._conn is not None and self._conn.max_message_size:
            limit = self._conn.max_message_size
        if self._chunk_max_size is not None:
            limit = min(limit, self._chunk_max_size)
        return limit

    def _chunk(self, meta: pb.MessageMetadata, payload: bytes) -> list[tuple[bytes, bytes]]:
        """Split one message into chunks whose metadata + payload fit the limit."""
        limit = self._message_limit()
        if not self._chunking:
            msg = (
                f"producer {self.name} on {self.topic}: message {meta.sequence_id} is "
                f"{len(payload)} bytes, over the {limit}-byte message limit, and chunking "
                "is off"
            )
            raise ClientError(msg)
        meta.uuid = f"{self.name}-{meta.sequence_id}"
        meta.total_chunk_msg_size = len(payload)
        meta.num_chunks_from_msg = 1
        meta.chunk_id = 0
        # Chunk metadata only grows by the varints of the chunk fields: leave room.
        room = limit - meta.ByteSize() - 32
        if room < 1:
            msg = f"producer {self.name} on {self.topic}: metadata alone exceeds {limit} bytes"
            raise ClientError(msg)
        count = -(-len(payload) // room)
        meta.num_chunks_from_msg = count
        chunks = []
        for i in range(count):
            meta.chunk_id = i
            chunks.append((meta.SerializeToString(), payload[i * room : (i + 1) * room]))
        return chunks

    def _transmit(self, batch: _Batch) -> None:
        conn = self._conn
        if conn is None or self._reconnecting:
            return  # the reconnect resends everything pending
        # Encoded at each transmit: the producer id changes on a reconnect.
        batch.send.producer_id = self._producer_id
        command = T(type=T.SEND, send=batch.send)
        if batch.chunks is None:
            frames = [encode_payload_command(command, batch.metadata, batch.payload)]
        else:
            frames = [
                encode_payload_command(command, metadata, payload)
                for metadata, payload in batch.chunks[batch.chunks_confirmed :]
            ]
        with contextlib.suppress(ConnectionClosed):  # connection_closed() reconnects
            for frame in frames:
                conn.send(frame)

    def flush(self, timeout: float | None = None) -> None:
        """Send the open batch and wait until every message is confirmed.

        Raises:
            PulsarError: a batch failed for good, or receipts did not come in time.
        """
        wait = self._send_timeout if timeout is None else timeout
        deadline = time.monotonic() + wait
        with self._lock:
            self._seal()
            while self._pending and self._error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = (
                        f"producer {self.name} on {self.topic}: {self._pending_messages} "
                        f"messages unconfirmed after {wait:g} s"
                    )
                    raise OperationTimeout(msg)
                self._lock.wait(left)
            self._raise_if_failed()

    def close(self) -> None:
        """Flush, then close the producer on the broker."""
        try:
            self.flush()
        finally:
            with self._lock:
                self._closed = True
                self._lock.notify_all()
            conn, producer_id = self._conn, self._producer_id
            if conn is not None and not conn.closed:
                conn.remove_handler("producer", producer_id)
                close = pb.CommandCloseProducer(producer_id=producer_id,
                                                request_id=conn.new_id("request"))
                try:
                    conn.request(T(type=T.CLOSE_PRODUCER, close_producer=close), timeout=5)
                except PulsarError as exc:
                    log.debug("closing producer %s: %s", self.name, exc)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            msg = f"producer {self.name} on {self.topic} is closed"
            raise ClientError(msg)

    def _timer_loop(self) -> None:
        while True:
            time.sleep(self._max_delay)
            with self._lock:
                if self._closed:
                    return
                if self._items and time.monotonic() - self._opened_at >= self._max_delay:
                    try:
                        self._seal()
                    except PulsarError as exc:  # raised to the next sender
                        if self._error is None:
                            self._error = exc
                            self._lock.notify_all()

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
                        error.error, error.message,
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
            conn.remove_handler("producer", self._producer_id)
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
                    self._conn.remove_handler("producer", self._producer_id)
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


def partition_key_text(key: str | bytes) -> str:
    """The partition key as the wire carries it: bytes keys are base64 text."""
    return key if isinstance(key, str) else base64.b64encode(key).decode()


def _checked_columns(table: pa.Table | pa.RecordBatch) -> set[str]:
    """The table's column names; ClientError unless ``value`` plus only key,
    properties and eventTime."""
    names = set(table.schema.names)
    allowed = {"value", "key", "properties", "eventTime"}
    if "value" not in names or not names <= allowed:
        msg = (
            f"send_batch needs a 'value' column and accepts only {sorted(allowed)}; "
            f"got {sorted(names)}"
        )
        raise ClientError(msg)
    return names


def send_rows(send: Callable[..., bool], table, first_sequence_id: int | None = None) -> int:
    """Call ``send(value, key, properties, event_time[, sequence_id])`` for each row of
    an Arrow table; return how many calls returned True.

    Raises:
        ClientError: a column other than value, key, properties and eventTime,
            or no value column; the message lists the accepted ones.
    """
    names = _checked_columns(table)
    values = table.column("value").to_pylist()
    keys = table.column("key").to_pylist() if "key" in names else None
    props = table.column("properties").to_pylist() if "properties" in names else None
    times = table.column("eventTime").to_pylist() if "eventTime" in names else None
    sent = 0
    for i, value in enumerate(values):
        event = times[i] if times else None
        if event is not None and not isinstance(event, int):
            if isinstance(event, dt.datetime) and event.tzinfo is None:
                event = event.replace(tzinfo=dt.timezone.utc)  # naive = UTC
            event = int(event.timestamp() * 1000)
        extra = () if first_sequence_id is None else (first_sequence_id + i,)
        sent += bool(send(
            value.encode() if isinstance(value, str) else value,
            keys[i] if keys else None,
            dict(props[i]) if props and props[i] else None,
            event,
            *extra,
        ))
    return sent


# -- SingleMessageMetadata bytes without protobuf objects ------------------------------
#
# protobuf writes SingleMessageMetadata fields in field-number order; a queued item
# keeps fields 1-2 (properties, partition_key) and 5-6 (event_time,
# partition_key_b64_encoded) encoded, and :func:`_encode_items` adds payload_size (3),
# sequence_id (8) and null_value (9) around them, byte for byte as
# ``SerializeToString`` would.


def _varint(value: int) -> bytes:
    return _SMALL_VARINTS[value] if 0 <= value < 128 else encode_varint(value)


def _head(key: str | bytes | None, properties: dict[str, str] | None) -> tuple[bytes, int]:
    """Fields 1 and 2 encoded, and the message's share of a batch before its payload."""
    size = 32  # its share of a batch, at most: the item's metadata and framing
    parts = []
    if properties:
        for k, v in properties.items():
            size += 3 * (len(k) + len(v)) + 8
            kb, vb = k.encode(), v.encode()
            kv = b"".join((b"\x0a", _varint(len(kb)), kb, b"\x12", _varint(len(vb)), vb))
            parts += (b"\x0a", _varint(len(kv)), kv)
    if key is not None:
        text = partition_key_text(key)
        size += len(text)
        kb = text.encode()
        parts += (b"\x12", _varint(len(kb)), kb)
    return b"".join(parts), size


def _tail(event_time: int | None, b64: bool) -> bytes:
    """Fields 5 and 6 encoded."""
    if not event_time:
        return b"\x30\x01" if b64 else b""
    if event_time < 0:
        msg = f"event time {event_time} is negative"
        raise ValueError(msg)
    return b"".join((b"\x28", _varint(event_time), b"\x30\x01" if b64 else b""))


def _pre(head: bytes, value: bytes, tail: bytes) -> bytes:
    """Fields 1-6 of an item's metadata: ``head``, payload_size, ``tail``."""
    return b"".join((head, b"\x18", _varint(len(value)), tail))


def _item_body(item: _Item) -> bytes:
    seq, pre, null, _ = item
    return b"".join((pre, b"\x40", _varint(seq), b"\x48\x01" if null else b""))


def _encode_items(items: list[_Item]) -> bytes:
    """A batch payload (before compression), as :func:`~..protocol.batch.encode_batch`
    lays out the same messages."""
    parts: list[bytes] = []
    add = parts.extend
    pack = _U32.pack
    small = _SMALL_VARINTS
    encode = encode_varint
    # Consecutive ids: varints of the first and of each next one, cheaply.
    for seq, pre, null, value in items:
        if null:
            tail = b"".join((b"\x40", _varint(seq), b"\x48\x01"))
        elif seq < 128:
            tail = b"\x40" + small[seq]
        elif seq < 16384:
            tail = bytes((0x40, seq & 0x7F | 0x80, seq >> 7))
        else:
            tail = b"\x40" + encode(seq)
        add((pack(len(pre) + len(tail)), pre, tail, value))
    return b"".join(parts)


def _smm(item: _Item) -> pb.SingleMessageMetadata:
    return pb.SingleMessageMetadata.FromString(_item_body(item))


_UNIT_DIVISORS = {"s": None, "ms": 1, "us": 1000, "ns": 1_000_000}


def _event_millis(column: pa.ChunkedArray | pa.Array) -> list[int | None]:
    """Event times as epoch milliseconds: ints as they are, timestamps in UTC (a
    naive timestamp is taken as UTC)."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        raw = pc.cast(column, pa.timestamp(kind.unit), safe=False).cast(pa.int64())
        divisor = _UNIT_DIVISORS[kind.unit]
        if divisor is None:
            return pc.multiply(raw, 1000).to_pylist()
        if divisor == 1:
            return raw.to_pylist()
        return [None if t is None else t // divisor for t in raw.to_pylist()]
    out: list[int | None] = []
    for event in column.to_pylist():
        if event is None or isinstance(event, int):
            out.append(event)
        else:
            if isinstance(event, dt.datetime) and event.tzinfo is None:
                event = event.replace(tzinfo=dt.timezone.utc)
            out.append(int(event.timestamp() * 1000))
    return out


class _Rows:
    """The rows of an Arrow table for :meth:`Producer.send_batch`, encoded column by
    column: per row its metadata head and tail, tombstone flag, payload and size."""

    def __init__(self, table: pa.Table | pa.RecordBatch) -> None:
        names = _checked_columns(table)
        n = self.n = table.num_rows
        column = table.column("value")
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            column = pc.cast(column, pa.binary())
        values = column.to_pylist()
        self.nulls = [v is None for v in values] if column.null_count else [False] * n
        if column.null_count:
            values = [b"" if v is None else v for v in values]
        self.values = values
        self.keys = keys = table.column("key").to_pylist() if "key" in names else None
        props = table.column("properties").to_pylist() if "properties" in names else None
        times = _event_millis(table.column("eventTime")) if "eventTime" in names else None
        if keys is None and props is None:
            heads: list[bytes] | None = None
            self.sizes: list[int] = [32 + len(v) for v in values]
        else:
            pairs = [
                _head(keys[i] if keys else None, dict(props[i]) if props and props[i] else None)
                for i in range(n)
            ]
            heads = [h for h, _ in pairs]
            self.sizes = [z + len(v) for (_, z), v in zip(pairs, values, strict=True)]
        if times is None and (keys is None or not any(isinstance(k, bytes) for k in keys)):
            tails: list[bytes] | None = None
        else:
            tails = [
                _tail(times[i] if times else None, bool(keys) and isinstance(keys[i], bytes))
                for i in range(n)
            ]
        if heads is None and tails is None:
            # payload_size alone: the varints of the lengths, shared by equal lengths.
            sizes: dict[int, bytes] = {}
            pres = []
            for v in values:
                length = len(v)
                pre = sizes.get(length)
                if pre is None:
                    pre = sizes[length] = b"\x18" + _varint(length)
                pres.append(pre)
            self.pres: list[bytes] = pres
        else:
            empty = [b""] * n
            self.pres = [
                _pre(h, v, t)
                for h, v, t in zip(heads or empty, values, tails or empty, strict=True)
            ]
