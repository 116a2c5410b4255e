"""Operations on named durable subscriptions: move one, delete one, hold one.

Readers use non-durable subscriptions that vanish with the consumer; what keeps
data on the broker is a durable subscription (a stream's is held between
triggers by :class:`~.last_ids.LastIds`). :func:`acknowledge_cumulative` moves a
named durable subscription to a position and leaves; :func:`unsubscribe` deletes
it. Both attach a consumer that asks for no messages (no FLOW)::

    SUBSCRIBE (durable, Exclusive, initial position earliest)
    ACK (Cumulative, ledger:entry)      no request id: brokers differ on ACK_RESPONSE
    CLOSE_CONSUMER -> SUCCESS           the broker handles a connection's commands in
                                        order, so the ack was taken before this answer

:func:`hold_subscription` keeps such a consumer attached: while it is, no other
client can attach to the subscription (ConsumerBusy), which makes it a lock that
the broker releases by itself when the holder's connection ends (its process died).
"""

from __future__ import annotations

import time
import uuid

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import PulsarError, ServerError
from pulsar_spark.protocol.framing import Frame
from pulsar_spark.protocol.ids.message_id import MessageId

from ..errors import ClientError, OperationTimeout
from ..names import TopicName
from ..net.connection import Connection
from ..net.dispatch import IdKind, Key
from ..net.lookup import LookupService
from ..retry import Backoff, may_retry
from .consumer import attach_consumer

__all__ = [
    "SubscriptionHold",
    "acknowledge_cumulative",
    "ensure_subscription",
    "hold_subscription",
    "unsubscribe",
]


class _Ignore:
    """Handler for a consumer that asked for nothing."""

    def frame_received(self, frame: Frame) -> None:
        pass

    def connection_closed(self, error: PulsarError) -> None:
        pass


def _attached(
    lookup: LookupService,
    topic: TopicName,
    subscription: str,
    deadline: float,
    *,
    create_topic: bool = True,
    earliest: bool = True,
    wait_busy: bool = True,
) -> tuple[Connection, Key]:
    """A consumer on the durable ``subscription``, retried until ``deadline``
    (``create_topic=False``: a missing topic raises TopicNotFound, not created;
    ``wait_busy=False``: another consumer attached raises ConsumerBusy at once)."""
    if not subscription or subscription.startswith("reader-"):
        msg = f"subscription name {subscription!r} is empty or looks like a reader's"
        raise ClientError(msg)
    backoff = Backoff()
    while True:
        conn = lookup.connection_for(topic)
        try:
            key = attach_consumer(
                conn,
                _Ignore(),
                lambda request_id, consumer_id: commands.subscribe(
                    request_id,
                    consumer_id,
                    topic=str(topic),
                    subscription=subscription,
                    durable=True,
                    earliest=earliest,
                    consumer_name=f"pulsar-spark-{uuid.uuid4().hex[:8]}",
                    create_topic=create_topic,
                ),
            )
        except PulsarError as exc:
            # ConsumerBusy (a previous attachment still being closed) is retried too.
            delay = backoff.next()
            busy = isinstance(exc, ServerError) and exc.code == pb.ConsumerBusy
            if (
                (busy and not wait_busy)
                or not may_retry(exc)
                or time.monotonic() + delay > deadline
            ):
                raise
            time.sleep(delay)
        else:
            return conn, key


def _detach(conn: Connection, key: Key) -> None:
    conn.remove_handler(key)
    conn.request(commands.close_consumer(conn.new_id(IdKind.REQUEST), key.ident))


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
    conn, key = _attached(lookup, topic, subscription, deadline)
    try:
        conn.send_command(commands.ack_cumulative(key.ident, message_id))
    finally:
        try:
            _detach(conn, key)
        except OperationTimeout as exc:
            msg = f"acknowledging {message_id} on {topic} ({subscription}): {exc}"
            raise OperationTimeout(msg) from exc


def ensure_subscription(
    lookup: LookupService,
    topic: TopicName,
    subscription: str,
    *,
    earliest: bool = True,
    operation_timeout: float = 30.0,
) -> None:
    """Make the durable ``subscription`` of ``topic`` (one partition) at its earliest
    message (or, not ``earliest``, after its last), unless it exists: from then on the
    broker keeps what it has not acknowledged (and a topic with a subscription is not
    deleted as inactive)."""
    deadline = time.monotonic() + operation_timeout
    conn, key = _attached(lookup, topic, subscription, deadline, earliest=earliest)
    _detach(conn, key)


def unsubscribe(
    lookup: LookupService, topic: TopicName, subscription: str, *, operation_timeout: float = 30.0
) -> bool:
    """Delete the durable ``subscription`` of ``topic`` (one partition); False when
    the topic does not exist (it is not created for this)."""
    deadline = time.monotonic() + operation_timeout
    try:
        conn, key = _attached(lookup, topic, subscription, deadline, create_topic=False)
    except ServerError as exc:
        if exc.code == pb.TopicNotFound:
            return False
        raise
    try:
        conn.request(commands.unsubscribe(conn.new_id(IdKind.REQUEST), key.ident))
    finally:
        conn.remove_handler(key)
    return True


class SubscriptionHold:
    """A consumer kept attached to a durable subscription (:func:`hold_subscription`);
    a context manager that detaches it."""

    def __init__(self, topic: TopicName, subscription: str, conn: Connection, key: Key) -> None:
        self.topic, self.subscription = topic, subscription
        self._conn, self._key = conn, key
        self._attached = True

    @property
    def held(self) -> bool:
        """Whether the consumer is still attached (its connection may have ended since)."""
        return self._attached and not self._conn.closed

    def release(self) -> None:
        """Detaches the consumer; the subscription stays."""
        if self._attached:
            self._attached = False
            if not self._conn.closed:
                _detach(self._conn, self._key)

    def delete(self) -> None:
        """Deletes the subscription (through the held consumer), ending the hold."""
        if not self.held:
            msg = f"the hold of {self.subscription} on {self.topic} ended: cannot delete it"
            raise ClientError(msg)
        self._attached = False
        try:
            self._conn.request(
                commands.unsubscribe(self._conn.new_id(IdKind.REQUEST), self._key.ident)
            )
        finally:
            self._conn.remove_handler(self._key)

    def __enter__(self) -> SubscriptionHold:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def hold_subscription(
    lookup: LookupService,
    topic: TopicName,
    subscription: str,
    *,
    create: bool = True,
    operation_timeout: float = 30.0,
) -> SubscriptionHold:
    """Attach to the durable ``subscription`` of ``topic`` (one partition), made at the
    topic's end if it does not exist, and stay attached (see the module docstring).

    Raises:
        ServerError: ConsumerBusy at once when another client holds it; TopicNotFound
            when the topic does not exist and not ``create``.
    """
    deadline = time.monotonic() + operation_timeout
    conn, key = _attached(
        lookup, topic, subscription, deadline, create_topic=create, earliest=False, wait_busy=False
    )
    return SubscriptionHold(topic, subscription, conn, key)
