"""The last message ids of many partitions at once, kept ready between calls: :class:`LastIds`.

A stream asks, every trigger, where each of its partitions ends. GET_LAST_MESSAGE_ID
needs a consumer on the partition, so a one-off question costs four round trips
(LOOKUP, SUBSCRIBE, GET_LAST_MESSAGE_ID, CLOSE_CONSUMER). :class:`LastIds` keeps,
per partition, what the first question learnt::

    the owner broker's address      looked up once, again only after a failure
    a non-durable consumer          subscribed once (no FLOW: it receives nothing)
    its connection                  the client's pooled one to that broker

so that later calls send one GET_LAST_MESSAGE_ID per partition, all in flight at
once (requests on a connection are matched by request id; a pool of threads
waits for the answers), about one round trip in all.

A consumer the broker closes (unload, topic deleted) or whose connection is lost
(broker restart) is dropped when that happens, and the partition is looked up
and subscribed again at its next question, retried with backoff within the
operation timeout as the client retries everything (:mod:`.retry`). Partitions
no longer asked about are closed at the end of a call; :meth:`LastIds.close`
closes everything.

**Durable** (``subscription`` given): the consumers are attached to that durable
subscription instead (Exclusive; created at the partition's earliest message if
it does not exist yet, so that from then on the broker keeps every message it has
not acknowledged). This is how a stream holds its data on a broker without
retention: :meth:`LastIds.ends` answers, with each last id, the subscription's
mark-delete position (how far it is acknowledged: the broker may delete what lies
before it, and nothing after it), and :meth:`LastIds.acknowledge` moves it by
cumulative ack. Consumers ask for no messages (no FLOW), so attaching one reads
nothing; closing them leaves the subscription on the broker. A second consumer
on the same subscription (another query using it) is refused by the broker with
ConsumerBusy, retried until the operation timeout, then raised.

A partition whose subscription is expected to exist (:meth:`LastIds.expect`: it
was attached before, or a checkpoint says the stream read it) is attached with
``force_topic_creation`` off and, should the subscription be gone, makes it anew
at the *latest* message: a topic the broker answers TopicNotFound for was deleted
(:attr:`PartitionEnd.deleted`; it is then subscribed again, created, from its
earliest message; where the broker refuses to create it again, a partition of a
partitioned topic deleted with its metadata, it is answered empty and deleted), and a
subscription made anew on a topic with messages sits at
the last of them, so its mark-delete position shows it did not hold what came
before. Elsewhere a new subscription starts at the earliest message.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import PulsarError, ServerError
from pulsar_spark.protocol.framing import Frame
from pulsar_spark.protocol.ids.message_id import LATEST, MessageId

from ..errors import ClientError
from ..names import TopicName
from ..net.connection import Connection
from ..net.dispatch import IdKind, Key
from ..net.lookup import BrokerAddress, LookupService
from ..retry import Backoff, may_retry
from .consumer import attach_consumer, last_and_mark_delete
from .sub_names import fresh_name

__all__ = ["LastIds", "PartitionEnd"]

log = logging.getLogger(__name__)
T = pb.BaseCommand
_R = TypeVar("_R")

#: Threads waiting for answers at most (requests in flight at once).
MAX_IN_FLIGHT = 64
#: Seconds a durable subscription's consumer waits for the broker to let go of a
#: previous holder (ConsumerBusy): two keepalive rounds of a driver that died.
BUSY_WAIT = 90.0


@dataclass(frozen=True)
class PartitionEnd:
    """What one GET_LAST_MESSAGE_ID told of a partition."""

    #: The last message's id; None: the partition is empty.
    last: MessageId | None
    #: The durable subscription's mark-delete position (an entry, batch index -1;
    #: entry -1: before its ledger's first entry); None without a durable
    #: subscription, or when the broker does not tell it.
    mark_delete: MessageId | None = None
    #: The partition was found deleted (TopicNotFound) where its subscription was
    #: expected; it was created again, with the subscription at its first message, or,
    #: where the broker refuses to create it again, it is empty (``last`` None).
    deleted: bool = False


#: The end of a partition deleted for good: deleted where its subscription was expected,
#: and the broker refuses to create it again (a partition of a deleted partitioned topic).
GONE = PartitionEnd(None, None, deleted=True)


class _Probe:
    """A consumer on one partition that only asks for its last id (and, on a durable
    subscription, acknowledges); it goes stale when the broker closes it or the
    connection is lost."""

    def __init__(
        self,
        conn: Connection,
        topic: TopicName,
        prefix: str | None,
        compacted: bool,
        subscription: str | None = None,
        expected: bool = False,
    ) -> None:
        self.conn, self.topic, self.prefix, self.compacted = conn, topic, prefix, compacted
        self.subscription = subscription
        #: The durable subscription should exist: attach without creating the topic,
        #: and make a missing subscription at the latest message.
        self.expected = expected
        self.stale = threading.Event()
        self.key: Key | None = None

    # Handler: frames for the consumer (it asked for no message: only closes come).
    def frame_received(self, frame: Frame) -> None:
        if frame.command.type in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
            self.stale.set()

    def connection_closed(self, error: PulsarError) -> None:
        self.stale.set()

    def attach(self) -> None:
        durable = self.subscription is not None
        expected = durable and self.expected
        self.key = attach_consumer(
            self.conn,
            self,
            lambda request_id, consumer_id: commands.subscribe(
                request_id,
                consumer_id,
                topic=str(self.topic),
                subscription=self.subscription or fresh_name(self.prefix),
                durable=durable,
                # A new durable subscription holds everything from the first message on.
                earliest=durable and not expected,
                create_topic=not expected,
                start_message_id=None if durable else LATEST,
                consumer_name=f"pulsar-spark-{uuid.uuid4().hex[:8]}" if durable else None,
                # A compacted reader's last id is the compacted view's (Apache Pulsar
                # answers the compacted ledger's last entry when nothing follows it).
                read_compacted=self.compacted,
            ),
        )

    @property
    def usable(self) -> bool:
        return self.key is not None and not self.stale.is_set() and not self.conn.closed

    def end(self) -> PartitionEnd:
        assert self.key is not None
        last, mark_delete = last_and_mark_delete(self.conn, self.key.ident, self.topic)
        return PartitionEnd(last, mark_delete if self.subscription is not None else None)

    def acknowledge(self, message_id: MessageId) -> None:
        """ACK (Cumulative) of entry ``message_id`` on the durable subscription."""
        assert self.key is not None and self.subscription is not None
        self.conn.send_command(commands.ack_cumulative(self.key.ident, message_id))

    def close(self) -> None:
        """Detach and close the consumer on the broker; failures are only logged."""
        key, self.key = self.key, None
        if key is None:
            return
        self.conn.remove_handler(key)
        if self.conn.closed or self.stale.is_set():
            return
        try:
            self.conn.request(
                commands.close_consumer(self.conn.new_id(IdKind.REQUEST), key.ident), timeout=5
            )
        except PulsarError as exc:
            log.debug("closing the last-id consumer on %s: %s", self.topic, exc)


class LastIds:
    """Last message ids of partitions, with a consumer kept per partition (see the
    module docstring). Thread-safe; close it (or use ``with``).

    Args:
        lookup: the client's discovery and connection pool.
        operation_timeout: how long one partition's answer, retries included, may take.
        subscription: the durable subscription the consumers attach to (see the
            module docstring); None: non-durable consumers, nothing left behind.
    """

    def __init__(
        self,
        lookup: LookupService,
        *,
        operation_timeout: float = 30.0,
        subscription: str | None = None,
    ) -> None:
        if subscription is not None and (not subscription or subscription.startswith("reader-")):
            msg = f"subscription name {subscription!r} is empty or looks like a reader's"
            raise ClientError(msg)
        self.lookup = lookup
        self.operation_timeout = operation_timeout
        self.subscription = subscription
        self._lock = threading.Lock()
        self._probes: dict[TopicName, _Probe] = {}
        self._addresses: dict[TopicName, BrokerAddress] = {}
        #: Partitions whose durable subscription should exist (see the module docstring).
        self._expected: set[TopicName] = set()
        #: Partitions found deleted, not reported yet.
        self._deleted: set[TopicName] = set()
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False
        #: Subscriptions made (the first call's, and those after a failure).
        self.attached = 0

    def __enter__(self) -> LastIds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get(self, topics: Sequence[TopicName]) -> dict[TopicName, MessageId | None]:
        """The last message id of each partition in ``topics`` (None: it is empty),
        asked all at once. Consumers kept for partitions not in ``topics`` are closed.

        Raises:
            PulsarError: a partition's error that retrying cannot help (e.g.
                AuthorizationError), or its last retriable one at the deadline;
                the message names the partition.
        """
        return {topic: end.last for topic, end in self.ends(topics).items()}

    def expect(self, topics: Sequence[TopicName]) -> None:
        """The durable subscription should exist on ``topics`` (a checkpoint says the
        stream read them): see the module docstring."""
        with self._lock:
            self._expected.update(topics)

    def ends(
        self, topics: Sequence[TopicName], *, close_others: bool = True
    ) -> dict[TopicName, PartitionEnd]:
        """:meth:`get`, with each partition's mark-delete position on the durable
        subscription (see :class:`PartitionEnd`); ``close_others=False`` keeps the
        consumers of partitions not asked about."""
        return self._each(topics, self._one, close_others=close_others)

    def acknowledge(self, positions: dict[TopicName, MessageId]) -> None:
        """Move the durable subscription of each partition past its entry in
        ``positions`` (cumulative ack; a position before the subscription's is
        ignored by the broker), all at once. The ack has no answer: the broker takes
        a connection's commands in order, so the next question (:meth:`ends`) sees it.

        Raises:
            ClientError: no durable subscription was given.
            PulsarError: as :meth:`get`.
        """
        if self.subscription is None:
            msg = "acknowledging needs a durable subscription"
            raise ClientError(msg)
        for topic, mid in positions.items():
            if mid.is_earliest or mid.is_latest or mid.entry < 0:
                msg = f"cannot acknowledge {mid} on {topic}: not a message id"
                raise ClientError(msg)

        def ack(topic: TopicName, deadline: float) -> None:
            # A partition deleted for good holds nothing: there is nothing to acknowledge.
            self._retried(topic, deadline, lambda probe: probe.acknowledge(positions[topic]), None)

        self._each(list(positions), ack, close_others=False)

    def _each(
        self, topics: Sequence[TopicName], one: Callable[[TopicName, float], _R], *,
        close_others: bool,
    ) -> dict[TopicName, _R]:  # fmt: skip
        if self._closed:
            msg = "the last-id probes are closed"
            raise ClientError(msg)
        wanted = list(dict.fromkeys(topics))
        if close_others:
            self._close_others(set(wanted))
        if not wanted:
            return {}
        deadline = time.monotonic() + self.operation_timeout
        if len(wanted) == 1:
            return {wanted[0]: one(wanted[0], deadline)}
        pool = self._executor()
        futures = [pool.submit(one, topic, deadline) for topic in wanted]
        return {topic: future.result() for topic, future in zip(wanted, futures, strict=True)}

    def close(self) -> None:
        """Close every consumer kept and the threads."""
        with self._lock:
            self._closed = True
            probes = list(self._probes.values())
            self._probes.clear()
            pool, self._pool = self._pool, None
        for probe in probes:
            probe.close()
        if pool is not None:
            pool.shutdown(wait=False)

    # -- one partition -------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(MAX_IN_FLIGHT, thread_name_prefix="last-ids")
            return self._pool

    def _one(self, topic: TopicName, deadline: float) -> PartitionEnd:
        end = self._retried(topic, deadline, _Probe.end, GONE)
        with self._lock:
            if topic not in self._deleted:
                return end
            self._deleted.discard(topic)
        return PartitionEnd(end.last, end.mark_delete, deleted=True)

    def _retried(
        self, topic: TopicName, deadline: float, call: Callable[[_Probe], _R], gone: _R
    ) -> _R:
        """``call`` on the partition's consumer, retried; ``gone`` if the partition was
        deleted for good (see :meth:`_probe`)."""
        backoff = Backoff()
        # A driver that died without closing its connection keeps its Exclusive
        # consumer on the broker until the broker's keepalive finds it gone.
        busy_deadline = max(deadline, time.monotonic() + BUSY_WAIT)
        tries = 0
        while True:
            tries += 1
            try:
                probe = self._probe(topic)
                return gone if probe is None else call(probe)
            except PulsarError as exc:
                self._forget(topic)
                delay = backoff.next()
                busy = isinstance(exc, ServerError) and exc.code == pb.ConsumerBusy
                until = busy_deadline if busy and self.subscription is not None else deadline
                # A first try that spent the deadline on a connection that then closed
                # (a busy machine) still gets one more, on a new connection.
                late = tries > 1 and time.monotonic() + delay > until
                if not may_retry(exc) or late:
                    if hasattr(exc, "add_note"):  # Python 3.11+
                        exc.add_note(self._doing(topic, exc))
                    raise
                log.info("last message id of %s: %s; again in %.1f s", topic, exc, delay)
                time.sleep(delay)

    def _doing(self, topic: TopicName, exc: PulsarError) -> str:
        if self.subscription is None:
            return f"asking for the last message id of {topic}"
        note = f"on the durable subscription {self.subscription!r} of {topic}"
        if isinstance(exc, ServerError) and exc.code == pb.ConsumerBusy:
            note += (
                ": another consumer holds it (is another query running with the same "
                "subscription or checkpoint?)"
            )
        return note

    def _probe(self, topic: TopicName) -> _Probe | None:
        """The partition's consumer, attached now if it has none; None: the partition
        was deleted (TopicNotFound where its subscription was expected) and the broker
        refuses to create it again."""
        with self._lock:
            probe = self._probes.get(topic)
            address = self._addresses.get(topic)
        if probe is not None and probe.usable:
            return probe
        if probe is not None:  # closed by the broker or its connection: look up again
            self._forget(topic)
            address = None
        if address is None:
            address = self.lookup.lookup(topic)
        config = self.lookup.config
        conn = self.lookup.pool.for_broker(address)
        with self._lock:
            expected = self.subscription is not None and topic in self._expected
        probe = _Probe(
            conn, topic, config.subscription_prefix, config.read_compacted, self.subscription,
            expected,
        )  # fmt: skip
        try:
            probe.attach()
        except ServerError as exc:
            if not (expected and exc.code == pb.TopicNotFound):
                raise
            log.warning(
                "%s: deleted, with the durable subscription %r: subscribing again",
                *(topic, self.subscription),
            )
            probe = _Probe(
                conn, topic, config.subscription_prefix, config.read_compacted,
                self.subscription,
            )  # fmt: skip
            try:
                probe.attach()
            except ServerError as again:
                if again.code != pb.TopicNotFound:
                    raise
                # The broker will not make it again: a partition of a partitioned topic
                # whose metadata was deleted with it.
                log.warning("%s: deleted, and cannot be created again", topic)
                return None
            with self._lock:
                self._deleted.add(topic)
        with self._lock:
            self.attached += 1
            if self.subscription is not None:
                self._expected.add(topic)
            if self._closed:
                closed = True
            else:
                closed = False
                self._probes[topic] = probe
                self._addresses[topic] = address
        if closed:
            probe.close()
            msg = "the last-id probes are closed"
            raise ClientError(msg)
        return probe

    def _forget(self, topic: TopicName) -> None:
        with self._lock:
            probe = self._probes.pop(topic, None)
            self._addresses.pop(topic, None)
        if probe is not None:
            probe.close()

    def _close_others(self, keep: set[TopicName]) -> None:
        with self._lock:
            gone = [t for t in self._probes if t not in keep]
            probes = [self._probes.pop(t) for t in gone]
            for topic in gone:
                self._addresses.pop(topic, None)
        for probe in probes:
            probe.close()
