"""One connection to one broker: transport, handshake, a reader thread, and
responses matched to their requests.

Threads. The caller's thread builds a command, sends it and waits. One
daemon reader thread per connection reads the socket at all times, so that
the broker's PINGs are answered promptly even while the task is busy
elsewhere; it completes waiters and hands other frames to handlers.

Matching, each by an explicit key:

================================  =========================================
frames                            routed by
================================  =========================================
SUCCESS, ERROR, *_RESPONSE,       ``request_id`` -> the waiting request
PRODUCER_SUCCESS
MESSAGE, REACHED_END_OF_TOPIC,    ``consumer_id`` -> the consumer's handler
CLOSE_CONSUMER, ACTIVE_CONSUMER_
CHANGE
SEND_RECEIPT, SEND_ERROR,         ``producer_id`` -> the producer's handler,
CLOSE_PRODUCER                    which matches ``sequence_id`` itself
TOPIC_MIGRATED                    ``resource_id`` of the given resource type
PING / AUTH_CHALLENGE             answered by the reader thread
================================  =========================================

A handler must be registered *before* the SUBSCRIBE or PRODUCER command that
creates it, since the broker may push frames right after its SUCCESS.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .. import __version__
from ..protocol import PulsarApi_pb2 as pb
from ..protocol.errors import ProtocolError, PulsarError, server_error
from ..protocol.framing import Frame, FrameDecoder, command_name, encode_command, subcommand
from .auth import Authentication, NoAuthentication
from .errors import ConnectError, ConnectionClosed, OperationTimeout

__all__ = ["Connection", "Handler", "TlsOptions", "PROTOCOL_VERSION", "CLIENT_VERSION"]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 21
CLIENT_VERSION = f"pulsar-spark-{__version__}"
_RECV_SIZE = 256 * 1024
T = pb.BaseCommand

_RESPONSES = frozenset(
    {
        T.SUCCESS,
        T.ERROR,
        T.PRODUCER_SUCCESS,
        T.PARTITIONED_METADATA_RESPONSE,
        T.LOOKUP_RESPONSE,
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        T.GET_SCHEMA_RESPONSE,
        T.GET_OR_CREATE_SCHEMA_RESPONSE,
        T.ACK_RESPONSE,
        T.CONSUMER_STATS_RESPONSE,
    }
)
_FOR_CONSUMER = frozenset(
    {T.MESSAGE, T.REACHED_END_OF_TOPIC, T.CLOSE_CONSUMER, T.ACTIVE_CONSUMER_CHANGE}
)
_FOR_PRODUCER = frozenset({T.SEND_RECEIPT, T.SEND_ERROR, T.CLOSE_PRODUCER})


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """TLS settings for ``pulsar+ssl://``.

    Args:
        trust_certs_file: CA bundle to verify the broker with (system roots when None).
        validate_hostname: check the certificate against the host name.
        allow_insecure: accept any certificate (testing only).
    """

    trust_certs_file: str | None = None
    validate_hostname: bool = True
    allow_insecure: bool = False

    def context(self, auth: Authentication) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.trust_certs_file)
        if self.allow_insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = self.validate_hostname
        if auth.tls_cert_file:
            ctx.load_cert_chain(auth.tls_cert_file, auth.tls_key_file)
        return ctx


class Handler(Protocol):
    """What consumers and producers register to receive their frames."""

    def frame_received(self, frame: Frame) -> None: ...

    def connection_closed(self, error: PulsarError) -> None: ...


class _Waiter:
    __slots__ = ("done", "error", "frame")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.frame: Frame | None = None
        self.error: BaseException | None = None


class Connection:
    """A connected, handshaken connection to one broker (or proxy).

    Use :meth:`open` to create one. All methods are thread-safe.

    Args:
        host, port: where to connect.
        tls: TLS options, or None for plain TCP.
        auth: authentication provider.
        connect_timeout: seconds for TCP connect, TLS and handshake.
        operation_timeout: default seconds :meth:`request` waits for an answer.
        proxy_to_broker_url: ask a Pulsar proxy to forward to this broker.
        keepalive_interval: seconds of silence after which we PING the broker;
            after two intervals without any data the connection is dead.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: TlsOptions | None = None,
        auth: Authentication | None = None,
        connect_timeout: float = 10.0,
        operation_timeout: float = 30.0,
        proxy_to_broker_url: str | None = None,
        keepalive_interval: float = 30.0,
    ) -> None:
        self.host, self.port = host, port
        self.address = f"{host}:{port}"
        self._tls = tls
        self._auth = auth or NoAuthentication()
        self.connect_timeout = connect_timeout
        self.operation_timeout = operation_timeout
        self._proxy_to = proxy_to_broker_url
        self._keepalive = keepalive_interval
        self._sock: socket.socket | None = None
        self._decoder = FrameDecoder()
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._waiters: dict[int, _Waiter] = {}
        self._handlers: dict[tuple[str, int], Handler] = {}
        self._ids = {kind: itertools.count() for kind in ("request", "consumer", "producer")}
        self._closed = threading.Event()
        self._close_error: PulsarError | None = None
        self._reader: threading.Thread | None = None
        self._last_received = time.monotonic()
        self.server_version = ""
        self.protocol_version = 0
        self.max_message_size: int | None = None
        #: PINGs from the broker answered, and PINGs we sent.
        self.pings_answered = 0
        self.pings_sent = 0
        self._pinged_at = 0.0

    # -- life cycle ------------------------------------------------------------

    @classmethod
    def open(cls, host: str, port: int, **options: object) -> Connection:
        """Connect, handshake and start the reader thread.

        Raises:
            ConnectError: unreachable, TLS failure, or no CONNECTED in time.
            ServerError: the broker refused the CONNECT (e.g. AuthenticationError).
        """
        conn = cls(host, port, **options)  # type: ignore[arg-type]
        conn._connect()
        return conn

    def _connect(self) -> None:
        deadline = time.monotonic() + self.connect_timeout
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            msg = f"cannot connect to {self.address}: {exc.strerror or exc}"
            raise ConnectError(msg) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if self._tls is not None:
                sock = self._tls.context(self._auth).wrap_socket(sock, server_hostname=self.host)
            self._sock = sock
            self._handshake(deadline)
        except ssl.SSLError as exc:
            sock.close()
            msg = f"TLS handshake with {self.address} failed: {exc}"
            raise ConnectError(msg) from exc
        except BaseException:
            sock.close()
            raise
        if self._tls is not None:
            # One SSL object must never be used by two threads at once (OpenSSL's rule):
            # a write racing the reader thread's read made that read report EOF, and the
            # connection was dropped for nothing (seen after AUTH_CHALLENGE answers). So
            # TLS reads and writes both go through _send_lock, on a non-blocking socket,
            # and the waits for readiness happen outside the lock (_recv, _send).
            sock.setblocking(False)
        else:
            sock.settimeout(min(self._keepalive, 1.0))
        self._reader = threading.Thread(
            target=self._read_loop, name=f"pulsar-reader-{self.address}", daemon=True
        )
        self._reader.start()

    def _handshake(self, deadline: float) -> None:
        connect = pb.CommandConnect(
            client_version=CLIENT_VERSION,
            protocol_version=PROTOCOL_VERSION,
            feature_flags=pb.FeatureFlags(
                supports_auth_refresh=True, supports_broker_entry_metadata=True
            ),
        )
        if self._auth.sends_credentials:
            connect.auth_method_name = self._auth.method_name
            connect.auth_data = self._auth.auth_data()
        if self._proxy_to:
            connect.proxy_to_broker_url = self._proxy_to
        self._send(encode_command(pb.BaseCommand(type=T.CONNECT, connect=connect)))
        while True:
            frame = self._read_frame_blocking(deadline)
            kind = frame.command.type
            if kind == T.CONNECTED:
                connected = frame.command.connected
                self.server_version = connected.server_version
                self.protocol_version = connected.protocol_version
                if connected.HasField("max_message_size"):
                    self.max_message_size = connected.max_message_size
                    self._decoder.set_max_message_size(connected.max_message_size)
                return
            if kind == T.AUTH_CHALLENGE:
                self._answer_challenge()
            elif kind == T.ERROR:
                err = frame.command.error
                raise server_error(err.error, err.message, context=f"CONNECT to {self.address}")
            else:
                msg = f"{self.address} answered CONNECT with {command_name(kind)}"
                raise ConnectError(msg)

    def _read_frame_blocking(self, deadline: float) -> Frame:
        assert self._sock is not None
        while True:
            frame = self._decoder.next_frame()
            if frame is not None:
                return frame
            left = deadline - time.monotonic()
            if left <= 0:
                msg = f"no CONNECTED from {self.address} within {self.connect_timeout:g} s"
                raise ConnectError(msg)
            self._sock.settimeout(left)
            try:
                data = self._sock.recv(_RECV_SIZE)
            except TimeoutError:
                continue
            except OSError as exc:
                msg = f"connection to {self.address} failed during handshake: {exc}"
                raise ConnectError(msg) from exc
            if not data:
                msg = f"{self.address} closed the connection during the handshake"
                raise ConnectError(msg)
            self._decoder.feed(data)

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def close(self) -> None:
        """Close the connection; pending requests fail with ConnectionClosed."""
        self._shutdown(ConnectionClosed(f"connection to {self.address} closed by the client"))
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=5)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ids and handlers --------------------------------------------------------

    def new_id(self, kind: str) -> int:
        """A fresh ``request``, ``consumer`` or ``producer`` id, unique on this connection."""
        with self._lock:
            return next(self._ids[kind])

    def add_handler(self, kind: str, ident: int, handler: Handler) -> None:
        """Route frames for consumer or producer ``ident`` to ``handler``."""
        with self._lock:
            if self._closed.is_set():
                raise self._closed_error()
            self._handlers[(kind, ident)] = handler

    def remove_handler(self, kind: str, ident: int) -> None:
        with self._lock:
            self._handlers.pop((kind, ident), None)

    # -- sending -------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Send encoded frames.

        Raises:
            ConnectionClosed: the connection is closed or the write failed.
        """
        if self._closed.is_set():
            raise self._closed_error()
        self._send(data)

    def _send(self, data: bytes) -> None:
        assert self._sock is not None
        try:
            with self._send_lock:
                if self._tls is None or self._reader is None:
                    self._sock.sendall(data)  # plain TCP, or TLS before the reader started
                else:
                    self._tls_sendall(self._sock, data)
        except OSError as exc:
            error = ConnectionClosed(f"write to {self.address} failed: {exc}")
            self._shutdown(error)
            raise error from exc

    def _tls_sendall(self, sock: socket.socket, data: bytes) -> None:
        """All of ``data`` on the non-blocking TLS socket (``_send_lock`` held)."""
        view = memoryview(data)
        deadline = time.monotonic() + self.operation_timeout
        while view:
            try:
                view = view[sock.send(view):]
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):  # noqa: PERF203 - retry loop
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = f"could not write to {self.address} for {self.operation_timeout:g} s"
                    raise TimeoutError(msg) from None
                _wait_ready(sock, write=True, timeout=min(left, 1.0))

    def _recv(self, sock: socket.socket) -> bytes | None:
        """The next bytes from the broker; None when none came within the tick."""
        if self._tls is None:
            try:
                return sock.recv(_RECV_SIZE)
            except TimeoutError:
                return None
        assert isinstance(sock, ssl.SSLSocket)
        try:
            if not sock.pending() and not _wait_ready(
                sock, write=False, timeout=min(self._keepalive, 1.0)
            ):
                return None
        except ValueError as exc:  # closed by another thread meanwhile (fd -1)
            raise OSError(str(exc)) from exc
        with self._send_lock:
            try:
                return sock.recv(_RECV_SIZE)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return None  # a partial record, or one without application data

    def request(self, command: pb.BaseCommand, *, timeout: float | None = None) -> Frame:
        """Send a command that carries a ``request_id`` and wait for its answer.

        Returns:
            The answering frame (never an ERROR frame).

        Raises:
            ServerError: the broker answered ERROR (per-code subclass).
            OperationTimeout: no answer in time.
            ConnectionClosed: the connection went away first.
        """
        body = subcommand(command)
        request_id = body.request_id
        waiter = _Waiter()
        with self._lock:
            if self._closed.is_set():
                raise self._closed_error()
            self._waiters[request_id] = waiter
        try:
            self.send(encode_command(command))
            wait = self.operation_timeout if timeout is None else timeout
            if not waiter.done.wait(wait):
                msg = (
                    f"no answer to {command_name(command.type)} (request {request_id}) from "
                    f"{self.address} within {wait:g} s"
                )
                raise OperationTimeout(msg)
        finally:
            with self._lock:
                self._waiters.pop(request_id, None)
        if waiter.error is not None:
            raise waiter.error
        frame = waiter.frame
        assert frame is not None
        if frame.command.type == T.ERROR:
            err = frame.command.error
            raise server_error(
                err.error, err.message, context=f"{command_name(command.type)} to {self.address}"
            )
        return frame

    # -- the reader thread ---------------------------------------------------------

    def _read_loop(self) -> None:
        sock = self._sock
        assert sock is not None
        error: PulsarError
        try:
            # Frames that came in with CONNECTED are already buffered.
            self._dispatch_buffered()
            while not self._closed.is_set():
                data = self._recv(sock)
                if data is None:
                    self._keepalive_tick()
                    continue
                if not data:
                    error = ConnectionClosed(f"{self.address} closed the connection")
                    break
                self._last_received = time.monotonic()
                self._decoder.feed(data)
                self._dispatch_buffered()
            else:
                return
        except ProtocolError as exc:
            log.error("protocol error on connection to %s: %s", self.address, exc)
            error = exc
        except OSError as exc:
            error = ConnectionClosed(f"connection to {self.address} failed: {exc}")
        except PulsarError as exc:
            error = exc
        self._shutdown(error)

    def _dispatch_buffered(self) -> None:
        while (frame := self._decoder.next_frame()) is not None:
            self._dispatch(frame)

    def _keepalive_tick(self) -> None:
        silent = time.monotonic() - self._last_received
        if silent >= 2 * self._keepalive:
            msg = f"no data from {self.address} for {silent:.0f} s: connection presumed dead"
            raise ConnectionClosed(msg)
        if silent >= self._keepalive and self._pinged_at < self._last_received:
            self.pings_sent += 1
            self._pinged_at = time.monotonic()
            self._send(encode_command(pb.BaseCommand(type=T.PING, ping=pb.CommandPing())))

    def _dispatch(self, frame: Frame) -> None:
        command = frame.command
        kind = command.type
        if kind == T.PING:
            self._send(encode_command(pb.BaseCommand(type=T.PONG, pong=pb.CommandPong())))
            self.pings_answered += 1
        elif kind in _RESPONSES:
            body = subcommand(command)
            if kind == T.PRODUCER_SUCCESS and not body.producer_ready:
                return  # WaitForExclusive: the real answer comes later
            with self._lock:
                waiter = self._waiters.pop(body.request_id, None)
            if waiter is None:
                log.debug("%s for unknown request %d", command_name(kind), body.request_id)
                return
            waiter.frame = frame
            waiter.done.set()
        elif kind in _FOR_CONSUMER:
            self._to_handler("consumer", subcommand(command).consumer_id, frame)
        elif kind in _FOR_PRODUCER:
            self._to_handler("producer", subcommand(command).producer_id, frame)
        elif kind == T.TOPIC_MIGRATED:
            migrated = command.topicMigrated
            owner = "producer" if migrated.resource_type == migrated.Producer else "consumer"
            self._to_handler(owner, migrated.resource_id, frame)
        elif kind == T.AUTH_CHALLENGE:
            # A credential may take an HTTP round trip (OAuth2): keep reading meanwhile.
            threading.Thread(target=self._answer_challenge_safely, daemon=True).start()
        elif kind != T.PONG:
            log.warning("ignoring %s from %s", command_name(kind), self.address)

    def _to_handler(self, kind: str, ident: int, frame: Frame) -> None:
        with self._lock:
            handler = self._handlers.get((kind, ident))
        if handler is None:
            log.debug("%s for unknown %s %d", frame.type_name, kind, ident)
            return
        handler.frame_received(frame)

    def _answer_challenge(self) -> None:
        response = pb.CommandAuthResponse(
            client_version=CLIENT_VERSION,
            protocol_version=PROTOCOL_VERSION,
            response=pb.AuthData(
                auth_method_name=self._auth.method_name, auth_data=self._auth.auth_data()
            ),
        )
        self._send(encode_command(pb.BaseCommand(type=T.AUTH_RESPONSE, authResponse=response)))

    def _answer_challenge_safely(self) -> None:
        try:
            self._answer_challenge()
        except PulsarError as exc:
            log.error("cannot answer the auth challenge of %s: %s", self.address, exc)
            self._shutdown(exc)

    # -- failure -------------------------------------------------------------------

    def _closed_error(self) -> PulsarError:
        return self._close_error or ConnectionClosed(f"connection to {self.address} is closed")

    def _shutdown(self, error: PulsarError) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._close_error = error
            self._closed.set()
            waiters = list(self._waiters.values())
            self._waiters.clear()
            handlers = list(self._handlers.values())
            self._handlers.clear()
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for waiter in waiters:
            waiter.error = error
            waiter.done.set()
        for handler in handlers:
            _notify(handler.connection_closed, error)


def _wait_ready(sock: socket.socket, *, write: bool, timeout: float) -> bool:
    """Whether ``sock`` became readable (or writable) within ``timeout`` seconds
    (poll where there is one: select cannot watch descriptors above 1023)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLOUT if write else select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    readable, writable, _ = select.select([] if write else [sock], [sock] if write else [], [],
                                          timeout)
    return bool(readable or writable)


def _notify(callback: Callable[[PulsarError], None], error: PulsarError) -> None:
    try:
        callback(error)
    except Exception:  # a handler's bug must not stop the others from hearing
        log.exception("connection-closed handler failed")
