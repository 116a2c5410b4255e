"""One connection to one broker: a reader thread, and answers matched to their requests.

Opening it runs the handshake (:mod:`.handshake`) over a :class:`~.transport.Transport`.
Threads. The caller's thread builds a command (:mod:`..protocol.commands`),
sends it and waits. One daemon reader thread per connection reads the socket
at all times, so that the broker's PINGs are answered promptly even while the
task is busy elsewhere; it completes waiters and hands other frames to
handlers, by the typed keys of :mod:`.dispatch`.

A handler must be registered *before* the SUBSCRIBE or PRODUCER command that
creates it, since the broker may push frames right after its SUCCESS.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import ProtocolError, PulsarError
from pulsar_spark.protocol.framing import (
    Frame,
    FrameDecoder,
    command_name,
    encode_command,
    subcommand,
)

from ..config import ClientConfig
from ..errors import ConnectionClosed
from ..names import ServiceUrl
from .capabilities import Capabilities
from .dispatch import Handler, IdKind, Key, route
from .handshake import auth_response, handshake
from .transport import Transport
from .waiter import Waiter

__all__ = [
    "Connection",
]

log = logging.getLogger(__name__)

T = pb.BaseCommand


class Connection:
    """A connected, handshaken connection to one broker (or proxy).

    Use :meth:`open` to create one. All methods are thread-safe.

    Args:
        host: the broker's host name.
        port: the broker's port.
        config: the client's configuration (TLS, auth, timeouts, keep-alive).
        proxy_to_broker_url: ask a Pulsar proxy to forward to this broker.
    """

    def __init__(
        self, host: str, port: int, config: ClientConfig, *, proxy_to_broker_url: str | None = None
    ) -> None:
        self.host, self.port = host, port
        self.address = f"{host}:{port}"
        self.config = config
        self._auth = config.auth
        #: This connection's side of the authentication (multi-step for SASL).
        self._exchange = config.auth.exchange(host)
        self.connect_timeout = config.connect_timeout
        self.operation_timeout = config.operation_timeout
        self._keepalive = config.keepalive_interval
        self._proxy_to = proxy_to_broker_url
        self._transport: Transport | None = None
        self._decoder = FrameDecoder()
        self._lock = threading.Lock()
        self._waiters: dict[Key, Waiter] = {}
        self._handlers: dict[Key, Handler] = {}
        self._ids = {kind: itertools.count() for kind in IdKind}
        self._closed = threading.Event()
        self._close_error: PulsarError | None = None
        self._reader: threading.Thread | None = None
        self._last_received = time.monotonic()
        #: Monotonic time bytes last came that completed no frame: a frame longer than
        #: one read was arriving, and whatever the broker sent after it waited.
        self.arriving_at = 0.0
        self.server_version = ""
        self.protocol_version = 0
        self.max_message_size: int | None = None
        #: What the broker implements, from its CONNECTED answer.
        self.capabilities = Capabilities.of("", 0)
        #: PINGs from the broker answered, and PINGs we sent.
        self.pings_answered = 0
        self.pings_sent = 0
        self._pinged_at = 0.0

    # -- life cycle ------------------------------------------------------------

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        config: ClientConfig | None = None,
        *,
        proxy_to_broker_url: str | None = None,
    ) -> Connection:
        """Connect, handshake and start the reader thread (``config``: a plain
        connection with default settings when None).

        Raises:
            ConnectError: unreachable, TLS failure, or no CONNECTED in time.
            ServerError: the broker refused the CONNECT (e.g. AuthenticationError).
        """
        if config is None:
            config = ClientConfig(ServiceUrl("pulsar", ((host, port),)))
        conn = cls(host, port, config, proxy_to_broker_url=proxy_to_broker_url)
        conn._connect()
        return conn

    def _connect(self) -> None:
        deadline = time.monotonic() + self.connect_timeout
        transport = Transport.open(
            self.host,
            self.port,
            tls=self.config.tls,
            auth=self._auth,
            timeout=self.connect_timeout,
        )
        self._transport = transport
        try:
            connected = handshake(
                transport,
                self._decoder,
                transport.send_blocking,
                exchange=self._exchange,
                proxy_to_broker_url=self._proxy_to,
                deadline=deadline,
                timeout=self.connect_timeout,
            )
        except BaseException:
            transport.close()
            raise
        self.server_version = connected.server_version
        self.protocol_version = connected.protocol_version
        self.max_message_size = connected.max_message_size
        self.capabilities = Capabilities.of(connected.server_version, connected.protocol_version)
        transport.start(min(self._keepalive, 1.0), self.operation_timeout, self._write_failed)
        self._reader = threading.Thread(
            target=self._read_loop, name=f"pulsar-reader-{self.address}", daemon=True
        )
        self._reader.start()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def has_unread(self) -> bool:
        """Whether bytes have arrived that the reader thread has not taken yet (a close
        the broker sent, say); False once closed."""
        transport = self._transport
        return not self.closed and transport is not None and transport.has_unread()

    @property
    def has_handlers(self) -> bool:
        """Whether a consumer or producer is registered on this connection."""
        with self._lock:
            return bool(self._handlers)

    def close(self) -> None:
        """Close the connection once the frames already queued are written (5 s at
        most); pending requests fail with ConnectionClosed."""
        if self._transport is not None and not self._closed.is_set():
            self._transport.drain(5.0)
        self._shutdown(ConnectionClosed(f"connection to {self.address} closed by the client"))
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(timeout=5)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ids and handlers --------------------------------------------------------

    def new_id(self, kind: IdKind) -> int:
        """A fresh request, consumer or producer id, unique on this connection."""
        with self._lock:
            return next(self._ids[kind])

    def new_key(self, kind: IdKind) -> Key:
        """:meth:`new_id` as a routing key."""
        return Key(kind, self.new_id(kind))

    def add_handler(self, key: Key, handler: Handler) -> None:
        """Route frames for the consumer or producer ``key`` to ``handler``."""
        with self._lock:
            if self._closed.is_set():
                raise self._closed_error()
            self._handlers[key] = handler

    def remove_handler(self, key: Key) -> None:
        with self._lock:
            self._handlers.pop(key, None)

    # -- sending -------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        """Queue encoded frames for the writer thread (in order; it never waits for
        the socket). A write that fails later closes the connection, and every
        handler hears of it.

        Raises:
            ConnectionClosed: the connection is closed.
        """
        self._send(data)

    def send_command(self, command: pb.BaseCommand) -> None:
        """Send a command that has no answer (FLOW, ACK, ...)."""
        self._send(encode_command(command))

    def _send(self, data: bytes, *, urgent: bool = False) -> None:
        transport = self._transport
        if self._closed.is_set() or transport is None or not transport.enqueue(data, urgent=urgent):
            raise self._closed_error()

    def _write_failed(self, exc: OSError) -> None:
        """From the writer thread: a write failed, or moved no byte for the
        operation timeout."""
        self._shutdown(ConnectionClosed(f"write to {self.address} failed: {exc}"))

    def request(
        self,
        command: pb.BaseCommand,
        *,
        expect: commands.CommandType | None = None,
        timeout: float | None = None,
    ) -> Frame:
        """Send a command that carries a ``request_id`` and wait for its answer.

        Args:
            expect: the answer's command type; by default the one
                :data:`~..protocol.commands.ANSWERS` gives for the request.

        Returns:
            The answering frame, of type ``expect``.

        Raises:
            ServerError: the broker answered ERROR (per-code subclass).
            UnexpectedAnswer: the broker answered with another command type.
            OperationTimeout: no answer within the timeout (``timeout``, else the
                operation timeout) of nothing moving on the connection
                (:mod:`.waiter`).
            ConnectionClosed: the connection went away first.
        """
        if expect is None:
            expect = commands.ANSWERS[command.type]
        key = Key(IdKind.REQUEST, subcommand(command).request_id)
        waiter = Waiter()
        with self._lock:
            if self._closed.is_set():
                raise self._closed_error()
            self._waiters[key] = waiter
        name = command_name(command.type)
        try:
            self._send(encode_command(command))
            wait = self.operation_timeout if timeout is None else timeout
            waiter.wait(wait, self.moving_at, f"{name} ({key}) from {self.address}")
        finally:
            with self._lock:
                self._waiters.pop(key, None)
        return waiter.answer(f"{name} to {self.address}", key, expect)

    # -- the reader thread ---------------------------------------------------------

    def _read_loop(self) -> None:
        transport = self._transport
        assert transport is not None
        error: PulsarError
        try:
            # Frames that came in with CONNECTED are already buffered.
            self._dispatch_buffered()
            while not self._closed.is_set():
                data = transport.recv()
                if data is None:
                    self._keepalive_tick()
                    continue
                if not data:
                    error = ConnectionClosed(f"{self.address} closed the connection")
                    break
                self._last_received = now = time.monotonic()
                before = self._decoder.offset
                self._decoder.feed(data)
                self._dispatch_buffered()
                if self._decoder.offset == before:
                    self.arriving_at = now
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

    def moving_at(self) -> float:
        """When frames last moved that others may be queued behind: :attr:`arriving_at`,
        or bytes being written (:meth:`~.transport.Transport.sending_at`)."""
        transport = self._transport
        sending = 0.0 if transport is None else transport.sending_at()
        return max(self.arriving_at, sending)

    def _dispatch_buffered(self) -> None:
        while (frame := self._decoder.next_frame()) is not None:
            self._dispatch(frame)

    def _keepalive_tick(self) -> None:
        # A frame that takes long to write holds back the peer's answers, but bytes
        # that keep moving show it alive.
        assert self._transport is not None
        silent = time.monotonic() - max(self._last_received, self._transport.moved_at)
        if silent >= 2 * self._keepalive:
            msg = f"no data from {self.address} for {silent:.0f} s: connection presumed dead"
            raise ConnectionClosed(msg)
        if silent >= self._keepalive and self._pinged_at < self._last_received:
            self.pings_sent += 1
            self._pinged_at = time.monotonic()
            self._send(encode_command(commands.ping()), urgent=True)

    def _dispatch(self, frame: Frame) -> None:
        command = frame.command
        kind = command.type
        if kind == T.PING:
            self._send(encode_command(commands.pong()), urgent=True)
            self.pings_answered += 1
            return
        if kind == T.AUTH_CHALLENGE:
            # A credential may take an HTTP round trip (OAuth2): keep reading meanwhile.
            threading.Thread(
                target=self._answer_challenge_safely, args=(command.authChallenge,), daemon=True
            ).start()
            return
        key = route(command)
        if key is None:
            if kind != T.PONG:
                log.warning("ignoring %s from %s", command_name(kind), self.address)
        elif key.kind is IdKind.REQUEST:
            if kind == T.PRODUCER_SUCCESS and not command.producer_success.producer_ready:
                return  # WaitForExclusive: the real answer comes later
            with self._lock:
                waiter = self._waiters.pop(key, None)
            if waiter is None:
                log.debug("%s for unknown %s", command_name(kind), key)
                return
            waiter.frame = frame
            waiter.done.set()
        else:
            with self._lock:
                handler = self._handlers.get(key)
            if handler is None:
                log.debug("%s for unknown %s", frame.type_name, key)
                return
            handler.frame_received(frame)

    def _answer_challenge_safely(self, challenge: pb.CommandAuthChallenge) -> None:
        try:
            self._send(auth_response(self._exchange, challenge))
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
        if self._transport is not None:
            self._transport.close()
        for waiter in waiters:
            waiter.error = error
            waiter.done.set()
        for handler in handlers:
            _notify(handler.connection_closed, error)


def _notify(callback: Callable[[PulsarError], None], error: PulsarError) -> None:
    try:
        callback(error)
    except Exception:  # a handler's bug must not stop the others from hearing
        log.exception("connection-closed handler failed")
