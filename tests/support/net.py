"""Loopback ports, the Pulsar CONNECT handshake and polling: what every test broker needs.

:func:`free_port` picks a loopback port below the ephemeral range (a broker port there
could be taken by some client's source port while the broker restarts);
:func:`handshake` sends a Pulsar CONNECT and returns the CONNECTED or ERROR reply (the
readiness probe of both brokers); :func:`poll_until` waits for a condition;
:func:`parse_url` splits ``pulsar://HOST:PORT``.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path

from pulsar_spark.protocol import FrameDecoder, encode_command, pb

__all__ = ["free_port", "handshake", "parse_url", "poll_until", "port_is_free"]


def poll_until(check: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Call ``check`` every ``interval`` s until it returns true (True) or ``timeout``
    seconds have passed (False)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True


# ---------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------


def _ephemeral_range() -> tuple[int, int]:
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def port_is_free(port: int) -> bool:
    """Whether 127.0.0.1:port can be bound now (strictly: no SO_REUSEADDR)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A free loopback port *below* the ephemeral range.

    The kernel hands out ephemeral ports as source ports of outgoing connections; a broker
    port taken from that range could be grabbed by some client socket while the broker is
    down for a restart.
    """
    lo, _ = _ephemeral_range()
    top = min(lo - 1, 32767)
    if top > 12000:
        rng = random.Random()
        for _ in range(200):
            port = rng.randint(10000, top)
            if port_is_free(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------
# Readiness handshake
# ---------------------------------------------------------------------------


def handshake(
    host: str,
    port: int,
    *,
    timeout: float = 5.0,
    tls_ca: str | None = None,
    token: str | None = None,
    client_version: str = "pulsar-spark-readiness",
) -> pb.CommandConnected | pb.CommandError | None:
    """CONNECT (over TLS when ``tls_ca`` is given, with a token when given): the
    CONNECTED or ERROR reply, None on anything else or when the broker did not answer
    in time."""
    connect = pb.CommandConnect(client_version=client_version, protocol_version=21)
    if token is not None:
        connect.auth_method_name = "token"
        connect.auth_data = token.encode()
    deadline = time.monotonic() + timeout
    try:
        sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
        with contextlib.closing(sock):
            if tls_ca is not None:
                sock = ssl.create_default_context(cafile=tls_ca).wrap_socket(
                    sock, server_hostname=host
                )
            sock.sendall(
                encode_command(pb.BaseCommand(type=pb.BaseCommand.CONNECT, connect=connect))
            )
            decoder = FrameDecoder()
            while True:
                frame = decoder.next_frame()
                if frame is not None:
                    if frame.command.type == pb.BaseCommand.CONNECTED:
                        return frame.command.connected
                    if frame.command.type == pb.BaseCommand.ERROR:
                        return frame.command.error
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                data = sock.recv(65536)
                if not data:
                    return None
                decoder.feed(data)
    except (OSError, ValueError):
        return None


def parse_url(url: str) -> tuple[str, int]:
    """``pulsar://HOST:PORT`` as ``(host, port)``; ``ValueError`` on anything else."""
    m = re.fullmatch(r"pulsar://([^:/]+):(\d+)/?", url)
    if not m:
        msg = f"not a pulsar://HOST:PORT url: {url!r}"
        raise ValueError(msg)
    return m.group(1), int(m.group(2))
