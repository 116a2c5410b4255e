"""The error hierarchy: classes, retriable flags, broker error codes."""

from __future__ import annotations

import copy
import inspect
import pickle

import pytest

from pulsar_spark.protocol import MessageId, codec_by_name, errors, pb
from pulsar_spark.protocol.errors import (
    ChecksumMismatch,
    CorruptMessage,
    EncodeError,
    FrameError,
    InvalidArgument,
    InvalidMessageId,
    ProtocolError,
    PulsarError,
    ServerError,
    TruncatedFrame,
    UnknownCodec,
    UnknownCommand,
    WireError,
    server_error,
)
from pulsar_spark.protocol.ids.position import InvalidPosition
from pulsar_spark.protocol.wire import fields, read_varint

PROTOCOL_ERRORS = [
    cls for _, cls in inspect.getmembers(errors, inspect.isclass) if issubclass(cls, ProtocolError)
]


def test_every_protocol_error_is_a_pulsar_error_and_fatal() -> None:
    names = {cls.__name__ for cls in PROTOCOL_ERRORS}
    assert names == {
        "ProtocolError",
        "FrameError",
        "TruncatedFrame",
        "FrameTooLarge",
        "CommandSizeError",
        "ChecksumMismatch",
        "CommandDecodeError",
        "UnknownCommand",
        "MetadataDecodeError",
        "CorruptMessage",
        "DecompressionError",
        "UncompressedSizeMismatch",
        "BatchDecodeError",
        "ChunkError",
        "WireError",
    }
    for cls in PROTOCOL_ERRORS:
        assert issubclass(cls, PulsarError)
        assert issubclass(cls, Exception)
        assert cls.retriable is False


def test_every_exported_error_is_a_pulsar_error() -> None:
    for name in errors.__all__:
        obj = getattr(errors, name)
        if inspect.isclass(obj):
            assert issubclass(obj, PulsarError), name


def test_protocol_error_names_offset_and_message_id() -> None:
    exc = TruncatedFrame("cut short", offset=4096, message_id="1:2:-1:-1")
    assert exc.offset == 4096
    assert exc.message_id == "1:2:-1:-1"
    assert exc.reason == "cut short"
    assert str(exc) == "cut short (frame at byte offset 4096, message 1:2:-1:-1)"
    assert str(CorruptMessage("bad", message_id="3:4:0:5")) == "bad (message 3:4:0:5)"
    assert str(ChecksumMismatch("crc", offset=0)) == "crc (frame at byte offset 0)"
    plain = ProtocolError("no place")
    assert str(plain) == "no place"
    assert plain.offset is None and plain.message_id is None


def test_unknown_command_keeps_its_type_value() -> None:
    exc = UnknownCommand("unknown command type 99", type_value=99, offset=13)
    assert exc.type_value == 99
    assert exc.offset == 13
    assert isinstance(exc, ProtocolError)
    assert not isinstance(exc, FrameError)


@pytest.mark.parametrize(
    "exc",
    [
        TruncatedFrame("x", offset=3, message_id="1:2:3:4"),
        UnknownCommand("u", type_value=99, offset=5),
        CorruptMessage("c"),
    ],
)
def test_protocol_errors_pickle_and_copy(exc: ProtocolError) -> None:
    for again in (pickle.loads(pickle.dumps(exc)), copy.copy(exc)):
        assert type(again) is type(exc)
        assert str(again) == str(exc)
        assert (again.offset, again.message_id, again.reason) == (
            exc.offset,
            exc.message_id,
            exc.reason,
        )


# ---------------------------------------------------------------------------
# Broker errors
# ---------------------------------------------------------------------------

RETRIABLE = {"ServiceNotReady", "TooManyRequests"}
FATAL = {
    "AuthenticationError",
    "AuthorizationError",
    "TopicNotFound",
    "TopicTerminatedError",
    "ProducerFenced",
    "IncompatibleSchema",
    "ChecksumError",
    "ProducerBusy",
    "NotAllowedError",
    "ProducerBlockedQuotaExceededException",
}


@pytest.mark.parametrize("name", sorted(RETRIABLE | FATAL))
def test_server_error_class_and_retriable(name: str) -> None:
    code = pb.ServerError.Value(name)
    exc = server_error(code, "the broker's words")
    assert isinstance(exc, ServerError)
    assert isinstance(exc, PulsarError)
    assert type(exc) is not ServerError
    assert exc.code == code
    assert type(exc).code == code
    assert exc.retriable is (name in RETRIABLE)
    assert exc.broker_message == "the broker's words"
    assert str(exc) == f"broker error {name}: the broker's words"


