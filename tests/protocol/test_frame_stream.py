"""Frame streams: partial input and the frame limit, checked before a frame is buffered."""

from __future__ import annotations

import struct

import pytest
from frame_builders import (
    PING,
    PING_SIZE,
    SIMPLE_COMMANDS,
    decode_one,
    message_command,
    metadata,
    send_command,
)

from pulsar_spark.protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    EncodeError,
    FrameDecoder,
    FrameTooLarge,
    encode_command,
    encode_payload_command,
    frame_limit_for,
)

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
