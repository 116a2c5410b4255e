"""Framing errors: one class per problem, each naming the frame's byte offset; encoding errors."""

from __future__ import annotations

import struct

import pytest
from frame_builders import (
    PING,
    PING_SIZE,
    T,
    failing_decoder,
    message_command,
    metadata,
    ping,
    raw_frame,
    send_command,
)

from pulsar_spark.protocol import (
    ChecksumMismatch,
    CommandDecodeError,
    CommandSizeError,
    EncodeError,
    FrameDecoder,
    FrameTooLarge,
    MetadataDecodeError,
    ProtocolError,
    PulsarError,
    TruncatedFrame,
    UnknownCommand,
    encode_command,
    encode_payload_command,
    pb,
)

# ---------------------------------------------------------------------------
# Errors: one class per problem, each naming the frame's byte offset
# ---------------------------------------------------------------------------


def flip(data: bytes, index: int) -> bytes:
    out = bytearray(data)
    out[index] ^= 0x01
    return bytes(out)


def _checksum_frame() -> bytes:
    return encode_payload_command(send_command(), metadata(), b"payload bytes")


def _meta_past_end() -> bytes:
    rest = struct.pack(">I", 1_000) + metadata().SerializeToString()
    return raw_frame(message_command().SerializeToString(), rest)


def _bem_past_end() -> bytes:
    rest = struct.pack(">HI", 0x0E02, 500) + b"\x08\x01"
    return raw_frame(message_command().SerializeToString(), rest)


def _send_without_metadata() -> bytes:
    return raw_frame(send_command().SerializeToString())


def _cmd_size_past_frame() -> bytes:
    return raw_frame(ping().SerializeToString(), cmd_size=100)


def _trailing_after_ping() -> bytes:
    return raw_frame(ping().SerializeToString(), b"\x00\x01\x02")


def _type_99() -> bytes:
    return raw_frame(bytes([0x08, 99]))


def _garbage_command() -> bytes:
    return raw_frame(b"\xff\xff\xff\xff\xff")


def _send_without_body() -> bytes:
    meta = metadata()
    rest = struct.pack(">I", meta.ByteSize()) + meta.SerializeToString()
    return raw_frame(T(type=T.SEND).SerializeToString(), rest)


def _command_without_required_field() -> bytes:
    command = T(type=T.SEND_RECEIPT)
    command.send_receipt.producer_id = 1  # sequence_id is required too
    return raw_frame(command.SerializePartialToString())


def _command_without_type() -> bytes:
    return raw_frame(b"")


def _garbage_metadata() -> bytes:
    rest = struct.pack(">I", 4) + b"\xff\xff\xff\xff" + b"payload"
    return raw_frame(message_command().SerializeToString(), rest)


def _metadata_without_required_fields() -> bytes:
    meta = pb.MessageMetadata(producer_name="p")  # no sequence_id, no publish_time
    meta_bytes = meta.SerializePartialToString()
    rest = struct.pack(">I", len(meta_bytes)) + meta_bytes
    return raw_frame(message_command().SerializeToString(), rest)


def _garbage_broker_entry_metadata() -> bytes:
    meta = metadata()
    rest = (
        struct.pack(">HI", 0x0E02, 3)
        + b"\xff\xff\xff"
        + struct.pack(">I", meta.ByteSize())
        + meta.SerializeToString()
    )
    return raw_frame(message_command().SerializeToString(), rest)


BAD_FRAMES = {
    "flipped payload byte": (lambda: flip(_checksum_frame(), -1), ChecksumMismatch, "CRC32C"),
    "flipped metadata byte": (
        lambda: flip(_checksum_frame(), len(_checksum_frame()) - 14),
        ChecksumMismatch,
        "CRC32C",
    ),
    "flipped checksum": (
        lambda: flip(_checksum_frame(), 8 + send_command().ByteSize() + 2),
        ChecksumMismatch,
        "CRC32C",
    ),
    "metadata size past the end": (_meta_past_end, TruncatedFrame, "metadata size 1000"),
    "broker entry size past the end": (_bem_past_end, TruncatedFrame, "broker entry metadata"),
    "SEND without metadata": (_send_without_metadata, TruncatedFrame, "metadata size"),
    "command size past the frame": (_cmd_size_past_frame, CommandSizeError, "command size 100"),
    "bytes after a PING": (_trailing_after_ping, CommandSizeError, "3 bytes follow"),
    "type 99": (_type_99, UnknownCommand, "unknown command type 99"),
    "garbage command": (_garbage_command, CommandDecodeError, "cannot decode"),
    "SEND without its send body": (_send_without_body, CommandDecodeError, "'send' body"),
    "missing required field": (
        _command_without_required_field,
        CommandDecodeError,
        "send_receipt.sequence_id",
    ),
    "command without type": (_command_without_type, CommandDecodeError, "no type"),
    "garbage metadata": (_garbage_metadata, MetadataDecodeError, "message metadata"),
    "metadata without required fields": (
        _metadata_without_required_fields,
        MetadataDecodeError,
        "publish_time",
    ),
    "garbage broker entry metadata": (
        _garbage_broker_entry_metadata,
        MetadataDecodeError,
        "broker entry metadata",
    ),
}


