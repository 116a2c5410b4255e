"""The byte pipe under a connection: a TCP or TLS socket, read by one thread and written
by another, with an outbox in between.

Until :meth:`Transport.start` the socket is blocking (the handshake writes and
reads it with deadlines). After it, one reader thread (the connection's) reads
and one writer thread (ours) writes whole frames from the outbox, in order:
callers only queue (:meth:`Transport.enqueue`), so no caller, and above all
not the reader thread answering a PING or dispatching a receipt, ever waits
for a slow socket. A write fails only when no byte moves for the stall
timeout: a 5 MB frame over a slow link takes as long as it takes.

Plain TCP reads wait at most a tick. A TLS socket turns non-blocking: one SSL
object must never be used by two threads at once (OpenSSL's rule): a write
racing the reader thread's read made that read report EOF, and the connection
was dropped for nothing (seen after AUTH_CHALLENGE answers). So each TLS read
and each TLS write call goes through one lock, and the waits for readiness
happen outside it: a long write never keeps the reader out for longer than
one record.
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import threading
import time
from collections import deque
from collections.abc import Callable

from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.framing import FrameDecoder, encode_command

from ..auth import Authentication
from ..config import TlsOptions
from ..errors import ClientError, ConnectError

__all__ = ["CertificateRefused", "TlsMismatch", "Transport", "speaks_tls"]

try:
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):  # Windows
    _OUTQ = None

_RECV_SIZE = 256 * 1024


class TlsMismatch(ClientError):
    """The service URL's scheme does not match the port: it speaks plain Pulsar to a
    ``pulsar+ssl://`` URL, or TLS to a ``pulsar://`` one. A configuration error
    (fatal: retrying cannot help), found by probing the port once a connection
    failed."""


class CertificateRefused(ConnectError):
    """The broker's TLS certificate is not trusted (another CA, or the system's trust
    store that does not know the broker's CA) or does not name the host connected to. A
    configuration error: the same broker answers the same certificate, so it is not
    retried (fatal), unlike the other connect failures."""

    retriable = False


class Transport:
    """A connected socket; use :meth:`open`."""

    def __init__(self, sock: socket.socket, address: str, *, tls: bool) -> None:
        self.sock = sock
        self.address = address
        self._tls = tls
        self._lock = threading.Lock()  # one SSL call at a time
        self._tick = 1.0
        self._stall = 30.0
        self._reading = False
        self._outbox: deque[bytes | memoryview] = deque()
        self._out = threading.Condition()
        self._writing = False  # a thread is writing to the socket
        self._partial = False  # the outbox begins with the rest of a frame
        self._closed = False
        #: Bytes written since :meth:`start` (frames, whole or in part), and the
        #: monotonic time the last of them moved: the peer's TCP stack is alive then.
        self.bytes_written = 0
        self.moved_at = time.monotonic()
        #: Bytes the peer had not acknowledged when :meth:`sending_at` last looked, and
        #: since when.
        self._unacked = (0, 0.0)

    @property
    def tls(self) -> bool:
        """Whether the socket speaks TLS."""
        return self._tls

    @classmethod
    def open(
        cls, host: str, port: int, *, tls: TlsOptions | None, auth: Authentication, timeout: float
    ) -> Transport:
        """Connect (and wrap in TLS) within ``timeout`` seconds.

        Raises:
            ConnectError: unreachable, or the TLS handshake failed or took too long
                (:class:`CertificateRefused`, not retried, when the certificate is not
                trusted or does not name the host).
        """
        address = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            msg = f"cannot connect to {address}: {exc.strerror or exc}"
            raise ConnectError(msg) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            import ssl  # TLS only: a plain connection never loads it

            try:
                sock = tls.context(auth).wrap_socket(sock, server_hostname=host)
            except ssl.SSLCertVerificationError as exc:
                sock.close()
                msg = f"TLS handshake with {address} failed: {exc}"
                raise CertificateRefused(msg) from exc
            except TimeoutError as exc:
                sock.close()
                msg = f"TLS handshake with {address}: no answer within {timeout:g} s"
                raise _plain_or(ConnectError, msg, host, port, timeout) from exc
            except OSError as exc:  # ssl.SSLError included; a reset or EOF too
                sock.close()
                msg = f"TLS handshake with {address} failed: {exc}"
                raise _plain_or(ConnectError, msg, host, port, timeout) from exc
            except BaseException:
                sock.close()
                raise
        return cls(sock, address, tls=tls is not None)

    # -- the handshake (blocking, the caller's thread) ---------------------------------

    def recv_blocking(self, timeout: float) -> bytes | None:
        """Bytes within ``timeout`` seconds (the handshake), None when none came;
        ``b""`` when the peer closed.

        Raises:
            OSError: the read failed (an ``ssl.SSLError`` included).
        """
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(_RECV_SIZE)
        except TimeoutError:
            return None

    def send_blocking(self, data: bytes) -> None:
        """All of ``data`` before :meth:`start` (the socket's timeout applies).

        Raises:
            OSError: the write failed or timed out.
        """
        self.sock.sendall(data)

    # -- after the handshake -----------------------------------------------------------

    def start(self, tick: float, stall: float, on_error: Callable[[OSError], None]) -> None:
        """Switch to threaded mode: :meth:`recv` waits at most ``tick`` s, and a writer
        thread sends what :meth:`enqueue` queues; a write that moves no byte for
        ``stall`` seconds, or fails, is given to ``on_error`` (once) and the writer
        stops."""
        self._tick, self._stall = tick, stall
        if self._tls:
            self.sock.setblocking(False)
        else:
            self.sock.settimeout(tick)
        self._reading = True
        threading.Thread(
            target=self._write_loop,
            args=(on_error,),
            name=f"pulsar-writer-{self.address}",
            daemon=True,
        ).start()

    def enqueue(self, data: bytes, *, urgent: bool = False) -> bool:
        """Send ``data`` (whole frames) in order; False when closed. Never waits for
        the socket: on plain TCP, when nothing is queued or being written, as much as
        the socket takes at once goes out from this thread (no hand-over to the writer
        thread for the common case), the rest is queued. ``urgent`` frames (PING,
        PONG) go before queued frames, never inside one."""
        out = self._out
        with out:
            if self._closed:
                return False
            direct = not (self._tls or self._writing or self._outbox)
            if direct:
                self._writing = True
            elif urgent:
                # Never ahead of the rest of a frame begun by a direct write.
                self._outbox.insert(1 if self._partial else 0, data)
            else:
                self._outbox.append(data)
            if not direct:
                out.notify_all()
                return True
        sent = 0
        try:
            if _wait_ready(self.sock, write=True, timeout=0):
                sent = self.sock.send(data, socket.MSG_DONTWAIT)
        except (OSError, ValueError):
            sent = 0  # the writer thread meets the error and reports it
        if sent:
            self.bytes_written += sent
            self.moved_at = time.monotonic()
        with out:
            self._writing = False
            if sent < len(data):
                self._outbox.appendleft(memoryview(data)[sent:] if sent else data)
                self._partial = sent > 0
            out.notify_all()
        return True

    def sending_at(self) -> float:
        """When written bytes last moved towards the peer, as far as seen (monotonic):
        now while frames wait or are being written (a write that moves nothing for
        the stall timeout fails); else the last call that saw the count of bytes the
        peer has not acknowledged change (the kernel holds megabytes: 30 s and more
        of a slow link), down to none. Unlocked: a hint."""
        if self._outbox or self._writing:
            return time.monotonic()
        left = _unacknowledged(self.sock)
        if left != self._unacked[0]:
            self._unacked = (left, time.monotonic())
        return self._unacked[1]

    def has_unread(self) -> bool:
        """Whether bytes have arrived on the socket that no one has read yet (False once
        it is closed: its reader sees that too)."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):  # closed under us
            return False
        return bool(readable)

    def drain(self, timeout: float) -> bool:
        """Wait until everything queued is written (at most ``timeout`` s)."""
        with self._out:
            return self._out.wait_for(
                lambda: self._closed or not (self._outbox or self._writing), timeout
            )

    def _write_loop(self, on_error: Callable[[OSError], None]) -> None:
        out = self._out
        while True:
            with out:
                self._writing = False
                out.notify_all()
                while (not self._outbox or self._writing) and not self._closed:
                    out.wait()
                if self._closed:
                    return
                data = self._outbox.popleft()
                self._writing, self._partial = True, False
            try:
                self._write(data)
            except (OSError, ValueError) as exc:  # ValueError: a TLS socket closed meanwhile
                if not isinstance(exc, OSError):
                    exc = OSError(str(exc))
                with out:
                    closed = self._closed
                if not closed:
                    on_error(exc)
                return

    def _write(self, data: bytes | memoryview) -> None:
        """All of ``data``; raises TimeoutError once no byte moved for the stall timeout."""
        sock = self.sock
        view = memoryview(data)
        moved = time.monotonic()
        while view:
            try:
                if self._tls:
                    with self._lock:
                        sent = sock.send(view)
                else:
                    sent = sock.send(view)  # waits at most a tick for room
            except (TimeoutError, BlockingIOError):
                self._stalled(moved)
                if self._tls:
                    _wait_ready(sock, write=True, timeout=self._tick)
                continue
            except OSError as exc:  # on a TLS socket (loaded ssl), it may want a read or write
                if not self._tls:
                    raise
                import ssl

                if isinstance(exc, ssl.SSLWantWriteError):
                    self._stalled(moved)
                    _wait_ready(sock, write=True, timeout=self._tick)
                    continue
                if isinstance(exc, ssl.SSLWantReadError):  # the reader thread reads it
                    self._stalled(moved)
                    time.sleep(0.005)
                    continue
                raise
            if sent:
                view = view[sent:]
                self.bytes_written += sent
                self.moved_at = moved = time.monotonic()

    def _stalled(self, moved: float) -> None:
        if self._closed:
            msg = "the transport was closed"
            raise OSError(msg)
        idle = time.monotonic() - moved
        if idle >= self._stall:
            msg = f"no byte could be written to {self.address} for {idle:.0f} s"
            raise TimeoutError(msg)

    def recv(self) -> bytes | None:
        """The next bytes from the peer (``b""``: it closed); None when none came
        within the tick.

        Raises:
            OSError: the read failed, or the socket was closed meanwhile.
        """
        sock = self.sock
        if not self._tls:
            try:
                return sock.recv(_RECV_SIZE)
            except TimeoutError:
                return None
        import ssl  # loaded by the TLS socket already

        assert isinstance(sock, ssl.SSLSocket)
        try:
            if not sock.pending() and not _wait_ready(sock, write=False, timeout=self._tick):
                return None
        except ValueError as exc:  # closed by another thread meanwhile (fd -1)
            raise OSError(str(exc)) from exc
        with self._lock:
            try:
                return sock.recv(_RECV_SIZE)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return None  # a partial record, or one without application data

    def close(self) -> None:
        """Close the socket; queued frames are dropped (:meth:`drain` first to keep them)."""
        with self._out:
            self._closed = True
            self._outbox.clear()
            self._out.notify_all()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


def _plain_or(
    error: type[ConnectError], msg: str, host: str, port: int, timeout: float
) -> PulsarError:
    """``error(msg)``, or a :class:`TlsMismatch` when ``host:port`` answers a plain
    CONNECT (a ``pulsar+ssl://`` URL given for a plain port)."""
    if _speaks_plain_pulsar(host, port, min(timeout, 3.0)):
        msg = (
            f"{msg}: {host}:{port} speaks plain Pulsar, not TLS: use pulsar:// for it, "
            "or the broker's TLS port"
        )
        return TlsMismatch(msg)
    return error(msg)


def _speaks_plain_pulsar(host: str, port: int, timeout: float) -> bool:
    """Whether a plain CONNECT to ``host:port`` is answered by a Pulsar frame."""
    connect = commands.connect(client_version="probe", protocol_version=21)
    decoder = FrameDecoder()
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(encode_command(connect))
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                data = sock.recv(65536)
                if not data:
                    return False
                decoder.feed(data)
                if decoder.next_frame() is not None:
                    return True
    except (OSError, PulsarError):
        return False
    return False


def speaks_tls(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` completes (or answers with a TLS alert) a TLS handshake:
    a ``pulsar://`` URL given for a TLS port closes the plain CONNECT unanswered."""
    import ssl  # a probe after a failed connection

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout) as raw,
            ctx.wrap_socket(raw, server_hostname=host),
        ):
            return True
    except ssl.SSLError as exc:
        return "ALERT" in str(exc).upper()  # a TLS server refusing us, still TLS
    except OSError:
        return False


def _unacknowledged(sock: socket.socket) -> int:
    """Bytes written to ``sock`` the peer has not acknowledged (Linux's SIOCOUTQ); 0
    where unknown."""
    if _OUTQ is None:
        return 0
    try:
        return int.from_bytes(fcntl.ioctl(sock.fileno(), _OUTQ, bytes(4)), sys.byteorder)
    except (OSError, ValueError):  # not Linux, or closed meanwhile
        return 0


def _wait_ready(sock: socket.socket, *, write: bool, timeout: float) -> bool:
    """Whether ``sock`` became readable (or writable) within ``timeout`` seconds
    (poll where there is one: select cannot watch descriptors above 1023)."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock, select.POLLOUT if write else select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    readable, writable, _ = select.select(
        [] if write else [sock], [sock] if write else [], [], timeout
    )
    return bool(readable or writable)
