"""A connection against a scripted broker: credentials on the wire (CONNECT,
AUTH_CHALLENGE / AUTH_RESPONSE, refused auth), an answer of the wrong type; the retry
classifier.

pulsar-lite has no authentication, and Apache Pulsar sends AUTH_CHALLENGE only when
a credential expires (its tests are in the Apache suite). Here a scripted broker on
a loopback socket speaks the handshake with our framing and checks the bytes our
connection sends: which credential, and that it is fresh each time.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pulsar_spark.client import (
    Action,
    ConnectionClosed,
    NoAuthentication,
    TokenAuthentication,
    classify,
)
from pulsar_spark.client.auth import Authentication
from pulsar_spark.client.config import ClientConfig
from pulsar_spark.client.errors import UnexpectedAnswer
from pulsar_spark.client.net.connection import Connection
from pulsar_spark.client.net.dispatch import IdKind
from pulsar_spark.protocol import commands, pb
from pulsar_spark.protocol.errors import ProtocolError, PulsarError, ServerError, server_error
from pulsar_spark.protocol.framing import FrameDecoder, encode_command

T = pb.BaseCommand


class ScriptedBroker:
    """Accepts one connection and runs ``script(peer)`` on it in a thread."""

    def __init__(self, script: Callable[[ScriptedBroker], None]) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._script = script
        self._decoder = FrameDecoder()
        self._sock: socket.socket | None = None
        self.received: list[pb.BaseCommand] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._listener.settimeout(10)
            self._sock, _ = self._listener.accept()
            self._sock.settimeout(10)
            self._script(self)
        except BaseException as exc:  # reported by join()
            self.error = exc

    def expect(self, kind: int) -> pb.BaseCommand:
        """The next command from the client, skipping PINGs; it must be ``kind``."""
        assert self._sock is not None
        while True:
            frame = self._decoder.next_frame()
            if frame is None:
                data = self._sock.recv(65536)
                if not data:
                    msg = f"client closed while {T.Type.Name(kind)} was expected"
                    raise AssertionError(msg)
                self._decoder.feed(data)
                continue
            if frame.command.type == T.PING:
                continue
            self.received.append(frame.command)
            assert frame.command.type == kind, T.Type.Name(frame.command.type)
            return frame.command

    def send(self, command: pb.BaseCommand) -> None:
        assert self._sock is not None
        self._sock.sendall(encode_command(command))

    def challenge(self) -> None:
        self.send(
            T(
                type=T.AUTH_CHALLENGE,
                authChallenge=pb.CommandAuthChallenge(
                    server_version="scripted",
                    protocol_version=21,
                    challenge=pb.AuthData(auth_method_name="token", auth_data=b"refresh"),
                ),
            )
        )

    def connected(self) -> None:
        self.send(
            T(
                type=T.CONNECTED,
                connected=pb.CommandConnected(
                    server_version="scripted",
                    protocol_version=21,
                    max_message_size=1 << 20,
                ),
            )
        )

    def join(self) -> None:
        self._thread.join(15)
        if self._sock is not None:
            self._sock.close()
        self._listener.close()
        if self.error is not None:
            raise self.error


def _open(broker: ScriptedBroker, auth: Authentication) -> Connection:
    config = dataclasses.replace(
        ClientConfig.for_url(f"pulsar://127.0.0.1:{broker.port}"),
        auth=auth,
        connect_timeout=5,
        operation_timeout=5,
    )
    return Connection.open("127.0.0.1", broker.port, config)


def test_connect_carries_the_token_and_each_challenge_gets_a_fresh_one(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("token-1\n")
    responses: list[bytes] = []
    rotated = threading.Event()
    done = threading.Event()

    def script(peer: ScriptedBroker) -> None:
        connect = peer.expect(T.CONNECT).connect
        assert (connect.auth_method_name, connect.auth_data) == ("token", b"token-1")
        assert connect.protocol_version == 21
        # A challenge inside the handshake, before CONNECTED.
        peer.challenge()
        responses.append(peer.expect(T.AUTH_RESPONSE).authResponse.response.auth_data)
        peer.connected()
        # And one on an established connection, after the file was rotated.
        assert rotated.wait(5)
        peer.challenge()
        response = peer.expect(T.AUTH_RESPONSE).authResponse
        assert response.response.auth_method_name == "token"
        assert response.protocol_version == 21
        responses.append(response.response.auth_data)
        done.set()

    broker = ScriptedBroker(script)
    conn = _open(broker, TokenAuthentication(token_file=str(token_file)))
    try:
        assert conn.max_message_size == 1 << 20
        token_file.write_text("token-2\n")
        rotated.set()
        assert done.wait(5)
        assert not conn.closed
    finally:
        conn.close()
        broker.join()
    assert responses == [b"token-1", b"token-2"]


def test_refused_credentials_fail_the_connect_with_the_brokers_message() -> None:
    def script(peer: ScriptedBroker) -> None:
        peer.expect(T.CONNECT)
        peer.send(
            T(
                type=T.ERROR,
                error=pb.CommandError(
                    request_id=0,
                    error=pb.AuthenticationError,
                    message="Failed to authentication token: JWT expired",
                ),
            )
        )

    broker = ScriptedBroker(script)
    with pytest.raises(
        ServerError, match="AuthenticationError: Failed to authentication token"
    ) as caught:
        _open(broker, TokenAuthentication("expired"))
    broker.join()
    assert not caught.value.retriable
    assert "127.0.0.1" in str(caught.value)


def test_a_credential_that_cannot_be_renewed_closes_the_connection_with_its_error() -> None:
    calls = [0]

    def token() -> str:
        calls[0] += 1
        if calls[0] > 1:
            msg = "token service down"
            raise TokenServiceDown(msg)
        return "first"

    closed = threading.Event()

    def script(peer: ScriptedBroker) -> None:
        peer.expect(T.CONNECT)
        peer.connected()
        peer.challenge()
        assert peer._sock is not None
        peer._sock.settimeout(5)
        while peer._sock.recv(65536):
            pass  # until the client closes: it must not answer with a stale token
        closed.set()

    broker = ScriptedBroker(script)
    conn = _open(broker, TokenAuthentication(token))
    try:
        assert closed.wait(5)
        assert conn.closed
        assert "token service down" in str(conn._closed_error())
    finally:
        conn.close()
        broker.join()
    assert not [c for c in broker.received if c.type == T.AUTH_RESPONSE]


class TokenServiceDown(PulsarError):
    """A credential provider's failure, as our providers raise them."""

    retriable = True


