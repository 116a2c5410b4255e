"""A frame-aware fault-injecting TCP proxy in front of a test broker.

:class:`FaultProxy` forwards a client's connections to one broker and breaks them on
purpose: it closes a connection after every K frames from the broker, on demand, stops
accepting, rewrites or swallows frames, and slows a link down (:mod:`.throttle`: a byte
rate and an added delay, per direction). The ``fault_proxy`` fixture
(:mod:`tests.support.plugin`) makes them.

Lookups and the proxy: a Pulsar client resolves a topic with LOOKUP, and pulsar-lite
answers with its own address (``pulsar://127.0.0.1:<broker port>``), so a client that
follows lookups would connect to the broker directly and bypass a proxy. pulsar-lite 0.2.0
has no advertised-address setting (``--addr`` is both bind and advertised address), so
:class:`FaultProxy` rewrites ``CommandLookupTopicResponse.brokerServiceUrl`` in every
LOOKUP_RESPONSE it forwards to its own ``service_url`` (``lookups_rewritten`` counts them).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pulsar_spark.protocol import Frame, FrameDecoder, encode_command, pb

from .lite import PulsarLite
from .net import free_port, parse_url
from .throttle import SMALL_BUFFER, Throttle

__all__ = ["FaultProxy", "FrameHook"]

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
      forward it, ``b""`` to swallow it, or other bytes to replace it);
    - pace each direction with a :class:`~.throttle.Throttle` (``to_broker``,
      ``to_client``: a byte rate and an added delay; set them before connections open).

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
        to_broker: Throttle | None = None,
        to_client: Throttle | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        url = target.service_url if isinstance(target, PulsarLite) else target
        self.target_url = url
        self.target = parse_url(url)
        if drop_every_frames is not None and drop_every_frames < 1:
            msg = "drop_every_frames must be >= 1 or None"
            raise ValueError(msg)
        self.drop_every_frames = drop_every_frames
        self.rewrite_lookups = rewrite_lookups
        #: Close with RST (SO_LINGER 0) instead of FIN.
        self.reset = reset
        self.frame_hook = frame_hook
        self.max_frame_size = max_frame_size
        self.to_broker, self.to_client = to_broker or Throttle(), to_client or Throttle()
        self._port = port or free_port()
        #: The name of the proxy in :attr:`service_url` (it listens on 127.0.0.1):
        #: ``localhost`` where a Kerberos service principal names that host.
        self.host = host
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
        return f"pulsar://{self.host}:{self._port}"

    @property
    def active_connections(self) -> int:
        with self._lock:
            return len(self._links)

    def stats(self) -> dict[str, Any]:
        names = ("connections_accepted", "active_connections", "drops", "frames_from_broker")
        more = ("lookups_rewritten", "bytes_to_broker", "bytes_to_client", "upstream_failures")
        stats = {"service_url": self.service_url, "target_url": self.target_url}
        stats |= {name: getattr(self, name) for name in (*names, *more)}
        return stats | {"errors": list(self.errors), "throttles": (self.to_broker, self.to_client)}

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
        for s, throttle in ((client, self.to_broker), (upstream, self.to_client)):
            if throttle.active:  # feel the slow link soon: no megabytes of kernel buffer
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SMALL_BUFFER)
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
                self.to_broker.sendall(link.upstream, data, time.monotonic())
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
                received_at = time.monotonic()
                if not data:
                    break
                if decoder is None:  # pass-through after a decode error
                    self.to_client.sendall(link.client, data, received_at)
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
                    self.to_client.sendall(link.client, out, received_at)
                    with self._lock:
                        self.bytes_to_client += len(out)
                if drop:
                    self._close_link(link, counted=True)
                    return
        except OSError:
            pass
        self._close_link(link, counted=False)
