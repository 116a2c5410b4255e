"""Clients kept by a Python worker between the Spark tasks it runs (worker reuse).

Spark reuses a Python worker for task after task (``spark.python.worker.reuse``,
true by default). A task that opened a client of its own paid a TCP connect,
the CONNECT/CONNECTED handshake (authentication included) and, on TLS, a TLS
handshake each time: milliseconds of a task that reads a few messages. Here
each worker process keeps the clients its tasks closed, by the settings that
shape a connection (:func:`client_key`: service URL, authentication, TLS and
key stores, timeouts, listener, read buffer, subscription naming), and lends
one to the next task with the same settings (:func:`lend`).

A lent client is the task's alone (two tasks at once get two clients). When
the task closes it, it goes back to the worker unless something of the task
may still be on it: an exception on the way out (the task failed, or left
early), or a consumer or producer still registered on one of its
connections. Then it is closed, as a task's own client always was: its
connections, and whatever the broker holds for them, go away. A connection
that broke while a client was idle (a broker restart) is replaced by the
client's connection pool on its next use (before lending a client, whatever
already arrived on its connections is left to their readers, so a close that
came is seen); a request on a connection that died silently fails after its
timeout, which fails the task and closes that client. The schema cache is
emptied on return (a topic deleted and created again numbers its schema
versions anew). Idle clients are closed after
:data:`IDLE_SECONDS` (when a client is next lent) and when the process exits
normally; a process that ends with ``os._exit`` (Spark's workers) leaves
their sockets to the OS, and the brokers see the connections close. A forked
child never uses its parent's clients: their sockets and threads are the
parent's. Keys hold credentials, so they are never logged.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from pulsar_spark.client import PulsarClient

    from .options.parse import PulsarOptions

__all__ = ["IDLE_SECONDS", "MAX_IDLE", "client_key", "idle_count", "in_task", "lend"]

log = logging.getLogger(__name__)

#: Seconds an idle client is kept.
IDLE_SECONDS = 600.0
#: Idle clients kept per key (more than the tasks a worker runs at once is waste).
MAX_IDLE = 2
#: Seconds a lent client's connections may take to show what already arrived.
SETTLE_SECONDS = 0.05

#: The option fields that shape a client's connections (with the operation timeout).
_FIELDS = (
    "service_url",
    "auth",
    "tls_trust_certs_file",
    "tls_allow_insecure",
    "tls_validate_hostname",
    "connect_timeout",
    "keepalive_interval",
    "listener_name",
    "read_buffer_bytes",
    "chunk_limits",
    "use_key_store_tls",
    "trust_store_type",
    "trust_store_path",
    "trust_store_password",
    "key_store_type",
    "key_store_path",
    "key_store_password",
    "subscription_prefix",
    "read_compacted",
)

Key = tuple[Any, ...]


def client_key(options: PulsarOptions, operation_timeout: float | None) -> Key:
    """What a client built from ``options`` depends on (holds secrets: never log it)."""
    values = tuple(getattr(options, name, None) for name in _FIELDS)
    return (*values, operation_timeout or options.operation_timeout)


def in_task() -> bool:
    """Whether this thread runs a Spark task (a Python worker's), not planning."""
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    return TaskContext.get() is not None


class _Pool:
    """The idle clients of this process, by key."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.idle: dict[Key, list[tuple[PulsarClient, float]]] = {}

    def take(self, key: Key) -> PulsarClient | None:
        """An idle client for ``key`` (closing the ones idle for too long)."""
        stale: list[PulsarClient] = []
        found = None
        now = time.monotonic()
        with self.lock:
            self.forget_if_forked()
            for k, clients in list(self.idle.items()):
                fresh = [(c, t) for c, t in clients if now - t <= IDLE_SECONDS]
                stale.extend(c for c, t in clients if now - t > IDLE_SECONDS)
                if fresh:
                    self.idle[k] = fresh
                else:
                    del self.idle[k]
            kept = self.idle.get(key)
            if kept:
                found = kept.pop()[0]
                if not kept:
                    del self.idle[key]
        for client in stale:
            _close_quietly(client, "idle for too long")
        if found is not None:
            # What already arrived on its connections first (a close a broker restart
            # sent): a request on a connection whose close is not yet seen would fail.
            found.settle(SETTLE_SECONDS)
        return found

    def give_back(self, key: Key, client: PulsarClient) -> None:
        with self.lock:
            if os.getpid() == self.pid:
                clients = self.idle.setdefault(key, [])
                if len(clients) < MAX_IDLE:
                    clients.append((client, time.monotonic()))
                    return
        _close_quietly(client, "more idle clients than kept")

    def close_all(self) -> None:
        with self.lock:
            if os.getpid() != self.pid:
                return
            clients = [c for idle in self.idle.values() for c, _ in idle]
            self.idle.clear()
        for client in clients:
            _close_quietly(client, "the process exits")

    def forget_if_forked(self) -> None:
        """In a forked child: drop the parent's clients unclosed (theirs to close)."""
        if os.getpid() != self.pid:
            self.pid = os.getpid()
            self.idle = {}


_POOL = _Pool()
atexit.register(_POOL.close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.forget_if_forked)


def _close_quietly(client: PulsarClient, why: str) -> None:
    try:
        client.close()
    except Exception:  # closing is best effort: the sockets go anyway
        log.debug("closing a pooled pulsar client (%s) failed", why, exc_info=True)


def idle_count() -> int:
    """Idle clients this process keeps (for tests and diagnostics)."""
    with _POOL.lock:
        if os.getpid() != _POOL.pid:
            return 0
        return sum(len(clients) for clients in _POOL.idle.values())


class LentClient:
    """A pooled client lent to one task: every attribute is the client's; closing
    it (or leaving its ``with``) gives it back, or closes it if the task failed
    or left a consumer or producer open."""

    def __init__(self, client: PulsarClient, key: Key) -> None:
        self._client: PulsarClient | None = client
        self._key = key

    def __getattr__(self, name: str) -> Any:
        client = self.__dict__.get("_client")
        if client is None:
            msg = f"this pooled pulsar client was given back: no {name!r}"
            raise AttributeError(msg)
        return getattr(client, name)

    def __enter__(self) -> LentClient:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self._give_back(failed=kind is not None)

    def close(self) -> None:
        # Called from a ``finally`` while an exception propagates: that is a failure.
        self._give_back(failed=sys.exc_info()[0] is not None)

    def _give_back(self, *, failed: bool) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            reusable = not failed and client.holds_nothing()
        except Exception:  # unsure: do not reuse it
            reusable = False
        if not reusable:
            _close_quietly(client, "the task failed or left something open")
            return
        client.forget_schemas()
        _POOL.give_back(self._key, client)


def lend(
    options: PulsarOptions,
    operation_timeout: float | None,
    build: Callable[[PulsarOptions, float | None], PulsarClient],
) -> PulsarClient:
    """A client for ``options`` (an idle one of this process, else ``build(options,
    operation_timeout)``), given back when closed (see :class:`LentClient`)."""
    key = client_key(options, operation_timeout)
    client = _POOL.take(key)
    if client is None:
        client = build(options, operation_timeout)
    return cast("PulsarClient", LentClient(client, key))
