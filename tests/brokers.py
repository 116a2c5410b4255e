"""Real brokers for tests: pulsar-lite processes, a fault-injecting proxy, official-client helpers.

A pytest plugin (``tests/conftest.py`` loads it with ``pytest_plugins = ["brokers"]``).

Fixtures
--------
``pulsar_lite`` (session)
    A :class:`PulsarLite` with ``default_partitions = 0``: every topic is non-partitioned.
``pulsar_lite_partitioned`` (session)
    A :class:`PulsarLite` with ``default_partitions = 4``. pulsar-lite treats *every* topic
    name as partitioned on such an instance, ``-partition-K`` names included (brokers.md,
    quirk 3), so partitioned tests get their own instance.
``fresh_pulsar_lite`` (function)
    A factory, ``fresh_pulsar_lite(*, start=True, **config) -> PulsarLite``, for tests that
    stop, restart or kill a broker. Session instances refuse ``stop``/``kill``/``restart``.
``topic_name`` (function)
    ``persistent://public/default/<test name>-<8 hex digits>``, unique per test.
``fault_proxy`` (function)
    A factory, ``fault_proxy(target, drop_every_frames=None, **options) -> FaultProxy``.

Every broker process a fixture starts is killed at teardown, whatever happened (and, through
``setpriv --pdeathsig``, when the test process dies). When a test
fails, the log of each broker it used (the part written during the test, or the tail) is
attached to the report as a section; the whole log stays in the instance's directory under
pytest's basetemp, whose path the section names.

Failing to start is an error, never a skip: :meth:`PulsarLite.start` raises
:class:`BrokerStartError` carrying the tail of the broker log.

Lookups and the proxy
---------------------
A Pulsar client resolves a topic with LOOKUP, and pulsar-lite answers with its own address
(``pulsar://127.0.0.1:<broker port>``), so a client that follows lookups would connect to the
broker directly and bypass a proxy. pulsar-lite 0.2.0 has no advertised-address setting (no
such flag or config key; ``--addr`` is both the bind address and the advertised one), so
:class:`FaultProxy` rewrites ``CommandLookupTopicResponse.brokerServiceUrl`` in every
LOOKUP_RESPONSE it forwards to its own ``service_url`` (``lookups_rewritten`` counts them).

Official-client helpers
-----------------------
:func:`produce`, :func:`read_all`, :func:`topic_partitions` and :func:`official_client` use
the official ``pulsar`` package (pulsar-client), imported lazily. Message ids are strings in
the connector's ``messageId`` column format, ``ledgerId:entryId:partition:batchIndex``.

pulsar-lite 0.2.0 behaviours met while building this (beyond brokers.md's quirks 1-4)
---------------------------------------------------------------------------------------
- A config file it cannot parse (bad TOML, a wrong type) is ignored without a word: it runs
  on defaults, metrics on 0.0.0.0:8080 included. Unknown keys are ignored too. Hence the
  key check in :class:`PulsarLite` and the comparison with the settings it logs.
- ``--db-path DIR`` stores its data in ``DIR.rocksdb``. An occupied port or a locked
  database ends the process with status 1 and ``Error: ...`` on stderr. SIGTERM kills it at
  once (status -15, no shutdown log); acknowledged data survived SIGTERM and SIGKILL in
  every try.
- GetLastMessageId answers without ``batch_index``; see :func:`read_all`.
- It sometimes dispatches entries to a consumer twice, and a reconnecting reader is served
  from its subscription's original start, not from the ``start_message_id`` it sends; see
  :func:`read_all`.
- Reading ~100k messages, a FLOW now and then fails with ``Flow-triggered dispatch failed:
  out of range integral type conversion attempted`` (or ``Error handling command: ...``,
  closing the connection); after that the consumer gets nothing more (about 1 read of
  100k in 10). Keep official-client reads in tests small.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from broker_process import (
    BrokerProcess,
    BrokerStartError,
    free_port,
    handshake,
    log_marks,
    log_sections,
    orphan_guard,
    port_is_free,
)

from pulsar_spark.protocol import Frame, FrameDecoder, encode_command, pb

if TYPE_CHECKING:
    import pulsar

__all__ = [
    "CODECS",
    "PULSAR_LITE_CONFIG_KEYS",
    "START_TIMEOUT",
    "BrokerFactory",
    "BrokerStartError",
    "FaultProxy",
    "ProxyFactory",
    "PulsarLite",
    "compression_type",
    "free_port",
    "port_is_free",
    "message_id_str",
    "official_client",
    "produce",
    "pulsar_handshake",
    "read_all",
    "topic_partitions",
]

#: Default deadline for a broker to answer CONNECT with CONNECTED.
START_TIMEOUT = 20.0
#: Default grace period between SIGTERM and SIGKILL.
STOP_TIMEOUT = 10.0
#: Lines of broker log put into errors and failed-test reports.
TAIL_LINES = 80

#: pulsar-lite 0.2.0's top-level config keys (read from the binary) and their TOML types.
#: The binary silently ignores unknown keys, so :class:`PulsarLite` rejects them itself.
PULSAR_LITE_CONFIG_KEYS: dict[str, type] = {
    "cluster": str,
    "default_partitions": int,
    "keep_alive_interval_secs": int,
    "handshake_timeout_secs": int,
    "connection_liveness_check_timeout_secs": int,
    "max_connections": int,
    "max_connections_per_ip": int,
    "max_concurrent_non_persistent_messages_per_connection": int,
    "max_pending_publish_requests_per_connection": int,
    "max_pending_publish_bytes_per_connection": int,
    "max_message_size_bytes": int,
    "publish_rate_messages_per_sec": int,
    "publish_rate_bytes_per_sec": int,
    "pulsar_channel_write_buffer_high_water_mark_bytes": int,
    "pulsar_channel_write_buffer_low_water_mark_bytes": int,
}

#: Where pulsar-lite's startup log (level info) echoes the settings it runs with. A config
#: file it cannot parse is ignored without a word and the defaults apply, so after each
#: start these are compared with what was asked for.
_ECHOED: dict[str, re.Pattern[str]] = {
    "default_partitions": re.compile(r"Default partitions: (\d+)"),
    "keep_alive_interval_secs": re.compile(r"Keep-alive interval: (\d+)s"),
    "handshake_timeout_secs": re.compile(r"handshake timeout: (\d+)s"),
    "connection_liveness_check_timeout_secs": re.compile(r"liveness timeout: (\d+)s"),
    "max_connections": re.compile(r"\bmax_connections=(\d+)"),
    "max_connections_per_ip": re.compile(r"\bmax_connections_per_ip=(\d+)"),
    "max_concurrent_non_persistent_messages_per_connection": re.compile(
        r"\bmax_concurrent_per_connection=(\d+)"
    ),
    "max_pending_publish_requests_per_connection": re.compile(r"\bmax_pending_publish=(\d+)"),
    "max_message_size_bytes": re.compile(r"\bmax_message_size=(\d+)B"),
    "publish_rate_messages_per_sec": re.compile(r"\bmessages_per_sec=(\d+)"),
    "publish_rate_bytes_per_sec": re.compile(r"\bbytes_per_sec=(\d+)"),
}
_METRICS_LINE = "Metrics endpoint listening"
_LOG_LEVELS = ("info", "debug", "trace")  # the config check needs the info lines


def _binary() -> Path:
    from pulsar_lite.binary_finder import find_pulsar_lite_binary

    return Path(find_pulsar_lite_binary())


# ---------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------


def _parse_url(url: str) -> tuple[str, int]:
    m = re.fullmatch(r"pulsar://([^:/]+):(\d+)/?", url)
    if not m:
        msg = f"not a pulsar://HOST:PORT url: {url!r}"
        raise ValueError(msg)
    return m.group(1), int(m.group(2))


# ---------------------------------------------------------------------------
# Readiness handshake
# ---------------------------------------------------------------------------


def pulsar_handshake(host: str, port: int, timeout: float = 2.0) -> pb.CommandConnected | None:
    """Open a connection, send CONNECT, return the CONNECTED reply (``None`` on anything else)."""
    reply = handshake(host, port, timeout=timeout, client_version="readiness")
    return reply if isinstance(reply, pb.CommandConnected) else None


# ---------------------------------------------------------------------------
# PulsarLite
# ---------------------------------------------------------------------------


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    msg = f"cannot write {value!r} as TOML"
    raise TypeError(msg)


class PulsarLite(BrokerProcess):
    """One pulsar-lite broker process, with its port, data, config and log in ``root``.

    ``root`` holds ``pulsar-lite.toml``, ``broker.log`` (stdout and stderr of every start,
    appended, each start headed by a ``=== fixture: start #N ===`` line) and the RocksDB
    data (``data.rocksdb``: pulsar-lite appends ``.rocksdb`` to ``--db-path``). The port is
    picked at the first start and kept, so :meth:`restart` comes back on the same address
    with the same data. Process handling (start loop, stop, kill, restart, log, RSS) is
    :class:`broker_process.BrokerProcess`'s.

    Args:
        root: the instance's directory (created if needed).
        name: for reports.
        port: a fixed port; by default a free one below the ephemeral range.
        metrics: enable the metrics endpoint (it binds 0.0.0.0:8080, shared by all
            instances: leave it off).
        log_level: ``info``, ``debug`` or ``trace``.
        extra_toml: raw TOML appended to the top-level section (to test bad configs).
        start_timeout: default readiness deadline for :meth:`start`, seconds.
        shared: a session instance; :meth:`stop`, :meth:`kill` and :meth:`restart` raise.
        **config: top-level config keys, see :data:`PULSAR_LITE_CONFIG_KEYS`;
            ``default_partitions`` defaults to 0.
    """

    tail_lines = TAIL_LINES
    stop_timeout = STOP_TIMEOUT
    probe_interval = 0.005
    fresh_fixture = "fresh_pulsar_lite"
    process_label = "pulsar-lite"

    def __init__(
        self,
        root: Path,
        *,
        name: str = "pulsar-lite",
        port: int | None = None,
        metrics: bool = False,
        log_level: str = "info",
        extra_toml: str = "",
        start_timeout: float = START_TIMEOUT,
        shared: bool = False,
        **config: Any,
    ) -> None:
        for key, value in config.items():
            want = PULSAR_LITE_CONFIG_KEYS.get(key)
            if want is None:
                msg = f"unknown pulsar-lite config key {key!r} (the broker would ignore it)"
                raise TypeError(msg)
            if not isinstance(value, want) or isinstance(value, bool):
                msg = f"pulsar-lite config {key}={value!r}: expected {want.__name__}"
                raise TypeError(msg)
        if log_level not in _LOG_LEVELS:
            msg = f"log_level must be one of {_LOG_LEVELS} (the config check reads info lines)"
            raise ValueError(msg)
        super().__init__(root, name=name, shared=shared, start_timeout=start_timeout)
        self.config: dict[str, Any] = {"default_partitions": 0, **config}
        self.metrics = metrics
        self.log_level = log_level
        self.extra_toml = extra_toml
        self._port = port
        self._port_fixed = port is not None

    # -- paths and properties ---------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.root / "pulsar-lite.toml"

    @property
    def db_path(self) -> Path:
        """The ``--db-path`` argument; the data itself is in ``data.rocksdb`` beside it."""
        return self.root / "data"

    @property
    def port(self) -> int:
        if self._port is None:
            msg = f"{self.name} has not been started yet"
            raise RuntimeError(msg)
        return self._port

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def default_partitions(self) -> int:
        return int(self.config["default_partitions"])

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<PulsarLite {self.name} {self._port and self.service_url} {state}>"

    # -- config --------------------------------------------------------------

    def _toml(self) -> str:
        lines = [f"{k} = {_toml_value(v)}" for k, v in self.config.items()]
        if self.extra_toml:
            lines.append(self.extra_toml.rstrip("\n"))
        lines += ["", "[metrics]", f"enabled = {_toml_value(self.metrics)}", ""]
        return "\n".join(lines)

    def _check_effective_config(self, log: str) -> None:
        """Compare the settings the broker logged at startup with what was asked for."""
        wrong = []
        for key, pattern in _ECHOED.items():
            if key not in self.config:
                continue
            m = pattern.search(log)
            got = m.group(1) if m else "nothing"
            if got != str(self.config[key]):
                wrong.append(f"{key}: asked {self.config[key]}, log says {got}")
        metrics_on = _METRICS_LINE in log
        if metrics_on != self.metrics:
            asked = "enabled" if self.metrics else "disabled"
            got = "enabled (0.0.0.0:8080)" if metrics_on else "disabled"
            wrong.append(f"metrics: asked {asked}, log says {got}")
        if wrong:
            msg = (
                f"{self.name}: pulsar-lite did not apply {self.config_path} (it runs on "
                "defaults, silently, when it cannot parse its config file): " + "; ".join(wrong)
            )
            raise BrokerStartError(msg, self.log_tail())

    # -- lifecycle (the parts BrokerProcess asks for) ------------------------

    def start(self, timeout: float | None = None) -> float:
        """Start the broker and wait until it answers CONNECT; return the seconds it took.

        Ready means: the log of this start says ``Server listening on 127.0.0.1:PORT``,
        a Pulsar CONNECT gets CONNECTED back, the process is still alive and its logged
        settings match the config. Otherwise :class:`BrokerStartError` (with the log tail),
        after killing the process. Only the first start on a port picked here may move to
        another port (it lost a race for it); a restart comes back where it was.
        """
        return super().start(timeout)

    def _ports_movable(self) -> bool:
        return not self._port_fixed

    def _pick_ports(self, attempt: int) -> None:
        if self._port is None or attempt > 1:
            self._port = free_port()

    def _prepare(self, first: bool) -> None:
        self.config_path.write_text(self._toml(), "utf-8")

    def _command(self, first: bool) -> list[str]:
        return [
            *_ORPHAN_GUARD,
            str(_binary()),
            "--addr", self.address,
            "--db-path", str(self.db_path),
            "--config", str(self.config_path),
            "--log-level", self.log_level,
        ]  # fmt: skip

    def _probe(self, left: float) -> bool:
        # The log line guards against a stranger on the port answering for us.
        if f"Server listening on {self.address}" not in self.log_text(self._log_start):
            return False
        connected = pulsar_handshake(self.host, self.port, timeout=min(2.0, left))
        if connected is None:
            return False
        self.server_version = connected.server_version
        return True

    def _not_ready(self, timeout: float) -> str:
        return (
            f"{self.name}: pulsar-lite on {self.address} did not answer CONNECT "
            f"within {timeout:.1f} s"
        )

    def _after_ready(self, elapsed: float) -> None:
        self._check_effective_config(self.log_text(self._log_start))


_ORPHAN_GUARD = orphan_guard()


class BrokerFactory:
    """What ``fresh_pulsar_lite`` yields: call it to get a started broker of your own."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, prefix: str) -> None:
        self._tmp = tmp_path_factory
        self._prefix = prefix
        self.instances: list[PulsarLite] = []

    def __call__(self, *, start: bool = True, **options: Any) -> PulsarLite:
        """A new :class:`PulsarLite` (``options`` as its constructor's), started unless told not."""
        n = len(self.instances)
        root = self._tmp.mktemp(f"{self._prefix}-{n}", numbered=True)
        options.setdefault("name", f"fresh-{n}")
        broker = PulsarLite(root, **options)
        self.instances.append(broker)
        if start:
            broker.start()
        return broker

    def close(self) -> None:
        for broker in self.instances:
            broker.close()


# ---------------------------------------------------------------------------
# FaultProxy
# ---------------------------------------------------------------------------

FrameHook = Callable[[Frame, bytes], bytes]


@dataclass
class _Link:
    """One proxied connection: the client's socket and ours to the broker."""

    ident: int
    client: socket.socket
    upstream: socket.socket
    frames_from_broker: int = 0
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class FaultProxy:
    """A loopback TCP proxy in front of one broker that breaks connections on purpose.

    Client→broker bytes pass through untouched. Broker→client bytes are cut into frames
    (a :class:`FrameDecoder` over a copy of the stream) and forwarded whole frames at a
    time, which lets the proxy

    - count frames and close **both** sockets of a connection right after the broker's
      ``drop_every_frames``-th frame on it (each new connection starts counting at zero;
      ``None`` never drops; the attribute may be changed while running);
    - rewrite ``brokerServiceUrl`` of LOOKUP_RESPONSE to its own :attr:`service_url`
      (``rewrite_lookups``), so clients that follow lookups stay behind the proxy;
    - pass each frame through ``frame_hook(frame, raw) -> bytes`` (return ``raw`` to
      forward it, ``b""`` to swallow it, or other bytes to replace it).

    :meth:`drop_all` closes every open connection now; :meth:`pause` stops accepting
    (``refuse=True``: the listening socket is closed, connects are refused;
    ``refuse=False``: connects queue in the backlog unanswered) until :meth:`resume`.
    A broker stream the decoder cannot parse switches that connection to plain
    pass-through and is recorded in :attr:`errors`.

    Counters: :attr:`connections_accepted`, :attr:`drops` (connections the proxy closed on
    purpose), :attr:`frames_from_broker`, :attr:`lookups_rewritten`, :attr:`bytes_to_broker`,
    :attr:`bytes_to_client`, :attr:`active_connections`.
    """

    def __init__(
        self,
        target: str | PulsarLite,
        *,
        drop_every_frames: int | None = None,
        rewrite_lookups: bool = True,
        reset: bool = False,
        frame_hook: FrameHook | None = None,
        port: int | None = None,
        max_frame_size: int = 256 * 1024 * 1024,
    ) -> None:
        url = target.service_url if isinstance(target, PulsarLite) else target
        self.target_url = url
        self.target = _parse_url(url)
        if drop_every_frames is not None and drop_every_frames < 1:
            msg = "drop_every_frames must be >= 1 or None"
            raise ValueError(msg)
        self.drop_every_frames = drop_every_frames
        self.rewrite_lookups = rewrite_lookups
        #: Close with RST (SO_LINGER 0) instead of FIN.
        self.reset = reset
        self.frame_hook = frame_hook
        self.max_frame_size = max_frame_size
        self._port = port or free_port()
        self._lock = threading.Lock()
        self._links: dict[int, _Link] = {}
        self._next_id = 0
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._paused = False
        self._refuse = True
        self._closed = False
        self._cond = threading.Condition()
        #: The (paused, refuse) state the accept thread has put in force.
        self._applied: tuple[bool, bool] | None = None
        self._acceptor: threading.Thread | None = None
        self.connections_accepted = 0
        self.drops = 0
        self.frames_from_broker = 0
        self.lookups_rewritten = 0
        self.bytes_to_broker = 0
        self.bytes_to_client = 0
        self.upstream_failures = 0
        self.errors: list[str] = []

    @property
    def port(self) -> int:
        return self._port

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self._port}"

    @property
    def active_connections(self) -> int:
        with self._lock:
            return len(self._links)

    def stats(self) -> dict[str, Any]:
        return {
            "service_url": self.service_url,
            "target_url": self.target_url,
            "connections_accepted": self.connections_accepted,
            "active_connections": self.active_connections,
            "drops": self.drops,
            "frames_from_broker": self.frames_from_broker,
            "lookups_rewritten": self.lookups_rewritten,
            "bytes_to_broker": self.bytes_to_broker,
            "bytes_to_client": self.bytes_to_client,
            "upstream_failures": self.upstream_failures,
            "errors": list(self.errors),
        }

    def __repr__(self) -> str:
        return f"<FaultProxy {self.service_url} -> {self.target_url} drops={self.drops}>"

    # -- lifecycle -------------------------------------------------------------

    def _bind(self) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self._port))
        s.listen(128)
        return s

    def start(self) -> FaultProxy:
        self._listener = self._bind()
        self._acceptor = threading.Thread(
            target=self._accept_loop, name=f"fault-proxy-{self._port}", daemon=True
        )
        self._acceptor.start()
        return self

    def close(self) -> None:
        """Stop accepting and close every connection (not counted as drops)."""
        self._closed = True
        if self._acceptor is not None:
            self._acceptor.join(5)
        for link in self._snapshot():
            self._close_link(link, counted=False)
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> FaultProxy:
        if self._acceptor is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def pause(self, refuse: bool = True) -> None:
        """Stop accepting new connections (open ones keep flowing); in force on return."""
        self._set_state(True, refuse)

    def resume(self) -> None:
        """Accept again, on the same port; in force on return."""
        self._set_state(False, self._refuse)

    def _set_state(self, paused: bool, refuse: bool) -> None:
        with self._cond:
            self._paused, self._refuse = paused, refuse
            applied = self._cond.wait_for(lambda: self._applied == (paused, refuse), timeout=5)
        if not applied:
            msg = f"{self!r}: the accept thread did not apply pause={paused} within 5 s"
            raise RuntimeError(msg)

    def drop_all(self) -> int:
        """Close both sockets of every open connection now; returns how many."""
        links = self._snapshot()
        return sum(self._close_link(link, counted=True) for link in links)

    def wait_for(self, predicate: Callable[[FaultProxy], bool], timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return True
            time.sleep(0.01)
        return predicate(self)

    # -- internals -------------------------------------------------------------

    def _snapshot(self) -> list[_Link]:
        with self._lock:
            return list(self._links.values())

    def _accept_loop(self) -> None:
        sel = selectors.DefaultSelector()
        registered: socket.socket | None = None
        try:
            while not self._closed:
                with self._cond:
                    paused, refuse = self._paused, self._refuse
                if paused:
                    if registered is not None:
                        sel.unregister(registered)
                        registered = None
                    if refuse and self._listener is not None:
                        self._listener.close()
                        self._listener = None
                else:
                    if self._listener is None:
                        try:
                            self._listener = self._bind()
                        except OSError as exc:
                            self.errors.append(f"cannot rebind port {self._port}: {exc}")
                            time.sleep(0.05)
                            continue
                    if registered is not self._listener:
                        sel.register(self._listener, selectors.EVENT_READ)
                        registered = self._listener
                with self._cond:
                    self._applied = (paused, refuse)
                    self._cond.notify_all()
                if paused:
                    time.sleep(0.01)
                    continue
                if not sel.select(0.05):
                    continue
                try:
                    client, _ = self._listener.accept()
                except OSError:
                    continue
                self._open_link(client)
        finally:
            sel.close()
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            with self._cond:
                self._applied = None
                self._cond.notify_all()

    def _open_link(self, client: socket.socket) -> None:
        with self._lock:
            self.connections_accepted += 1
            self._next_id += 1
            ident = self._next_id
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError as exc:
            with self._lock:
                self.upstream_failures += 1
            self.errors.append(f"connection {ident}: cannot reach {self.target_url}: {exc}")
            client.close()
            return
        upstream.settimeout(None)
        for s in (client, upstream):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        link = _Link(ident, client, upstream)
        with self._lock:
            self._links[ident] = link
        for target, direction in (
            (self._pump_to_broker, "c2b"),
            (self._pump_to_client, "b2c"),
        ):
            t = threading.Thread(
                target=target, args=(link,), name=f"fault-proxy-{ident}-{direction}", daemon=True
            )
            t.start()
            self._threads.append(t)
        self._threads = [t for t in self._threads if t.is_alive()]

    def _close_link(self, link: _Link, *, counted: bool) -> bool:
        with link.lock:
            if link.closed:
                return False
            link.closed = True
        for s in (link.client, link.upstream):
            with contextlib.suppress(OSError):
                if self.reset:
                    # SO_LINGER on with a zero timeout: close() sends RST. SHUT_RD wakes our
                    # pump threads blocked in recv() without sending anything.
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    s.shutdown(socket.SHUT_RD)
                else:
                    s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        with self._lock:
            self._links.pop(link.ident, None)
            if counted:
                self.drops += 1
        return True

    def _pump_to_broker(self, link: _Link) -> None:
        try:
            while True:
                data = link.client.recv(65536)
                if not data:
                    break
                link.upstream.sendall(data)
                with self._lock:
                    self.bytes_to_broker += len(data)
        except OSError:
            pass
        self._close_link(link, counted=False)

    def _rewrite(self, frame: Frame, raw: bytes) -> bytes:
        cmd = frame.command
        if (
            self.rewrite_lookups
            and cmd.type == pb.BaseCommand.LOOKUP_RESPONSE
            and cmd.lookupTopicResponse.HasField("brokerServiceUrl")
        ):
            cmd.lookupTopicResponse.brokerServiceUrl = self.service_url
            with self._lock:
                self.lookups_rewritten += 1
            return encode_command(cmd)
        return raw

    def _pump_to_client(self, link: _Link) -> None:
        decoder: FrameDecoder | None = FrameDecoder(self.max_frame_size)
        pending = bytearray()  # the raw bytes of frames the decoder has not handed out yet
        try:
            while True:
                data = link.upstream.recv(65536)
                if not data:
                    break
                if decoder is None:  # pass-through after a decode error
                    link.client.sendall(data)
                    with self._lock:
                        self.bytes_to_client += len(data)
                    continue
                pending += data
                out = bytearray()
                drop = False
                try:
                    decoder.feed(data)
                    while (frame := decoder.next_frame()) is not None:
                        raw = bytes(pending[: frame.size])
                        del pending[: frame.size]
                        raw = self._rewrite(frame, raw)
                        if self.frame_hook is not None:
                            raw = self.frame_hook(frame, raw)
                        out += raw
                        link.frames_from_broker += 1
                        with self._lock:
                            self.frames_from_broker += 1
                        k = self.drop_every_frames
                        if k is not None and link.frames_from_broker >= k:
                            drop = True
                            break
                except Exception as exc:
                    self.errors.append(
                        f"connection {link.ident}: broker stream not decodable, passing "
                        f"through from here: {type(exc).__name__}: {exc}"
                    )
                    decoder = None
                    out += pending
                    pending.clear()
                if out:
                    link.client.sendall(out)
                    with self._lock:
                        self.bytes_to_client += len(out)
                if drop:
                    self._close_link(link, counted=True)
                    return
        except OSError:
            pass
        self._close_link(link, counted=False)


# ---------------------------------------------------------------------------
# Official-client helpers
# ---------------------------------------------------------------------------

#: Codec names as the connector spells them.
CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


def _pulsar() -> Any:
    import pulsar

    return pulsar


def compression_type(codec: str | Any) -> Any:
    """``pulsar.CompressionType`` for a codec name (NONE, LZ4, ZLIB, ZSTD, SNAPPY) or enum."""
    ct = _pulsar().CompressionType
    if not isinstance(codec, str):
        return codec
    table = {
        "NONE": ct.NONE,
        "LZ4": ct.LZ4,
        "ZLIB": ct.ZLib,
        "ZSTD": ct.ZSTD,
        "SNAPPY": ct.SNAPPY,
    }
    try:
        return table[codec.upper()]
    except KeyError:
        msg = f"unknown codec {codec!r}; expected one of {CODECS}"
        raise ValueError(msg) from None


def message_id_str(mid: Any) -> str:
    """An official ``MessageId`` as ``ledgerId:entryId:partition:batchIndex``."""
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"


@contextlib.contextmanager
def official_client(
    service_url: str, *, operation_timeout_seconds: int = 15, **kwargs: Any
) -> Iterator[pulsar.Client]:
    """A ``pulsar.Client`` logging warnings and errors only (to stdout), closed on exit."""
    pulsar = _pulsar()
    kwargs.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    client = pulsar.Client(
        service_url, operation_timeout_seconds=operation_timeout_seconds, **kwargs
    )
    try:
        yield client
    finally:
        # Closing fails when the connection broke at the wrong moment (a FaultProxy drop
        # during CLOSE_PRODUCER): nothing to do about it, and every send was confirmed.
        with contextlib.suppress(pulsar.PulsarException):
            client.close()


def _as_message(item: Mapping[str, Any] | bytes | str) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    return {"value": item}


def mixed_messages(n: int, *, start: int = 0) -> list[dict[str, Any]]:
    """Messages numbered ``start``.. that vary what they carry, for :func:`produce`: a
    value of varying length always; a key on 3 of 4; properties (one non-ASCII) on 2 of 3;
    an event time on every other one."""
    out = []
    for i in range(start, start + n):
        message: dict[str, Any] = {"value": f"value-{i}".encode() * (1 + i % 3)}
        if i % 4:
            message["key"] = f"key-{i % 5}"
        if i % 3:
            message["properties"] = {"i": str(i), "ü": "ñ"}
        if i % 2:
            message["event_time"] = 1_700_000_000_000 + i
        out.append(message)
    return out


def produce(
    service_url: str,
    topic: str,
    messages: Iterable[Mapping[str, Any] | bytes | str],
    *,
    batching: bool = True,
    compression: str | Any = "NONE",
    batching_max_messages: int = 1000,
    batching_max_publish_delay_ms: int = 10,
    batching_max_allowed_size_in_bytes: int = 128 * 1024,
    producer_name: str | None = None,
    send_timeout_millis: int = 30_000,
    max_pending_messages: int = 1000,
    timeout: float = 120.0,
    client_options: Mapping[str, Any] | None = None,
    **producer_options: Any,
) -> list[str]:
    """Produce ``messages`` with the official client; return their ids, in order.

    Each message is a dict with ``value`` (bytes or str) and optionally ``key`` (str),
    ``properties`` (dict of str) and ``event_time`` (ms), or just the value. Messages are
    sent asynchronously and flushed, so with ``batching`` they really share batches.
    Raises ``RuntimeError`` if any send fails.
    """
    pulsar = _pulsar()
    items = [_as_message(m) for m in messages]
    ids: list[str | None] = [None] * len(items)
    failures: list[str] = []
    done = threading.Semaphore(0)

    def callback_for(i: int) -> Callable[[Any, Any], None]:
        def callback(result: Any, mid: Any) -> None:
            if result == pulsar.Result.Ok:
                ids[i] = message_id_str(mid)
            else:
                failures.append(f"message {i}: {result}")
            done.release()

        return callback

    with official_client(service_url, **(client_options or {})) as client:
        _refuse_double_partition(client, topic)
        producer = client.create_producer(
            topic,
            producer_name=producer_name,
            batching_enabled=batching,
            batching_max_messages=batching_max_messages,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            compression_type=compression_type(compression),
            send_timeout_millis=send_timeout_millis,
            max_pending_messages=max_pending_messages,
            block_if_queue_full=True,
            **producer_options,
        )
        try:
            for i, m in enumerate(items):
                value = m["value"]
                if isinstance(value, str):
                    value = value.encode("utf-8")
                kwargs: dict[str, Any] = {}
                if m.get("key") is not None:
                    kwargs["partition_key"] = m["key"]
                if m.get("properties"):
                    kwargs["properties"] = dict(m["properties"])
                if m.get("event_time") is not None:
                    kwargs["event_timestamp"] = int(m["event_time"])
                producer.send_async(value, callback_for(i), **kwargs)
            producer.flush()
            deadline = time.monotonic() + timeout
            for _ in items:
                if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    missing = sum(1 for x in ids if x is None) - len(failures)
                    msg = f"{missing} sends to {topic} unconfirmed after {timeout} s"
                    raise RuntimeError(msg)
        finally:
            with contextlib.suppress(pulsar.PulsarException):
                producer.close()
    if failures:
        msg = f"{len(failures)} sends to {topic} failed: " + "; ".join(failures[:10])
        raise RuntimeError(msg)
    return [x for x in ids if x is not None]


_PARTITION_SUFFIX = re.compile(r"-partition-\d+$")


def _refuse_double_partition(client: Any, topic: str) -> None:
    """Stop before the official client aborts the process (brokers.md, quirk 3).

    On a pulsar-lite with ``default_partitions > 0``, ``t-partition-1`` is itself
    partitioned, the client goes for ``t-partition-1-partition-K`` and a Reader there dies
    with ``std::future_error`` (``terminate called``), taking pytest down with it.
    """
    if not _PARTITION_SUFFIX.search(topic):
        return
    parts = list(client.get_topic_partitions(topic))
    if parts != [topic]:
        msg = (
            f"{topic} names a partition, yet the broker says it has partitions of its own "
            f"({parts[0]}, ...): a pulsar-lite with default_partitions > 0 (brokers.md, "
            "quirk 3). Use the base topic name with the official client."
        )
        raise ValueError(msg)


def _message_dict(msg: Any) -> dict[str, Any]:
    mid = msg.message_id()
    key = msg.partition_key()
    event_time = msg.event_timestamp()
    return {
        "value": msg.data(),
        "key": key or None,
        "properties": dict(msg.properties()),
        "event_time": event_time or None,
        "publish_time": msg.publish_timestamp(),
        "message_id": message_id_str(mid),
        "partition": mid.partition(),
        "topic": msg.topic_name(),
        "producer_name": msg.producer_name(),
    }


def read_all(
    service_url: str,
    topic: str,
    *,
    start: Any = None,
    start_inclusive: bool = False,
    at_least: int = 0,
    dedupe: bool = True,
    read_timeout_ms: int = 10_000,
    batch_drain_ms: int = 300,
    receiver_queue_size: int = 1000,
    empty_ok: bool = True,
    client_options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Read ``topic`` with an official Reader from ``start`` (earliest) to the end.

    Reads until ``has_message_available()`` is false, and in any case until ``at_least``
    (distinct) messages have come. Each message becomes a dict: ``value`` (bytes), ``key``
    (str or None), ``properties``, ``event_time`` (ms or None), ``publish_time``,
    ``message_id``, ``partition``, ``topic``, ``producer_name``.

    Behaviours to know (pulsar-lite 0.2.0, pulsar-client 3.13):

    - pulsar-lite sometimes dispatches entries to a consumer twice (seen past the first
      ~700 of a few thousand messages, once FLOW permits follow one another; its debug
      log shows the repeated ``Sent message L:E``). With ``dedupe`` (the default) a
      message id seen before is dropped, so the result is what the topic holds.
    - pulsar-lite answers GetLastMessageId on a topic without messages with an error
      (brokers.md, quirk 2), which the client raises as ``UnknownError`` from the first
      ``has_message_available()``; with ``empty_ok`` (the default) that reads as an empty
      topic.
    - pulsar-lite's GetLastMessageId response carries no ``batch_index`` (the last entry's
      id only), so the official reader's ``has_message_available()`` turns False as soon
      as its queue runs dry while still inside the topic's last batch (seen under CPU
      load: 1 to 44 of a 100-message batch, then "no more"). When it says False right
      after a batched message, this keeps reading until nothing comes for
      ``batch_drain_ms`` (the rest of the batch is already in the client's memory).
    - When the connection breaks while ``has_message_available()`` waits for
      GetLastMessageId, the official client logs ``Failed to getLastMessageId:
      ResultDisconnected`` and returns **False** instead of raising; ``at_least`` (the
      number of messages known to be there) keeps reading regardless.
    - A reader that reconnects re-subscribes (same non-durable subscription name) with
      ``start_message_id`` = the last message it got, but pulsar-lite keeps the old
      subscription and dispatches from its original start again; the client drops what
      it has seen. Through a :class:`FaultProxy` that drops every K frames, a reader thus
      never gets past the first ~K messages: read the result from the broker directly.
    """
    pulsar = _pulsar()
    start = pulsar.MessageId.earliest if start is None else start
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    with official_client(service_url, **(client_options or {})) as client:
        _refuse_double_partition(client, topic)
        reader = client.create_reader(
            topic,
            start,
            start_message_id_inclusive=start_inclusive,
            receiver_queue_size=receiver_queue_size,
        )
        try:
            if at_least <= 0:
                try:
                    if not reader.has_message_available():
                        return out
                except pulsar.UnknownError:
                    if not empty_ok:
                        raise
                    return out
            in_batch = False  # the last message came from a batch
            while True:
                if len(out) < at_least or reader.has_message_available():
                    try:
                        msg = reader.read_next(read_timeout_ms)
                    except pulsar.Timeout:
                        err = (
                            f"{topic}: no message within {read_timeout_ms} ms after "
                            f"{len(out)} (expected at least {at_least})"
                        )
                        raise TimeoutError(err) from None
                elif in_batch and batch_drain_ms > 0:
                    # GetLastMessageId said "end" but may be in the middle of the last batch.
                    try:
                        msg = reader.read_next(batch_drain_ms)
                    except pulsar.Timeout:
                        break
                else:
                    break
                in_batch = msg.message_id().batch_index() >= 0
                item = _message_dict(msg)
                if dedupe:
                    if item["message_id"] in seen:
                        continue
                    seen.add(item["message_id"])
                out.append(item)
        finally:
            with contextlib.suppress(pulsar.PulsarException):
                reader.close()
    return out


def topic_partitions(service_url: str, topic: str) -> list[str]:
    """``client.get_topic_partitions(topic)``: the partition topic names (or the topic)."""
    with official_client(service_url) as client:
        return list(client.get_topic_partitions(topic))


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


def _session_broker(
    tmp_path_factory: pytest.TempPathFactory, name: str, **config: Any
) -> Iterator[PulsarLite]:
    broker = PulsarLite(tmp_path_factory.mktemp(name), name=name, shared=True, **config)
    try:
        broker.start()
        yield broker
    finally:
        broker.close()


@pytest.fixture(scope="session")
def pulsar_lite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarLite]:
    """A session-wide pulsar-lite with ``default_partitions = 0``."""
    yield from _session_broker(tmp_path_factory, "pulsar_lite", default_partitions=0)


@pytest.fixture(scope="session")
def pulsar_lite_partitioned(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulsarLite]:
    """A session-wide pulsar-lite with ``default_partitions = 4`` (every topic has 4)."""
    yield from _session_broker(
        tmp_path_factory, "pulsar_lite_partitioned", default_partitions=4
    )


def _node_slug(request: pytest.FixtureRequest, limit: int = 60) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")
    return slug[:limit].rstrip("-") or "test"


@pytest.fixture
def fresh_pulsar_lite(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[BrokerFactory]:
    """A factory of function-scoped brokers: ``fresh_pulsar_lite(**config) -> PulsarLite``."""
    factory = BrokerFactory(tmp_path_factory, f"pl-{_node_slug(request, 40)}")
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic of this test's own: ``persistent://public/default/<test>-<random>``."""
    return f"persistent://public/default/{_node_slug(request)}-{secrets.token_hex(4)}"


class ProxyFactory:
    """What ``fault_proxy`` yields: ``fault_proxy(target, drop_every_frames=None, **kw)``."""

    def __init__(self) -> None:
        self.instances: list[FaultProxy] = []

    def __call__(
        self,
        target: str | PulsarLite,
        drop_every_frames: int | None = None,
        **options: Any,
    ) -> FaultProxy:
        proxy = FaultProxy(target, drop_every_frames=drop_every_frames, **options)
        self.instances.append(proxy)
        return proxy.start()

    def close(self) -> None:
        for proxy in self.instances:
            proxy.close()


@pytest.fixture
def fault_proxy() -> Iterator[ProxyFactory]:
    """A factory of started :class:`FaultProxy` objects, all closed at teardown."""
    factory = ProxyFactory()
    try:
        yield factory
    finally:
        factory.close()


# ---------------------------------------------------------------------------
# Broker logs in failed-test reports
# ---------------------------------------------------------------------------

_LOG_MARKS = pytest.StashKey[dict[int, int]]()


def _brokers_of(item: pytest.Item) -> list[PulsarLite]:
    found: list[PulsarLite] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, PulsarLite):
            found.append(value)
        elif isinstance(value, BrokerFactory):
            found.extend(value.instances)
    unique: dict[int, PulsarLite] = {id(b): b for b in found}
    return list(unique.values())


def _proxies_of(item: pytest.Item) -> list[FaultProxy]:
    found: list[FaultProxy] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, FaultProxy):
            found.append(value)
        elif isinstance(value, ProxyFactory):
            found.extend(value.instances)
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    # Remember where each broker's log stood when the test body began.
    item.stash[_LOG_MARKS] = log_marks(_brokers_of(item))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    # A broker started by the test itself has no mark: all of its log is the test's.
    marks = item.stash.get(_LOG_MARKS, {})
    report.sections.extend(log_sections("pulsar-lite", _brokers_of(item), marks))
    for proxy in _proxies_of(item):
        report.sections.append((f"fault proxy {proxy.service_url}", repr(proxy.stats())))