def test_an_answer_of_another_type_is_a_protocol_error_not_default_values() -> None:
    def script(peer: ScriptedBroker) -> None:
        peer.expect(T.CONNECT)
        peer.connected()
        asked = peer.expect(T.PARTITIONED_METADATA).partitionMetadata
        # A LOOKUP_RESPONSE for the partition metadata request: read unchecked, its
        # fields would have looked like "0 partitions".
        answer = pb.CommandLookupTopicResponse(request_id=asked.request_id)
        peer.send(T(type=T.LOOKUP_RESPONSE, lookupTopicResponse=answer))
        peer.expect(T.PARTITIONED_METADATA)  # the connection is still usable
        response = pb.CommandPartitionedTopicMetadataResponse(
            request_id=asked.request_id + 1, partitions=3
        )
        peer.send(T(type=T.PARTITIONED_METADATA_RESPONSE, partitionMetadataResponse=response))

    broker = ScriptedBroker(script)
    with _open(broker, NoAuthentication()) as conn:
        with pytest.raises(UnexpectedAnswer, match="answered with LOOKUP_RESPONSE") as info:
            conn.request(commands.partitioned_metadata(conn.new_id(IdKind.REQUEST), "t"))
        assert isinstance(info.value, ProtocolError)
        assert not info.value.retriable
        assert classify(info.value) is Action.FATAL
        frame = conn.request(commands.partitioned_metadata(conn.new_id(IdKind.REQUEST), "t"))
        assert frame.command.partitionMetadataResponse.partitions == 3
    broker.join()


def test_retry_policy_in_one_place() -> None:
    busy = server_error(pb.ProducerBusy, "producer name in use")
    assert classify(busy) is Action.RETRY and not busy.retriable
    assert classify(server_error(pb.ConsumerBusy, "exclusive")) is Action.RETRY
    assert classify(server_error(pb.ServiceNotReady, "unloading")) is Action.RECONNECT
    assert classify(server_error(pb.AuthorizationError, "no")) is Action.FATAL
    assert classify(ConnectionClosed("gone")) is Action.RECONNECT
    assert classify(ValueError("a bug")) is Action.FATAL
