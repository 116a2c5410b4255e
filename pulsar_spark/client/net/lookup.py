"""Connections by broker, and discovery: partitions, topic lookup, namespace listing.

Lookup follows the spec's service discovery:

1. PARTITIONED_METADATA on the service URL gives the partition count
   (0 = not partitioned).
2. LOOKUP of a (partition) topic answers ``Connect`` with the owner broker,
   or ``Redirect`` to ask another broker, copying its ``authoritative`` flag;
   at most :data:`MAX_REDIRECTS` hops.
3. The TLS URL is used when the service URL is ``pulsar+ssl://``.
4. With ``proxy_through_service_url`` the client keeps talking to the
   service URL and names the broker in CONNECT's ``proxy_to_broker_url``.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import server_error

from ..config import ClientConfig
from ..errors import ClientError, ConnectError, OperationTimeout
from ..names import TopicName, parse_service_url
from .connection import Connection
from .dispatch import IdKind

__all__ = ["BrokerAddress", "ConnectionPool", "LookupService", "MAX_REDIRECTS"]

MAX_REDIRECTS = 20


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    """Where a topic lives: the broker's URL, and how to reach it."""

    url: str
    host: str
    port: int
    proxy_through: bool = False


class ConnectionPool:
    """One open connection per (host, port, proxied broker), created on demand
    and replaced once closed."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.service_url = config.service_url
        self.operation_timeout = config.operation_timeout
        self._lock = threading.Lock()
        self._connections: dict[tuple[str, int, str | None], Connection] = {}
        self._next_host = itertools.cycle(range(len(config.service_url.hosts)))
        self._closed = False

    def get(self, host: str, port: int, proxy_to: str | None = None) -> Connection:
        """An open connection to ``host:port`` (asking it to proxy to ``proxy_to``)."""
        key = (host, port, proxy_to)
        with self._lock:
            if self._closed:
                msg = "the client is closed"
                raise ClientError(msg)
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
        # Connect outside the lock: it may take up to the connect timeout.
        conn = Connection.open(host, port, self.config, proxy_to_broker_url=proxy_to)
        with self._lock:
            current = self._connections.get(key)
            if current is not None and not current.closed:
                conn.close()
                return current
            self._connections[key] = conn
            return conn

    def service(self) -> Connection:
        """A connection to one of the service URL's hosts, trying each in turn."""
        hosts = self.service_url.hosts
        failures: list[ConnectError] = []
        for _ in hosts:
            host, port = hosts[next(self._next_host)]
            try:
                return self.get(host, port)
            except ConnectError as exc:
                failures.append(exc)
        msg = f"no host of {self.service_url} is reachable: " + "; ".join(map(str, failures))
        if all(not exc.retriable for exc in failures):  # each refused for good (a certificate)
            raise type(failures[-1])(msg) from failures[-1]
        raise ConnectError(msg) from failures[-1]

    def for_broker(self, address: BrokerAddress) -> Connection:
        """A connection that reaches the broker at ``address``."""
        if address.proxy_through:
            host, port = self.service_url.hosts[0]
            if (host, port) != (address.host, address.port):
                return self.get(host, port, proxy_to=f"{address.host}:{address.port}")
            # The broker is the service URL's own host (Apache Pulsar standalone may
            # say so): its plain connection reaches it, no second one is needed.
        return self.get(address.host, address.port)

    def connections(self) -> list[Connection]:
        """The connections the pool keeps, as a snapshot (some may have closed since)."""
        with self._lock:
            return list(self._connections.values())

    def holds_nothing(self) -> bool:
        """Whether no consumer or producer is registered on the pool's open connections."""
        return not any(conn.has_handlers for conn in self.connections() if not conn.closed)

    def settle(self, wait: float) -> None:
        """Let the reader threads of the pool's connections take what has already
        arrived (the close of a connection a broker restart ended), for ``wait``
        seconds at most: a request sent on a connection whose close is not yet seen
        would fail."""
        deadline = time.monotonic() + wait
        for conn in self.connections():
            while time.monotonic() < deadline and conn.has_unread():
                time.sleep(0.001)  # the reader thread's turn

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()


class LookupService:
    """Discovery over the binary protocol."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.config = pool.config
        self._listener = pool.config.listener_name

    def partitions(self, topic: TopicName) -> int:
        """Partition count of ``topic`` (0 when it is not partitioned).

        Raises:
            ServerError: the broker's error, e.g. TopicNotFound or AuthorizationError.
        """
        conn = self.pool.service()
        request_id = conn.new_id(IdKind.REQUEST)
        frame = conn.request(commands.partitioned_metadata(request_id, str(topic)))
        response = frame.command.partitionMetadataResponse
        if response.response == response.Failed:
            raise server_error(
                response.error, response.message, context=f"partition metadata of {topic}"
            )
        return response.partitions

    def lookup(self, topic: TopicName) -> BrokerAddress:
        """The broker that owns ``topic`` (a partition, or a non-partitioned topic).

        Raises:
            ServerError: the broker's error (TopicNotFound, ServiceNotReady, ...).
            ClientError: more than :data:`MAX_REDIRECTS` redirects, or no URL to follow.
        """
        conn = self.pool.service()
        authoritative = False
        tls = self.pool.service_url.tls
        for _ in range(MAX_REDIRECTS + 1):
            request = commands.lookup(
                conn.new_id(IdKind.REQUEST),
                str(topic),
                authoritative=authoritative,
                listener_name=self._listener,
            )
            frame = conn.request(request)
            response = frame.command.lookupTopicResponse
            if response.response == response.Failed:
                raise server_error(response.error, response.message, context=f"lookup of {topic}")
            url = response.brokerServiceUrlTls if tls else response.brokerServiceUrl
            if not url:
                msg = f"lookup of {topic} answered without a {'TLS ' if tls else ''}broker URL"
                raise ClientError(msg)
            address = _address(url, response.proxy_through_service_url)
            if response.response == response.Connect:
                return address
            authoritative = response.authoritative
            conn = self.pool.for_broker(address)
        msg = f"lookup of {topic} was redirected more than {MAX_REDIRECTS} times"
        raise ClientError(msg)

    def connection_for(self, topic: TopicName) -> Connection:
        """Look ``topic`` up and connect to its owner."""
        return self.pool.for_broker(self.lookup(topic))

    def topics_of_namespace(self, namespace: str, pattern: str | None = None) -> list[str]:
        """Persistent topics of ``tenant/namespace``, as the broker lists them
        (partitions by their own names). Patterns are applied by the caller: brokers
        differ on whether a pattern includes the ``persistent://`` scheme."""
        conn = self.pool.service()
        request = commands.topics_of_namespace(conn.new_id(IdKind.REQUEST), namespace)
        try:
            frame = conn.request(request)
        except OperationTimeout as exc:
            msg = (
                f"listing the topics of {namespace}: {exc}; the broker "
                f"({conn.server_version or 'unknown version'}) may not support "
                "GetTopicsOfNamespace (pulsar-lite does not): name the topics instead"
            )
            raise OperationTimeout(msg) from exc
        return list(frame.command.getTopicsOfNamespaceResponse.topics)


def _address(url: str, proxy_through: bool) -> BrokerAddress:
    parsed = parse_service_url(url)
    host, port = parsed.hosts[0]
    return BrokerAddress(url, host, port, proxy_through)