@pytest.mark.parametrize(("build", "error", "text"), BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_bad_frame_raises_its_error_naming_the_offset(build, error, text) -> None:
    decoder, exc = failing_decoder(build())
    assert type(exc) is error
    assert exc.offset == PING_SIZE
    assert f"byte offset {PING_SIZE}" in str(exc)
    assert text in str(exc)
    assert isinstance(exc, PulsarError)
    assert exc.retriable is False

    # The stream cannot be resynchronised: every later call raises the same error.
    for call in (lambda: decoder.feed(PING), decoder.next_frame, decoder.close):
        with pytest.raises(error) as again:
            call()
        assert again.value is exc


def test_unknown_command_carries_its_type_value() -> None:
    _, exc = failing_decoder(_type_99())
    assert isinstance(exc, UnknownCommand)
    assert exc.type_value == 99
    assert not isinstance(exc, CommandDecodeError)


def test_unknown_type_next_to_a_valid_body() -> None:
    body = ping().SerializeToString().replace(bytes([0x08, 18]), bytes([0x08, 99]))
    _, exc = failing_decoder(raw_frame(body))
    assert type(exc) is UnknownCommand
    assert exc.type_value == 99


def test_checksum_mismatch_in_a_golden_frame(golden) -> None:
    data = golden.data("client-to-broker")
    send = golden.payload_frames("client-to-broker")[0]
    last = send.offset + send.size - 1
    decoder = FrameDecoder()
    decoder.feed(flip(data, last))
    with pytest.raises(ChecksumMismatch) as info:
        list(decoder)
    assert info.value.offset == send.offset
    assert f"byte offset {send.offset}" in str(info.value)


def test_error_classes_are_distinct() -> None:
    classes = {error for _, error, _ in BAD_FRAMES.values()} | {FrameTooLarge}
    assert len(classes) == 7
    for cls in classes:
        assert issubclass(cls, ProtocolError)
        others = classes - {cls}
        assert not any(issubclass(cls, other) for other in others)


def test_close_inside_a_frame() -> None:
    data = encode_payload_command(send_command(), metadata(), b"abc")
    decoder = FrameDecoder()
    decoder.feed(PING + data[:-1])
    assert decoder.next_frame().type_name == "PING"
    assert decoder.next_frame() is None
    with pytest.raises(TruncatedFrame) as info:
        decoder.close()
    assert info.value.offset == PING_SIZE
    assert f"byte offset {PING_SIZE}" in str(info.value)
    assert f"{len(data) - 1} bytes present of {len(data)} bytes" in str(info.value)
    with pytest.raises(TruncatedFrame):
        decoder.next_frame()


def test_close_inside_a_size_prefix() -> None:
    decoder = FrameDecoder()
    decoder.feed(PING + b"\x00\x00")
    with pytest.raises(TruncatedFrame) as info:
        decoder.close()
    assert info.value.offset == PING_SIZE
    assert "4-byte size" in str(info.value)


def test_frame_too_short_for_a_command_size() -> None:
    _, exc = failing_decoder(struct.pack(">I", 2) + b"\x00\x00")
    assert type(exc) is TruncatedFrame


# ---------------------------------------------------------------------------
# Encoding errors
# ---------------------------------------------------------------------------


def test_encode_command_refuses_payload_commands() -> None:
    with pytest.raises(EncodeError, match="encode_payload_command"):
        encode_command(send_command())


def test_encode_payload_command_refuses_simple_commands() -> None:
    with pytest.raises(EncodeError, match="encode_command"):
        encode_payload_command(ping(), metadata(), b"")


def test_encode_refuses_a_command_without_its_body() -> None:
    with pytest.raises(EncodeError, match="send_receipt"):
        encode_command(T(type=T.SEND_RECEIPT))


def test_encode_refuses_missing_required_fields() -> None:
    command = T(type=T.SEND_RECEIPT, send_receipt=pb.CommandSendReceipt(producer_id=1))
    with pytest.raises(EncodeError, match="sequence_id"):
        encode_command(command)
    with pytest.raises(EncodeError, match="publish_time"):
        encode_payload_command(send_command(), pb.MessageMetadata(producer_name="p"), b"")


def test_encode_errors_are_pulsar_errors() -> None:
    assert issubclass(EncodeError, PulsarError)
    assert not issubclass(EncodeError, ProtocolError)
