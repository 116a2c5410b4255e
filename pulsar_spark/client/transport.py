"""The byte pipe under a connection: a TCP or TLS socket, written by many threads and
read by one.

Until :meth:`Transport.start_reading` the socket is blocking (the handshake
reads it with deadlines). After it, plain TCP reads wait at most a tick, and
a TLS socket turns non-blocking: one SSL object must never be used by two
threads at once (OpenSSL's rule): a write racing the reader thread's read
made that read report EOF, and the connection was dropped for nothing (seen
after AUTH_CHALLENGE answers). So TLS reads and writes both go through one
lock, and the waits for readiness happen outside it.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time

from .auth import Authentication
from .config import TlsOptions
from .errors import ConnectError

__all__ = ["Transport"]

_RECV_SIZE = 256 * 1024


class Transport:
    """A connected socket; use :meth:`open`."""

    def __init__(self, sock: socket.socket, address: str, *, tls: bool) -> None:
        self.sock = sock
        self.address = address
        self._tls = tls
        self._lock = threading.Lock()
        self._tick = 1.0
        self._reading = False

    @classmethod
    def open(
        cls, host: str, port: int, *, tls: TlsOptions | None, auth: Authentication, timeout: float
    ) -> Transport:
        """Connect (and wrap in TLS) within ``timeout`` seconds.

        Raises:
            ConnectError: unreachable, or the TLS handshake failed.
        """
        address = f"{host}:{port}"
        try:
            sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            msg = f"cannot connect to {address}: {exc.strerror or exc}"
            raise ConnectError(msg) from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            try:
                sock = tls.context(auth).wrap_socket(sock, server_hostname=host)
            except ssl.SSLError as exc:
                sock.close()
                msg = f"TLS handshake with {address} failed: {exc}"
                raise ConnectError(msg) from exc
            except BaseException:
                sock.close()
                raise
        return cls(sock, address, tls=tls is not None)

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

    def start_reading(self, tick: float) -> None:
        """Switch to the reader thread's mode: :meth:`recv` waits at most ``tick`` s."""
        self._tick = tick
        if self._tls:
            self.sock.setblocking(False)
        else:
            self.sock.settimeout(tick)
        self._reading = True

    def send(self, data: bytes, timeout: float) -> None:
        """All of ``data``; a TLS write gives up after ``timeout`` seconds.

        Raises:
            OSError: the write failed or timed out.
        """
        with self._lock:
            if not self._tls or not self._reading:
                self.sock.sendall(data)  # plain TCP, or TLS before the reader started
            else:
                self._tls_sendall(data, timeout)

    def _tls_sendall(self, data: bytes, timeout: float) -> None:
        """All of ``data`` on the non-blocking TLS socket (lock held)."""
        sock = self.sock
        view = memoryview(data)
        deadline = time.monotonic() + timeout
        while view:
            try:
                view = view[sock.send(view) :]
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError):  # noqa: PERF203 - retry loop
                left = deadline - time.monotonic()
                if left <= 0:
                    msg = f"could not write to {self.address} for {timeout:g} s"
                    raise TimeoutError(msg) from None
                _wait_ready(sock, write=True, timeout=min(left, 1.0))

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
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


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
