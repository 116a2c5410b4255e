"""The opening of a connection: CONNECT, auth challenges, CONNECTED, and the frames that
answer a challenge later on.

The caller's thread runs the handshake on the blocking socket, before the
connection's reader thread starts::

    -> CONNECT (client version, protocol version, credentials, proxy target)
    <- AUTH_CHALLENGE            -> AUTH_RESPONSE (fresh credentials), any number of times
    <- CONNECTED                 server version, protocol version, max message size
    <- ERROR                     the broker refused (AuthenticationError, ...)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import server_error
from pulsar_spark.protocol.framing import Frame, FrameDecoder, command_name, encode_command
from pulsar_spark.version import __version__

from ..auth import AuthExchange
from ..errors import ConnectError
from .transport import TlsMismatch, Transport, speaks_tls

__all__ = ["CLIENT_VERSION", "PROTOCOL_VERSION", "Connected", "auth_response", "handshake"]

PROTOCOL_VERSION = 21
CLIENT_VERSION = f"pulsar-spark-{__version__}"
T = pb.BaseCommand


@dataclass(frozen=True, slots=True)
class Connected:
    """What the broker said in CONNECTED."""

    server_version: str
    protocol_version: int
    #: None when the broker gives no limit (pulsar-lite).
    max_message_size: int | None


def auth_response(exchange: AuthExchange, challenge: pb.CommandAuthChallenge) -> bytes:
    """The AUTH_RESPONSE frame to ``challenge``: the exchange's answer to its bytes."""
    return encode_command(
        commands.auth_response(
            client_version=CLIENT_VERSION,
            protocol_version=PROTOCOL_VERSION,
            auth_method_name=exchange.auth.method_name,
            auth_data=exchange.answer(challenge.challenge.auth_data),
        )
    )


def handshake(
    transport: Transport,
    decoder: FrameDecoder,
    send: Callable[[bytes], None],
    *,
    exchange: AuthExchange,
    proxy_to_broker_url: str | None,
    deadline: float,
    timeout: float,
) -> Connected:
    """Send CONNECT and read up to CONNECTED by ``deadline`` (monotonic time, set
    ``timeout`` seconds before); frames that follow CONNECTED stay in ``decoder``
    for the reader thread.

    Raises:
        ConnectError: no CONNECTED in time, the peer closed, or an unexpected answer.
        TlsMismatch: the peer closed a plain connection and speaks TLS.
        ServerError: the broker refused the CONNECT.
    """
    address = transport.address
    auth = exchange.auth
    credentials = auth.sends_credentials
    send(
        encode_command(
            commands.connect(
                client_version=CLIENT_VERSION,
                protocol_version=PROTOCOL_VERSION,
                auth_method_name=auth.method_name if credentials else None,
                auth_data=exchange.first() if credentials else None,
                proxy_to_broker_url=proxy_to_broker_url,
            )
        )
    )
    while True:
        frame = _next_frame(transport, decoder, deadline, timeout)
        kind = frame.command.type
        if kind == T.CONNECTED:
            connected = frame.command.connected
            limit = None
            if connected.HasField("max_message_size"):
                limit = connected.max_message_size
                decoder.set_max_message_size(limit)
            return Connected(connected.server_version, connected.protocol_version, limit)
        if kind == T.AUTH_CHALLENGE:
            send(auth_response(exchange, frame.command.authChallenge))
        elif kind == T.ERROR:
            err = frame.command.error
            raise server_error(err.error, err.message, context=f"CONNECT to {address}")
        else:
            msg = f"{address} answered CONNECT with {command_name(kind)}"
            raise ConnectError(msg)


def _next_frame(
    transport: Transport, decoder: FrameDecoder, deadline: float, timeout: float
) -> Frame:
    address = transport.address
    while True:
        frame = decoder.next_frame()
        if frame is not None:
            return frame
        left = deadline - time.monotonic()
        if left <= 0:
            msg = f"no CONNECTED from {address} within {timeout:g} s"
            raise ConnectError(msg)
        try:
            data = transport.recv_blocking(left)
        except OSError as exc:
            msg = f"connection to {address} failed during handshake: {exc}"
            raise ConnectError(msg) from exc
        if data is None:
            continue
        if not data:
            msg = f"{address} closed the connection during the handshake"
            if not transport.tls:
                host, _, port = address.rpartition(":")
                if speaks_tls(host, int(port), min(left, 3.0)):
                    # A TLS port closes a plain CONNECT unanswered.
                    msg += f": {address} speaks TLS: use pulsar+ssl:// for it"
                    raise TlsMismatch(msg)
            raise ConnectError(msg)
        decoder.feed(data)
