"""Frames for the protocol tests: MESSAGE and SEND frames from built entries, cut and read back."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c
from hypothesis import strategies as st

from pulsar_spark.protocol import Frame, FrameDecoder, Message, encode_payload_command, pb
from pulsar_spark.protocol.ids.message_id import to_unsigned64
from tests.protocol.entry_strategies import Built, built_entries, ledger_entry_numbers

# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------


def message_command(
    ledger: int,
    entry: int,
    partition: int = -1,
    *,
    ack_set: list[int] | None = None,
    consumer_id: int = 1,
) -> pb.BaseCommand:
    mid = pb.MessageIdData(ledgerId=to_unsigned64(ledger), entryId=to_unsigned64(entry))
    if partition != -1:
        mid.partition = partition
    msg = pb.CommandMessage(consumer_id=consumer_id, message_id=mid)
    if ack_set:
        msg.ack_set.extend(ack_set)
    return pb.BaseCommand(type=pb.BaseCommand.MESSAGE, message=msg)


def send_command(producer_id: int, sequence_id: int, num_messages: int) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=pb.BaseCommand.SEND,
        send=pb.CommandSend(
            producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages
        ),
    )


def raw_payload_frame(
    command: bytes,
    metadata: bytes,
    payload: bytes,
    *,
    broker_entry_metadata: bytes | None = None,
    checksum: bool = True,
    crc: int | None = None,
) -> bytes:
    """A payload frame assembled from raw parts, with correct sizes.

    Used by the fuzz tests to frame mutated metadata or payload bytes (so the
    CRC still matches and decoding gets past it), or to leave the optional
    checksum out as some brokers do.
    """
    meta_part = struct.pack(">I", len(metadata)) + metadata
    head = b""
    if broker_entry_metadata is not None:
        head = struct.pack(">HI", 0x0E02, len(broker_entry_metadata)) + broker_entry_metadata
    check = b""
    if checksum:
        value = crc32c(payload, crc32c(meta_part)) if crc is None else crc
        check = struct.pack(">HI", 0x0E01, value)
    rest = struct.pack(">I", len(command)) + command + head + check + meta_part + payload
    return struct.pack(">I", len(rest)) + rest


bems = st.one_of(
    st.none(),
    st.builds(
        lambda ts, idx: pb.BrokerEntryMetadata(broker_timestamp=ts, index=idx),
        st.integers(0, 4_102_444_800_000),
        st.integers(0, 1 << 40),
    ),
)


@dataclass
class FrameCase:
    """One encoded payload frame and what it was built from."""

    data: bytes
    built: Built
    command: pb.BaseCommand
    ledger: int
    entry: int
    partition: int
    broker_entry_metadata: pb.BrokerEntryMetadata | None


@st.composite
def message_frames(
    draw: st.DrawFn, *, batched: bool | None = None, max_items: int = 8
) -> FrameCase:
    """A MESSAGE frame, built with ``encode_payload_command``, with or without
    broker entry metadata."""
    built = draw(built_entries(batched=batched, max_items=max_items))
    ledger, entry = draw(ledger_entry_numbers()), draw(ledger_entry_numbers())
    partition = draw(st.integers(-1, 8))
    command = message_command(ledger, entry, partition)
    bem = draw(bems)
    data = encode_payload_command(command, built.metadata, built.payload, broker_entry_metadata=bem)
    return FrameCase(data, built, command, ledger, entry, partition, bem)


@st.composite
def send_frames(draw: st.DrawFn, *, batched: bool | None = None, max_items: int = 8) -> FrameCase:
    """A SEND frame (client to broker), built with ``encode_payload_command``."""
    built = draw(built_entries(batched=batched, max_items=max_items))
    command = send_command(
        draw(st.integers(0, 1 << 32)), built.metadata.sequence_id, len(built.items)
    )
    data = encode_payload_command(command, built.metadata, built.payload)
    return FrameCase(data, built, command, -1, -1, -1, None)


def payload_frames(**kw: object) -> st.SearchStrategy[FrameCase]:
    return st.one_of(message_frames(**kw), send_frames(**kw))  # type: ignore[arg-type]


def split_points(size: int) -> st.SearchStrategy[list[int]]:
    """Sorted cut positions in ``[0, size]``, for feeding bytes in pieces."""
    return st.lists(st.integers(0, size), max_size=8).map(sorted)


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (empty pieces included)."""
    out, prev = [], 0
    for cut in [*cuts, len(data)]:
        out.append(data[prev:cut])
        prev = cut
    return out


# ---------------------------------------------------------------------------
# Reading back
# ---------------------------------------------------------------------------


def message_dict(message: Message) -> dict:
    """The fields of a decoded :class:`Message` that :meth:`Item.expected` predicts."""
    return {
        "value": message.value,
        "key": message.key,
        "partition_key": message.partition_key,
        "ordering_key": message.ordering_key,
        "properties": message.properties,
        "event_time": message.event_time,
        "sequence_id": message.sequence_id,
        "batch_index": message.message_id.batch_index,
    }


def decode_stream(data: bytes, cuts: list[int], **kw: object) -> list[Frame]:
    """Every frame of ``data``, fed to a :class:`FrameDecoder` in pieces."""
    decoder = FrameDecoder(**kw)  # type: ignore[arg-type]
    frames: list[Frame] = []
    for piece in pieces(data, cuts):
        decoder.feed(piece)
        frames.extend(decoder)
    decoder.close()
    return frames
