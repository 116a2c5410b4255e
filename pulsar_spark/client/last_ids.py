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
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from ..protocol import PulsarApi_pb2 as pb
from ..protocol import commands
from ..protocol.errors import PulsarError
from ..protocol.framing import Frame
from ..protocol.message_id import LATEST, MessageId
from .connection import Connection, Key, Kind
from .consumer import attach_consumer, get_last_message_id
from .errors import ClientError
from .lookup import BrokerAddress, LookupService
from .names import TopicName
from .retry import Backoff, may_retry
from .sub_names import fresh_name

__all__ = ["LastIds"]

log = logging.getLogger(__name__)
T = pb.BaseCommand

#: Threads waiting for answers at most (requests in flight at once).
MAX_IN_FLIGHT = 64


class _Probe:
    """A non-durable consumer on one partition that only asks for its last id; it
    goes stale when the broker closes it or the connection is lost."""

    def __init__(
        self, conn: Connection, topic: TopicName, prefix: str | None, compacted: bool
    ) -> None:
        self.conn, self.topic, self.prefix, self.compacted = conn, topic, prefix, compacted
        self.stale = threading.Event()
        self.key: Key | None = None

    # Handler: frames for the consumer (it asked for no message: only closes come).
    def frame_received(self, frame: Frame) -> None:
        if frame.command.type in (T.CLOSE_CONSUMER, T.TOPIC_MIGRATED):
            self.stale.set()

    def connection_closed(self, error: PulsarError) -> None:
        self.stale.set()

    def attach(self) -> None:
        self.key = attach_consumer(
            self.conn,
            self,
            lambda request_id, consumer_id: commands.subscribe(
                request_id,
                consumer_id,
                topic=str(self.topic),
                subscription=fresh_name(self.prefix),
                durable=False,
                earliest=False,
                start_message_id=LATEST,
                # A compacted reader's last id is the compacted view's (Apache Pulsar
                # answers the compacted ledger's last entry when nothing follows it).
                read_compacted=self.compacted,
            ),
        )

    @property
    def usable(self) -> bool:
        return self.key is not None and not self.stale.is_set() and not self.conn.closed

    def last(self) -> MessageId | None:
        assert self.key is not None
        return get_last_message_id(self.conn, self.key.ident, self.topic)

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
                commands.close_consumer(self.conn.new_id(Kind.REQUEST), key.ident), timeout=5
            )
        except PulsarError as exc:
            log.debug("closing the last-id consumer on %s: %s", self.topic, exc)


class LastIds:
    """Last message ids of partitions, with a consumer kept per partition (see the
    module docstring). Thread-safe; close it (or use ``with``).

    Args:
        lookup: the client's discovery and connection pool.
        operation_timeout: how long one partition's answer, retries included, may take.
    """

    def __init__(self, lookup: LookupService, *, operation_timeout: float = 30.0) -> None:
        self.lookup = lookup
        self.operation_timeout = operation_timeout
        self._lock = threading.Lock()
        self._probes: dict[TopicName, _Probe] = {}
        self._addresses: dict[TopicName, BrokerAddress] = {}
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
        if self._closed:
            msg = "the last-id probes are closed"
            raise ClientError(msg)
        wanted = list(dict.fromkeys(topics))
        self._close_others(set(wanted))
        if not wanted:
            return {}
        deadline = time.monotonic() + self.operation_timeout
        if len(wanted) == 1:
            return {wanted[0]: self._one(wanted[0], deadline)}
        pool = self._executor()
        futures = [pool.submit(self._one, topic, deadline) for topic in wanted]
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

    def _one(self, topic: TopicName, deadline: float) -> MessageId | None:
        backoff = Backoff()
        while True:
            try:
                return self._probe(topic).last()
            except PulsarError as exc:  # noqa: PERF203 (a retry loop)
                self._forget(topic)
                delay = backoff.next()
                if not may_retry(exc) or time.monotonic() + delay > deadline:
                    if hasattr(exc, "add_note"):  # Python 3.11+
                        exc.add_note(f"asking for the last message id of {topic}")
                    raise
                log.info("last message id of %s: %s; again in %.1f s", topic, exc, delay)
                time.sleep(delay)

    def _probe(self, topic: TopicName) -> _Probe:
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
        probe = _Probe(conn, topic, config.subscription_prefix, config.read_compacted)
        probe.attach()
        with self._lock:
            self.attached += 1
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
