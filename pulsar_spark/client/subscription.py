"""Named durable subscriptions, for progress a broker can show.

Reads never need one: they use non-durable subscriptions that vanish with
the consumer. A streaming query may still want the broker's backlog figures
to show how far it got. :func:`acknowledge_cumulative` moves a named
durable subscription to a position and leaves; :func:`unsubscribe` deletes
it. Both attach a consumer that asks for no messages (no FLOW)::

    SUBSCRIBE (durable, Exclusive, initial position earliest)
    ACK (Cumulative, ledger:entry)      no request id: brokers differ on ACK_RESPONSE
    CLOSE_CONSUMER -> SUCCESS           the broker handles a connection's commands in
                                        order, so the ack was taken before this answer
"""

from __future__ import annotations

import time
import uuid

from ..protocol import PulsarApi_pb2 as pb
from ..protocol.errors import PulsarError
from ..protocol.framing import Frame, encode_command
from ..protocol.message_id import MessageId
from .connection import Connection
from .errors import ClientError, OperationTimeout
from .lookup import LookupService
from .names import TopicName
from .retry import Backoff, may_retry

__all__ = ["acknowledge_cumulative", "unsubscribe"]

T = pb.BaseCommand


class _Ignore:
    """Handler for a consumer that asked for nothing."""

    def frame_received(self, frame: Frame) -> None:
        pass

    def connection_closed(self, error: PulsarError) -> None:
        pass


def _attached(
    lookup: LookupService, topic: TopicName, subscription: str, deadline: float
) -> tuple[Connection, int]:
    """A consumer on the durable ``subscription``, retried until ``deadline``."""
    if not subscription or subscription.startswith("reader-"):
        msg = f"subscription name {subscription!r} is empty or looks like a reader's"
        raise ClientError(msg)
    backoff = Backoff()
    while True:
        conn = lookup.connection_for(topic)
        consumer_id = conn.new_id("consumer")
        conn.add_handler("consumer", consumer_id, _Ignore())
        subscribe = pb.CommandSubscribe(
            topic=str(topic), subscription=subscription, subType=pb.CommandSubscribe.Exclusive,
            consumer_id=consumer_id, request_id=conn.new_id("request"), durable=True,
            initialPosition=pb.CommandSubscribe.Earliest,
            consumer_name=f"pulsar-spark-{uuid.uuid4().hex[:8]}",
        )
        try:
            conn.request(T(type=T.SUBSCRIBE, subscribe=subscribe))
            return conn, consumer_id
        except PulsarError as exc:
            conn.remove_handler("consumer", consumer_id)
            # ConsumerBusy: a previous attachment is still being closed.
            delay = backoff.next()
            if not may_retry(exc) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)


def _detach(conn: Connection, consumer_id: int) -> None:
    conn.remove_handler("consumer", consumer_id)
    close = pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=conn.new_id("request"))
    conn.request(T(type=T.CLOSE_CONSUMER, close_consumer=close))


def acknowledge_cumulative(
    lookup: LookupService,
    topic: TopicName,
    subscription: str,
    message_id: MessageId,
    *,
    operation_timeout: float = 30.0,
) -> None:
    """Mark everything up to and including entry ``message_id`` consumed on the
    durable ``subscription`` of ``topic`` (one partition), creating it if needed.

    Only whole entries are acknowledged: the batch index is ignored, so pass the
    last entry consumed entirely.
    """
    if message_id.is_earliest or message_id.is_latest or message_id.entry < 0:
        msg = f"cannot acknowledge {message_id} on {topic}: not a message id"
        raise ClientError(msg)
    deadline = time.monotonic() + operation_timeout
    conn, consumer_id = _attached(lookup, topic, subscription, deadline)
    try:
        ack = pb.CommandAck(
            consumer_id=consumer_id, ack_type=pb.CommandAck.Cumulative,
            message_id=[message_id.to_pb(with_batch_index=False)],
        )
        conn.send(encode_command(T(type=T.ACK, ack=ack)))
    finally:
        try:
            _detach(conn, consumer_id)
        except OperationTimeout as exc:
            msg = f"acknowledging {message_id} on {topic} ({subscription}): {exc}"
            raise OperationTimeout(msg) from exc


def unsubscribe(
    lookup: LookupService, topic: TopicName, subscription: str, *, operation_timeout: float = 30.0
) -> None:
    """Delete the durable ``subscription`` of ``topic`` (one partition)."""
    deadline = time.monotonic() + operation_timeout
    conn, consumer_id = _attached(lookup, topic, subscription, deadline)
    request = pb.CommandUnsubscribe(consumer_id=consumer_id, request_id=conn.new_id("request"))
    try:
        conn.request(T(type=T.UNSUBSCRIBE, unsubscribe=request))
    finally:
        conn.remove_handler("consumer", consumer_id)
