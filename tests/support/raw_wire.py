"""Bare wire peers on our connection: MESSAGE frames as the broker sent them, prepared SENDs.

For tests that must see or shape the bytes themselves (encryption interop):
:func:`raw_messages` subscribes a bare consumer and returns the first frames
of a topic; :func:`send_prepared` creates a bare producer and sends each
(metadata, payload) as one SEND, as a client would after encoding, batching,
compressing and encrypting, and waits for the receipts. Both talk to the
broker that owns the topic, found by a lookup first. :func:`chunk_metadata`
is the metadata of one chunk of an uncompressed chunked message;
:func:`first_chunk_only` is an entry of a message whose other chunks never come
(its producer stopped mid-message).
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Sequence

from pulsar_spark.client.net.connection import Connection
from pulsar_spark.client.net.dispatch import IdKind
from pulsar_spark.protocol import commands, pb
from pulsar_spark.protocol.framing import Frame, encode_payload_command

T = pb.BaseCommand

__all__ = ["chunk_metadata", "first_chunk_only", "raw_messages", "send_prepared"]


def _address(service_url: str, topic: str) -> tuple[str, int]:
    """The broker that owns ``topic``, after a lookup: a topic nothing has looked up yet
    is refused by a fresh Apache Pulsar (ServiceNotReady, "Please redo the lookup")."""
    from pulsar_spark.client import PulsarClient
    from pulsar_spark.client.names import parse_topic

    with PulsarClient(service_url) as client:
        found = client._lookup.lookup(parse_topic(topic))
    return found.host, found.port


class _Collect:
    def __init__(self, kinds: tuple[int, ...]) -> None:
        self.kinds = kinds
        self.frames: list[Frame] = []
        self.got = threading.Condition()
        self.error: Exception | None = None

    def frame_received(self, frame: Frame) -> None:
        with self.got:
            if frame.command.type in self.kinds:
                self.frames.append(frame)
            self.got.notify_all()

    def connection_closed(self, error: Exception) -> None:
        with self.got:
            self.error = error
            self.got.notify_all()

    def messages(self) -> int:
        """Messages in the frames so far (a batch counts its messages)."""
        return sum(
            f.metadata.num_messages_in_batch
            if f.metadata is not None and f.metadata.HasField("num_messages_in_batch")
            else 1
            for f in self.frames
        )

    def wait_for(self, count: int, deadline: float, what: str, *, messages: bool = False) -> None:
        with self.got:
            while (self.messages() if messages else len(self.frames)) < count:
                assert self.error is None, f"{what}: {self.error}"
                left = deadline - time.monotonic()
                assert left > 0, f"{what}: only {len(self.frames)} of {count} came"
                self.got.wait(left)


def chunk_metadata(uuid: str, chunk_id: int, count: int, total: int) -> pb.MessageMetadata:
    """Chunk ``chunk_id`` of ``count`` of message ``uuid``, ``total`` bytes uncompressed."""
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    meta.uuid = uuid
    meta.chunk_id = chunk_id
    meta.num_chunks_from_msg = count
    meta.total_chunk_msg_size = total
    meta.uncompressed_size = total
    return meta


def first_chunk_only(uuid: str, count: int = 3, size: int = 10) -> tuple[pb.MessageMetadata, bytes]:
    """The first of ``count`` chunks of ``size`` bytes of message ``uuid``, for
    :func:`send_prepared`: alone, a chunked message that is never completed."""
    return chunk_metadata(uuid, 0, count, count * size), b"o" * size


def raw_messages(service_url: str, topic: str, count: int, timeout: float = 30.0) -> list[Frame]:
    """The MESSAGE frames of ``topic`` from the earliest that hold its first ``count``
    messages (a batch counts its messages, a chunk one)."""
    with Connection.open(*_address(service_url, topic)) as conn:
        key = conn.new_key(IdKind.CONSUMER)
        inbox = _Collect((T.MESSAGE,))
        conn.add_handler(key, inbox)
        conn.request(
            commands.subscribe(
                conn.new_id(IdKind.REQUEST),
                key.ident,
                topic=topic,
                subscription=f"raw-{secrets.token_hex(4)}",
                durable=False,
                earliest=True,
            )
        )
        conn.send_command(commands.flow(key.ident, 10_000))
        inbox.wait_for(count, time.monotonic() + timeout, f"messages of {topic}", messages=True)
        return list(inbox.frames)


def send_prepared(
    service_url: str,
    topic: str,
    entries: Sequence[tuple[pb.MessageMetadata, bytes]],
    *,
    encrypted: bool = True,
    timeout: float = 30.0,
) -> None:
    """Send each (metadata, payload) as one SEND from a bare producer; wait for all receipts.

    Sequence ids and producer name are set here; a batch's message count comes from
    its ``num_messages_in_batch``; a chunk is sent as one (``is_chunk``).
    """
    with Connection.open(*_address(service_url, topic)) as conn:
        key = conn.new_key(IdKind.PRODUCER)
        receipts = _Collect((T.SEND_RECEIPT, T.SEND_ERROR))
        conn.add_handler(key, receipts)
        command = commands.producer(
            conn.new_id(IdKind.REQUEST),
            key.ident,
            topic=topic,
            epoch=0,
            producer_name=None,
            user_provided_name=False,
        )
        command.producer.encrypted = encrypted
        answer = conn.request(command)
        name = answer.command.producer_success.producer_name
        sequence = 0
        for metadata, payload in entries:
            metadata.producer_name = name
            if not metadata.HasField("publish_time"):
                metadata.publish_time = int(time.time() * 1000)
            count = (
                metadata.num_messages_in_batch if metadata.HasField("num_messages_in_batch") else 1
            )
            chunk = metadata.num_chunks_from_msg > 1
            if not chunk or metadata.chunk_id == 0:
                sequence += 1
            metadata.sequence_id = sequence
            send = commands.send(
                key.ident, sequence_id=sequence, num_messages=count, is_chunk=chunk
            )
            conn.send(encode_payload_command(send, metadata, payload))
        receipts.wait_for(len(entries), time.monotonic() + timeout, f"receipts from {topic}")
        errors = [f for f in receipts.frames if f.command.type == T.SEND_ERROR]
        assert not errors, f"SEND_ERROR from {topic}: {errors[0].command.send_error}"