def test_server_error_class_names() -> None:
    assert type(server_error(pb.ServiceNotReady, "")).__name__ == "ServiceNotReadyError"
    assert type(server_error(pb.TooManyRequests, "")).__name__ == "TooManyRequestsError"
    assert type(server_error(pb.TopicNotFound, "")).__name__ == "TopicNotFoundError"
    assert type(server_error(pb.TopicTerminatedError, "")).__name__ == "TopicTerminatedError"
    assert type(server_error(pb.AuthenticationError, "")).__name__ == "AuthenticationError"
    assert errors.ServiceNotReadyError is type(server_error(pb.ServiceNotReady, ""))  # type: ignore[attr-defined]


def test_every_server_error_code_has_its_own_class() -> None:
    classes = set()
    for name, code in pb.ServerError.items():
        exc = server_error(code, "m")
        assert exc.code == code, name
        assert type(exc).__name__ in errors.__all__
        classes.add(type(exc))
    assert len(classes) == len(pb.ServerError.items())


def test_unknown_code_is_kept_and_fatal() -> None:
    exc = server_error(999, "from the future")
    assert type(exc) is ServerError
    assert exc.code == 999
    assert exc.retriable is False
    assert "ServerError(999)" in str(exc)
    assert "from the future" in str(exc)


def test_server_error_context() -> None:
    exc = server_error(pb.TopicNotFound, "no such topic", context="lookup persistent://a/b/c")
    assert str(exc) == "lookup persistent://a/b/c: broker error TopicNotFound: no such topic"
    assert exc.broker_message == "no such topic"


@pytest.mark.parametrize(
    "exc",
    [
        server_error(pb.ServiceNotReady, "busy", context="lookup"),
        server_error(pb.TopicNotFound, "gone"),
        server_error(999, "odd"),
    ],
    ids=["with context", "plain", "unknown code"],
)
def test_server_errors_pickle_and_copy(exc: ServerError) -> None:
    for again in (pickle.loads(pickle.dumps(exc)), copy.copy(exc)):
        assert type(again) is type(exc)
        assert str(again) == str(exc)
        assert again.code == exc.code
        assert again.retriable is exc.retriable
        assert again.broker_message == exc.broker_message


def test_server_error_is_not_a_protocol_error() -> None:
    assert not issubclass(ServerError, ProtocolError)
    assert not issubclass(errors.EncodeError, ProtocolError)


# ---------------------------------------------------------------------------
# Errors that are also ValueErrors
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [InvalidArgument, InvalidMessageId, UnknownCodec, WireError])
def test_value_errors_of_the_hierarchy(cls: type[PulsarError]) -> None:
    # Callers that catch ValueError keep working; the policy flag says "do not retry".
    assert issubclass(cls, PulsarError)
    assert issubclass(cls, ValueError)
    assert cls.retriable is False
    assert cls.__name__ in errors.__all__


def test_invalid_arguments_are_not_protocol_errors() -> None:
    # A bad value from the caller is not bytes from the peer.
    for cls in (InvalidArgument, InvalidMessageId, UnknownCodec):
        assert not issubclass(cls, ProtocolError)
        assert not issubclass(cls, EncodeError)
    assert issubclass(InvalidMessageId, InvalidArgument)
    assert issubclass(UnknownCodec, InvalidArgument)
    assert issubclass(InvalidPosition, PulsarError)
    assert issubclass(InvalidPosition, ValueError)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1", "is not ledger:entry[:partition[:batch_index]]"),
        ("1:2:3:4:5", "is not ledger:entry[:partition[:batch_index]]"),
        ("1:x", "has a part that is not an integer"),
        ("", "is not ledger:entry"),
        (f"{1 << 64}:0", "ledger or entry outside 64 bits"),
        (f"0:{-(1 << 63) - 1}", "ledger or entry outside 64 bits"),
        (f"1:2:{1 << 31}", "partition or batch index outside 32 bits"),
        (f"1:2:0:{-(1 << 31) - 1}", "partition or batch index outside 32 bits"),
    ],
)
def test_message_id_parse_raises_invalid_message_id(text: str, says: str) -> None:
    with pytest.raises(InvalidMessageId) as caught:
        MessageId.parse(text)
    assert says in str(caught.value)
    assert repr(text) in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_codec_by_name_raises_unknown_codec() -> None:
    with pytest.raises(UnknownCodec) as caught:
        codec_by_name("brotli")
    text = str(caught.value)
    assert "'brotli'" in text
    for name in ("lz4", "none", "snappy", "zlib", "zstd"):
        assert name in text
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff" * 11, "truncated or over-long varint"),
        (b"\x0b", "wire type 3"),
        (b"\x0a\x05ab", "runs past the end"),
    ],
)
def test_wire_errors(data: bytes, says: str) -> None:
    with pytest.raises(WireError, match=says) as caught:
        list(fields(data))
    assert isinstance(caught.value, ProtocolError)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(WireError, match="truncated or over-long varint before byte 1"):
        read_varint(b"\x80", 0)


@pytest.mark.parametrize(
    "exc",
    [InvalidMessageId("bad id"), UnknownCodec("bad codec"), WireError("bad wire")],
)
def test_value_errors_pickle(exc: PulsarError) -> None:
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc)
    assert str(again) == str(exc)
