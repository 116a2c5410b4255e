"""Frames encoded and decoded back: commands, payloads, broker entry metadata, golden captures."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from frame_builders import (
    PING,
    SIMPLE_COMMANDS,
    T,
    decode_one,
    message_command,
    metadata,
    raw_frame,
    send_command,
)

from pulsar_spark.protocol import (
    FrameDecoder,
    command_name,
    decode_frame_body,
    encode_command,
    encode_payload_command,
    pb,
    subcommand,
)

# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------


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
    assert PING.hex() == "00000009000000050812920100"


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
