"""Framing: encoding commands into frames and decoding a byte stream back into frames."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from pulsar_spark.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
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
    command_name,
    decode_frame_body,
    encode_command,
    encode_payload_command,
    frame_limit_for,
    pb,
    subcommand,
)
from pulsar_spark.protocol.message_id import to_unsigned64

T = pb.BaseCommand
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF

# ---------------------------------------------------------------------------
# Builders
# ---------------------------------------------------------------------------


def ping() -> pb.BaseCommand:
    return T(type=T.PING, ping=pb.CommandPing())


def send_command(sequence_id: int = 7) -> pb.BaseCommand:
    return T(type=T.SEND, send=pb.CommandSend(producer_id=3, sequence_id=sequence_id))


def message_command(ledger: int = 12, entry: int = 34) -> pb.BaseCommand:
    return T(
        type=T.MESSAGE,
        message=pb.CommandMessage(
            consumer_id=5,
            message_id=pb.MessageIdData(
                ledgerId=to_unsigned64(ledger), entryId=to_unsigned64(entry), partition=2
            ),
        ),
    )


def metadata(**fields: object) -> pb.MessageMetadata:
    base: dict[str, object] = {
        "producer_name": "prod",
        "sequence_id": 7,
        "publish_time": 1_700_000_000_123,
    }
    base.update(fields)
    return pb.MessageMetadata(**base)


PING = encode_command(ping())
PING_SIZE = len(PING)  # 13: 4 + 4 + 5-byte command


def raw_frame(command_bytes: bytes, rest: bytes = b"", *, cmd_size: int | None = None) -> bytes:
    """A frame built by hand: sizes, command bytes, then whatever follows."""
    size = len(command_bytes) if cmd_size is None else cmd_size
    return struct.pack(">II", 4 + len(command_bytes) + len(rest), size) + command_bytes + rest


def decode_one(data: bytes, **kwargs: int):
    decoder = FrameDecoder(**kwargs)
    decoder.feed(data)
    frame = decoder.next_frame()
    assert frame is not None
    assert decoder.next_frame() is None
    decoder.close()
    return frame


def failing_decoder(bad: bytes) -> tuple[FrameDecoder, ProtocolError]:
    """Feed a PING then ``bad``; return the decoder and the error ``bad`` causes."""
    decoder = FrameDecoder()
    decoder.feed(PING + bad)
    assert decoder.next_frame().type_name == "PING"
    with pytest.raises(ProtocolError) as info:
        decoder.next_frame()
        decoder.close()
    return decoder, info.value


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

SIMPLE_COMMANDS = {
    "PING": ping(),
    "PONG": T(type=T.PONG, pong=pb.CommandPong()),
    "CONNECT": T(
        type=T.CONNECT,
        connect=pb.CommandConnect(
            client_version="pulsar-spark",
            protocol_version=21,
            auth_method_name="token",
            auth_data=b"\x00secret\xff",
            feature_flags=pb.FeatureFlags(
                supports_auth_refresh=True, supports_broker_entry_metadata=True
            ),
        ),
    ),
    "CONNECTED": T(
        type=T.CONNECTED,
        connected=pb.CommandConnected(
            server_version="Pulsar", protocol_version=20, max_message_size=10 << 20
        ),
    ),
    "FLOW": T(type=T.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=1000)),
    "SEND_RECEIPT (-1:-1 dedup)": T(
        type=T.SEND_RECEIPT,
        send_receipt=pb.CommandSendReceipt(
            producer_id=1,
            sequence_id=2,
            message_id=pb.MessageIdData(ledgerId=U64_MAX, entryId=U64_MAX),
        ),
    ),
    "ERROR": T(
        type=T.ERROR,
        error=pb.CommandError(request_id=9, error=pb.ServiceNotReady, message="not yet"),
    ),
    "ACK": T(
        type=T.ACK,
        ack=pb.CommandAck(
            consumer_id=1,
            ack_type=pb.CommandAck.Individual,
            message_id=[pb.MessageIdData(ledgerId=1, entryId=2, ack_set=[-1, 5])],
        ),
    ),
    "TOPIC_MIGRATED": T(
        type=T.TOPIC_MIGRATED,
        topicMigrated=pb.CommandTopicMigrated(
            resource_id=4,
            resource_type=pb.CommandTopicMigrated.Consumer,
            brokerServiceUrl="pulsar://elsewhere:6650",
        ),
    ),
}


@pytest.mark.parametrize("command", SIMPLE_COMMANDS.values(), ids=SIMPLE_COMMANDS.keys())
def test_simple_command_round_trip(command: pb.BaseCommand) -> None:
    data = encode_command(command)
    body = command.SerializeToString()
    assert data == struct.pack(">II", len(body) + 4, len(body)) + body

    frame = decode_one(data)
    assert frame.command == command
    assert frame.offset == 0
    assert frame.size == len(data)
    assert frame.metadata is None
    assert frame.payload is None
    assert frame.broker_entry_metadata is None
    assert frame.has_checksum is False
    assert frame.type_name == command_name(command.type)
    assert subcommand(frame.command) == subcommand(command)


def test_ping_frame_bytes() -> None:
    # total_size 9, command_size 5, BaseCommand{type: PING(18), ping: {}}
    assert PING.hex() == "00000009" "00000005" "0812" "9201" "00"


PAYLOADS = {"empty": b"", "small": b"hello", "binary": bytes(range(256)) * 3, "big": b"x" * 300_000}


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
@pytest.mark.parametrize("command", [send_command(), message_command()], ids=["SEND", "MESSAGE"])
def test_payload_command_round_trip(command: pb.BaseCommand, payload: bytes) -> None:
    meta = metadata(
        partition_key="k",
        properties=[pb.KeyValue(key="a", value="b")],
        event_time=1_600_000_000_000,
    )
    data = encode_payload_command(command, meta, payload)
    frame = decode_one(data)
    assert frame.command == command
    assert frame.metadata == meta
    assert isinstance(frame.payload, memoryview)
    assert bytes(frame.payload) == payload
    assert frame.has_checksum is True
    assert frame.size == len(data)
    assert frame.broker_entry_metadata is None
    assert frame.broker_publish_time is None
    assert frame.broker_index is None


def test_payload_command_accepts_serialized_metadata() -> None:
    meta = metadata()
    assert encode_payload_command(send_command(), meta.SerializeToString(), b"p") == (
        encode_payload_command(send_command(), meta, b"p")
    )


@pytest.mark.parametrize(
    ("bem", "publish_time", "index"),
    [
        (pb.BrokerEntryMetadata(broker_timestamp=17_000, index=41), 17_000, 41),
        (pb.BrokerEntryMetadata(broker_timestamp=5), 5, None),
        (pb.BrokerEntryMetadata(index=0), None, 0),
        (pb.BrokerEntryMetadata(), None, None),
    ],
    ids=["both", "timestamp only", "index only", "empty"],
)
def test_broker_entry_metadata_round_trip(
    bem: pb.BrokerEntryMetadata, publish_time: int | None, index: int | None
) -> None:
    meta = metadata(num_messages_in_batch=1)
    data = encode_payload_command(message_command(), meta, b"payload", broker_entry_metadata=bem)
    frame = decode_one(data)
    assert frame.broker_entry_metadata == bem
    assert frame.broker_publish_time == publish_time
    assert frame.broker_index == index
    assert frame.metadata == meta
    assert bytes(frame.payload) == b"payload"
    assert frame.has_checksum is True


def test_encoded_layout_has_magic_and_crc32c() -> None:
    command = send_command()
    meta = metadata()
    payload = b"the payload"
    data = encode_payload_command(command, meta, payload)
    body = command.SerializeToString()
    meta_bytes = meta.SerializeToString()

    total, cmd_size = struct.unpack_from(">II", data)
    assert total == len(data) - 4
    assert cmd_size == len(body)
    pos = 8 + cmd_size
    magic, checksum = struct.unpack_from(">HI", data, pos)
    assert magic == 0x0E01
    covered = data[pos + 6 :]
    assert covered == struct.pack(">I", len(meta_bytes)) + meta_bytes + payload
    assert checksum == crc32c(covered)


def test_encoded_layout_with_broker_entry_metadata() -> None:
    # 0x0e02 block first, then 0x0e01 + CRC32C, which does not cover the 0x0e02 block.
    bem = pb.BrokerEntryMetadata(broker_timestamp=1, index=2)
    data = encode_payload_command(message_command(), metadata(), b"p", broker_entry_metadata=bem)
    (cmd_size,) = struct.unpack_from(">I", data, 4)
    pos = 8 + cmd_size
    magic, size = struct.unpack_from(">HI", data, pos)
    assert (magic, size) == (0x0E02, bem.ByteSize())
    assert data[pos + 6 : pos + 6 + size] == bem.SerializeToString()
    pos += 6 + size
    magic, checksum = struct.unpack_from(">HI", data, pos)
    assert magic == 0x0E01
    assert checksum == crc32c(data[pos + 6 :])


def test_checksum_does_not_cover_broker_entry_metadata() -> None:
    bem = pb.BrokerEntryMetadata(index=5)
    data = bytearray(
        encode_payload_command(message_command(), metadata(), b"p", broker_entry_metadata=bem)
    )
    marker = bytes([0x10, 5])  # field 2 (index), varint 5
    at = data.index(marker)
    data[at + 1] = 6
    frame = decode_one(bytes(data))
    assert frame.broker_index == 6
    assert frame.has_checksum is True


def test_golden_send_frames_re_encode_byte_for_byte(golden) -> None:
    # The official client's SEND frames, rebuilt from their parts, are the same
    # bytes: same layout, same checksum.
    data = golden.data("client-to-broker")
    for frame in golden.frames("client-to-broker"):
        original = data[frame.offset : frame.offset + frame.size]
        if frame.metadata is None:
            assert encode_command(frame.command) == original
        else:
            rebuilt = encode_payload_command(frame.command, frame.metadata, frame.payload)
            assert rebuilt == original


def test_message_without_checksum_is_accepted() -> None:
    # What pulsar-lite sends: no 0x0e01 block at all.
    command = message_command()
    meta = metadata()
    rest = struct.pack(">I", meta.ByteSize()) + meta.SerializeToString() + b"body"
    frame = decode_one(raw_frame(command.SerializeToString(), rest))
    assert frame.has_checksum is False
    assert frame.metadata == meta
    assert bytes(frame.payload) == b"body"


def test_message_with_broker_entry_metadata_but_no_checksum() -> None:
    bem = pb.BrokerEntryMetadata(broker_timestamp=77, index=3)
    meta = metadata()
    rest = (
        struct.pack(">HI", 0x0E02, bem.ByteSize())
        + bem.SerializeToString()
        + struct.pack(">I", meta.ByteSize())
        + meta.SerializeToString()
        + b"body"
    )
    frame = decode_one(raw_frame(message_command().SerializeToString(), rest))
    assert frame.has_checksum is False
    assert (frame.broker_publish_time, frame.broker_index) == (77, 3)
    assert bytes(frame.payload) == b"body"


def test_several_frames_in_one_feed_keep_their_offsets() -> None:
    parts = [
        PING,
        encode_payload_command(message_command(entry=1), metadata(), b"one"),
        encode_command(SIMPLE_COMMANDS["FLOW"]),
        encode_payload_command(message_command(entry=2), metadata(), b"two"),
    ]
    decoder = FrameDecoder()
    decoder.feed(b"".join(parts))
    frames = list(decoder)
    decoder.close()
    offsets = [0]
    for part in parts[:-1]:
        offsets.append(offsets[-1] + len(part))
    assert [f.offset for f in frames] == offsets
    assert [f.size for f in frames] == [len(p) for p in parts]
    assert [f.type_name for f in frames] == ["PING", "MESSAGE", "FLOW", "MESSAGE"]
    assert [bytes(f.payload) for f in frames if f.payload is not None] == [b"one", b"two"]
    assert decoder.offset == sum(len(p) for p in parts)


def test_decode_frame_body_directly() -> None:
    data = encode_payload_command(send_command(), metadata(), b"abc")
    frame = decode_frame_body(data[4:], offset=100)
    assert frame.offset == 100
    assert frame.size == len(data)
    assert bytes(frame.payload) == b"abc"


# ---------------------------------------------------------------------------
# Partial input
# ---------------------------------------------------------------------------


def test_partial_frames_return_none_until_complete() -> None:
    data = encode_payload_command(send_command(), metadata(), b"0123456789")
    decoder = FrameDecoder()
    for i, byte in enumerate(data[:-1]):
        decoder.feed(bytes([byte]))
        assert decoder.next_frame() is None
        assert decoder.buffered == i + 1
    decoder.feed(data[-1:])
    frame = decoder.next_frame()
    assert frame is not None
    assert bytes(frame.payload) == b"0123456789"
    assert decoder.next_frame() is None
    assert decoder.buffered == 0
    decoder.close()


def test_close_with_complete_frames_not_taken_is_fine() -> None:
    decoder = FrameDecoder()
    decoder.feed(PING + PING)
    decoder.close()
    assert [f.type_name for f in decoder] == ["PING", "PING"]


def test_empty_input_closes_cleanly() -> None:
    decoder = FrameDecoder()
    decoder.feed(b"")
    assert decoder.next_frame() is None
    decoder.close()


# ---------------------------------------------------------------------------
# The frame limit
# ---------------------------------------------------------------------------


def test_default_limits() -> None:
    assert DEFAULT_MAX_MESSAGE_SIZE == 5 * 1024 * 1024
    assert FRAME_PADDING == 10 * 1024
    assert DEFAULT_MAX_FRAME_SIZE == 5 * 1024 * 1024 + 10 * 1024
    assert FrameDecoder().max_frame_size == DEFAULT_MAX_FRAME_SIZE
    assert frame_limit_for(1_000) == 1_000 + 10 * 1024


def size_prefix(frame_size: int) -> bytes:
    """The 4-byte total_size of a frame of ``frame_size`` bytes in all."""
    return struct.pack(">I", frame_size - 4)


def test_frame_at_the_default_limit_is_buffered() -> None:
    decoder = FrameDecoder()
    decoder.feed(size_prefix(DEFAULT_MAX_FRAME_SIZE))
    assert decoder.next_frame() is None  # waits for the body


def test_frame_above_the_default_limit_fails_on_its_size_prefix() -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(size_prefix(DEFAULT_MAX_FRAME_SIZE + 1))
    assert info.value.offset == 0
    assert str(DEFAULT_MAX_FRAME_SIZE) in str(info.value)
    assert "byte offset 0" in str(info.value)


def test_size_prefix_split_over_feeds_is_checked_when_complete() -> None:
    decoder = FrameDecoder()
    prefix = size_prefix(DEFAULT_MAX_FRAME_SIZE + 1)
    decoder.feed(PING)
    assert decoder.next_frame() is not None
    decoder.feed(prefix[:3])
    assert decoder.next_frame() is None
    with pytest.raises(FrameTooLarge) as info:
        decoder.feed(prefix[3:])
    assert info.value.offset == PING_SIZE


@pytest.mark.parametrize("max_message_size", [1_000, 64 * 1024, 10 * 1024 * 1024])
def test_limit_follows_set_max_message_size(max_message_size: int) -> None:
    limit = max_message_size + 10 * 1024
    decoder = FrameDecoder()
    decoder.set_max_message_size(max_message_size)
    assert decoder.max_frame_size == limit
    decoder.feed(size_prefix(limit))
    assert decoder.next_frame() is None

    decoder = FrameDecoder()
    decoder.set_max_message_size(max_message_size)
    with pytest.raises(FrameTooLarge):
        decoder.feed(size_prefix(limit + 1))


def test_frame_exactly_at_limit_decodes() -> None:
    data = encode_payload_command(send_command(), metadata(), b"z" * 500)
    assert bytes(decode_one(data, max_frame_size=len(data)).payload) == b"z" * 500
    with pytest.raises(FrameTooLarge):
        decode_one(data, max_frame_size=len(data) - 1)


def test_frames_before_an_oversized_one_are_not_lost() -> None:
    decoder = FrameDecoder(max_frame_size=1_000)
    decoder.feed(PING + PING + size_prefix(1_001))
    assert decoder.next_frame().type_name == "PING"
    assert decoder.next_frame().type_name == "PING"
    with pytest.raises(FrameTooLarge) as info:
        decoder.next_frame()
    assert info.value.offset == 2 * PING_SIZE


def test_raising_the_limit_applies_to_frames_already_buffered() -> None:
    # CONNECTED raises the limit; the frame right behind it in the same read
    # is judged by the new limit.
    connected = encode_command(SIMPLE_COMMANDS["CONNECTED"])
    big = encode_payload_command(message_command(), metadata(), b"m" * 2_000)
    decoder = FrameDecoder(max_frame_size=1_000)
    decoder.feed(connected + big)
    frame = decoder.next_frame()
    decoder.set_max_message_size(frame.command.connected.max_message_size)
    assert bytes(decoder.next_frame().payload) == b"m" * 2_000


def test_lowering_the_limit_applies_to_the_next_frame() -> None:
    decoder = FrameDecoder()
    decoder.feed(PING + encode_payload_command(message_command(), metadata(), b"m" * 2_000))
    decoder.next_frame()
    decoder.max_frame_size = 1_000
    with pytest.raises(FrameTooLarge):
        decoder.next_frame()


def test_encoder_limit_matches_the_decoder_limit() -> None:
    data = encode_payload_command(send_command(), metadata(), b"q" * 100)
    assert encode_payload_command(send_command(), metadata(), b"q" * 100, max_frame_size=len(data))
    with pytest.raises(EncodeError, match=str(len(data))):
        encode_payload_command(send_command(), metadata(), b"q" * 100, max_frame_size=len(data) - 1)


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


# ---------------------------------------------------------------------------
# command_name / subcommand
# ---------------------------------------------------------------------------


def test_command_name() -> None:
    assert command_name(T.SEND_RECEIPT) == "SEND_RECEIPT"
    assert command_name(T.TOPIC_MIGRATED) == "TOPIC_MIGRATED"
    assert command_name(99) == "UNKNOWN(99)"
    for name, value in T.Type.items():
        assert command_name(value) == name


def test_subcommand_is_the_field_numbered_like_the_type() -> None:
    assert subcommand(SIMPLE_COMMANDS["FLOW"]) is not None
    assert subcommand(SIMPLE_COMMANDS["FLOW"]).messagePermits == 1000
    for value in T.Type.values():
        command = T(type=value)
        field = T.DESCRIPTOR.fields_by_number[value]
        assert subcommand(command).DESCRIPTOR is field.message_type
