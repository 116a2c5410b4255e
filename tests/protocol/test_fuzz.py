"""Fuzz properties: whatever bytes arrive, decoding ends in a result or a ProtocolError.

Every input goes through the whole receive pipeline (:func:`run_pipeline`):
a :class:`FrameDecoder` with a small frame limit, fed in random pieces and
closed; for each payload frame the :class:`ChunkAssembler` (chunks),
:func:`open_entry` with the same limit, :func:`select`, :func:`messages` and
:class:`ArrowBatchBuilder`; beside it, the reader's own path (``open_entry(split=False)``,
items located by the builder), which must end the same way: the same batch, or
a ProtocolError where the first path's build raised one. The invariant: only
:class:`~pulsar_spark.protocol.errors.ProtocolError` may come out, never any
other exception; no input hangs; and (sampled with tracemalloc) no input
makes the decoder allocate much beyond the frame limit.

Inputs, with their share of the examples (at least 20,000 in all):

a. valid frames mutated: bit flips, byte replacements, insertions,
   deletions, copies; on the raw frame, or on one part (command, metadata,
   payload, uncompressed batch) re-framed with a correct CRC so that decoding
   gets past the checksum;
b. valid streams truncated anywhere;
c. garbage: random bytes, random bytes in a well-sized frame, random protobuf
   fields as command or metadata;
d. valid frames whose sizes lie: uncompressed_size, num_messages_in_batch,
   compacted_batch_indexes, chunk sizes and counts, and every size field of
   the framing and of the batch layout;
e. valid prefixes followed by garbage.

Seeds are frames from the strategies (MESSAGE and SEND, batched or not, every
codec, with and without broker entry metadata and checksum), chunk sequences,
simple commands, and the real frames of the golden captures.
"""

from __future__ import annotations

import os
import random
import struct
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    CODECS,
    U64,
    FrameCase,
    Item,
    build_entry,
    message_command,
    message_frames,
    pieces,
    random_cuts,
    random_frame,
    raw_payload_frame,
    seeded,
    send_frames,
)

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import (
    ChunkAssembler,
    Frame,
    FrameDecoder,
    MessageId,
    ProtocolError,
    compress,
    encode_command,
    is_chunk,
    messages,
    open_entry,
    pb,
    select,
)
from pulsar_spark.protocol.message_id import to_signed64

pytestmark = pytest.mark.fuzz

#: Frame limit of the fuzzed decoder, and the decompression limit of entries.
LIMIT = 64 * 1024
#: Longest any single input may take to decode (generous: CI machines are slow).
MAX_SECONDS = 10.0
TOPIC = "persistent://public/default/fuzz-partition-1"


def _fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, round(examples * _SCALE)),
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )


# Example counts per input kind; their sum is what CI runs (>= 20,000).
# PULSAR_SPARK_FUZZ_SCALE multiplies them for longer local runs.
_SCALE = float(os.environ.get("PULSAR_SPARK_FUZZ_SCALE", "1"))
EXAMPLES = {
    "mutated_raw": 3500,
    "mutated_parts": 3500,
    "truncated": 3000,
    "garbage": 3500,
    "lying_sizes": 4000,
    "prefix_garbage": 2500,
}
assert sum(EXAMPLES.values()) >= 20_000


# ---------------------------------------------------------------------------
# The pipeline under test
# ---------------------------------------------------------------------------


class _Sink:
    """Receive-side state across the frames of one input."""

    def __init__(self) -> None:
        self.assembler = ChunkAssembler(max_pending=4, max_message_size=4 * LIMIT)
        self.builder = ArrowBatchBuilder(TOPIC, partition=1)
        # The same entries, opened without splitting: the builder locates items.
        self.lazy = ArrowBatchBuilder(TOPIC, partition=1)
        self.rows = 0
        self.built = 0

    def frame(self, frame: Frame) -> None:
        if frame.metadata is None or frame.payload is None:
            return
        ack_set: list[int] = []
        if frame.command.type == pb.BaseCommand.MESSAGE:
            msg = frame.command.message
            ledger = to_signed64(msg.message_id.ledgerId)
            entry_id = to_signed64(msg.message_id.entryId)
            partition = msg.message_id.partition
            ack_set = list(msg.ack_set)
        else:
            ledger = entry_id = partition = -1
        try:
            metadata, payload = frame.metadata, frame.payload
            if is_chunk(metadata):
                whole = self.assembler.add(ledger, entry_id, metadata, payload, partition=partition)
                if whole is None:
                    return
                metadata, payload = whole.metadata, whole.payload
            entry = open_entry(
                ledger, entry_id, partition, metadata, payload,
                broker_entry_metadata=frame.broker_entry_metadata, limit=LIMIT,
            )
            chosen = select(entry, ack_set=ack_set)
            select(entry, start=MessageId(ledger, entry_id, partition, 1), start_inclusive=False)
            assert len(messages(entry, chosen)) == len(chosen)
            messages(entry)
        except ProtocolError:
            return
        # What opened split opens unsplit (only the item count is checked).
        lazy = open_entry(
            ledger, entry_id, partition, metadata, payload,
            broker_entry_metadata=frame.broker_entry_metadata, limit=LIMIT, split=False,
        )
        self.lazy.add(lazy, select(lazy, ack_set=ack_set))
        self.builder.add(entry, chosen)
        self.rows += len(chosen)
        if self.builder.rows > 64:
            self.build()

    def build(self) -> None:
        """Build a batch; corrupt item metadata may fail it, as our error only."""
        rows = self.builder.rows
        try:
            batch = self.builder.build()
        except ProtocolError as exc:
            assert exc.message_id is not None
            with pytest.raises(ProtocolError) as lazy_error:
                self.lazy.build()
            assert lazy_error.value.message_id is not None
        else:
            assert batch.num_rows == rows
            self.built += rows
            assert self.lazy.build().equals(batch)
        assert self.builder.rows == 0
        assert self.lazy.rows == 0


def run_pipeline(data: bytes, cuts: list[int]) -> None:
    """Decode ``data`` (fed in pieces) the way a reader does, to the Arrow batch.

    Only ProtocolError may escape, and only from the framing layer, which is
    sticky: after it the stream is over.
    """
    started = time.monotonic()
    sink = _Sink()
    decoder = FrameDecoder(max_frame_size=LIMIT)
    try:
        for piece in pieces(data, cuts):
            decoder.feed(piece)
            for frame in decoder:
                assert frame.size <= LIMIT
                sink.frame(frame)
        decoder.close()
    except ProtocolError as exc:
        # The error is sticky: every later call raises it again.
        with pytest.raises(ProtocolError):
            decoder.feed(b"\x00")
        assert exc.offset is not None
    sink.build()
    assert sink.built <= sink.rows
    elapsed = time.monotonic() - started
    assert elapsed < MAX_SECONDS, f"decoding {len(data)} bytes took {elapsed:.1f} s"


def check(data: bytes, cuts: list[int]) -> None:
    """The invariant: run_pipeline ends normally or with a ProtocolError, inside."""
    run_pipeline(data, cuts)


# ---------------------------------------------------------------------------
# Seeds
# ---------------------------------------------------------------------------
#
# Inputs are built from one drawn seed with random.Random (see
# strategies.seeded): tens of thousands of examples fit in the time budget
# that way. Hypothesis still draws a share of the seed frames itself.


def _golden_frames() -> list[bytes]:
    frames = []
    for path in sorted((Path(__file__).resolve().parents[1] / "golden").glob("*.bin")):
        data = path.read_bytes()
        pos = 0
        while pos + 4 <= len(data):
            (total,) = struct.unpack_from(">I", data, pos)
            frame = data[pos : pos + 4 + total]
            if len(frame) <= LIMIT:
                frames.append(frame)
            pos += 4 + total
    return frames


GOLDEN_FRAMES = _golden_frames()
#: Golden SEND and MESSAGE frames (they carry more than their command).
GOLDEN_PAYLOAD_FRAMES = [
    f for f in GOLDEN_FRAMES if struct.unpack_from(">I", f, 4)[0] + 8 < len(f)
]

SIMPLE_COMMANDS = [
    encode_command(pb.BaseCommand(type=pb.BaseCommand.PING, ping=pb.CommandPing())),
    encode_command(
        pb.BaseCommand(
            type=pb.BaseCommand.CONNECTED,
            connected=pb.CommandConnected(server_version="x", protocol_version=21),
        )
    ),
    encode_command(
        pb.BaseCommand(
            type=pb.BaseCommand.FLOW, flow=pb.CommandFlow(consumer_id=1, messagePermits=10)
        )
    ),
]


def _frame_bytes(rnd: random.Random, case: FrameCase) -> bytes:
    """A valid frame, half of the time without the optional checksum."""
    if rnd.random() < 0.5:
        return case.data
    return _reframe(case, checksum=False)


def _reframe(
    case: FrameCase, *, command: bytes | None = None, metadata: bytes | None = None,
    payload: bytes | None = None, checksum: bool = True,
) -> bytes:
    bem = case.broker_entry_metadata
    return raw_payload_frame(
        case.command.SerializeToString() if command is None else command,
        case.built.metadata.SerializeToString() if metadata is None else metadata,
        case.built.payload if payload is None else payload,
        broker_entry_metadata=None if bem is None else bem.SerializeToString(),
        checksum=checksum,
    )


def chunk_stream(rnd: random.Random) -> bytes:
    """The MESSAGE frames of one chunked message (2-4 chunks), maybe reordered."""
    payload = rnd.randbytes(rnd.randrange(0, 400))
    codec = rnd.choice(CODECS)
    whole = compress(codec, payload)
    n = rnd.randrange(2, 5)
    bounds = [0, *sorted(rnd.randrange(0, len(whole) + 1) for _ in range(n - 1)), len(whole)]
    uuid = rnd.choice(["p-1", "p-2"])
    frames = []
    for i in range(n):
        meta = pb.MessageMetadata(
            producer_name="p", sequence_id=1, publish_time=1, uuid=uuid, chunk_id=i,
            num_chunks_from_msg=n, total_chunk_msg_size=len(whole),
        )
        if codec != pb.NONE:
            meta.compression = codec
            meta.uncompressed_size = len(payload)
        frames.append(
            raw_payload_frame(
                message_command(3, 10 + i).SerializeToString(), meta.SerializeToString(),
                whole[bounds[i] : bounds[i + 1]], checksum=rnd.random() < 0.5,
            )
        )
    if rnd.random() < 0.2:
        rnd.shuffle(frames)
    elif rnd.random() < 0.2:
        frames.insert(rnd.randrange(len(frames)), rnd.choice(frames))  # a redelivery
    return b"".join(frames)


def seed_frame(rnd: random.Random) -> bytes:
    pick = rnd.random()
    if pick < 0.55:
        return _frame_bytes(rnd, random_frame(rnd))
    if pick < 0.7:
        return chunk_stream(rnd)
    if pick < 0.9:
        return rnd.choice(GOLDEN_PAYLOAD_FRAMES)
    return rnd.choice(SIMPLE_COMMANDS)


def valid_stream(rnd: random.Random) -> bytes:
    """One to three valid frames."""
    return b"".join(seed_frame(rnd) for _ in range(rnd.randrange(1, 4)))


#: Valid frames drawn by Hypothesis from the shared strategies.
drawn_streams = st.one_of(message_frames(max_items=3), send_frames(max_items=3)).map(
    lambda case: case.data
)


def _with_cuts(
    build: Callable[[random.Random], bytes],
) -> st.SearchStrategy[tuple[bytes, list[int]]]:
    def make(rnd: random.Random) -> tuple[bytes, list[int]]:
        data = build(rnd)
        return data, random_cuts(rnd, len(data))

    return seeded(make)


def _drawn_with_cuts(
    data: st.SearchStrategy[bytes], then: Callable[[random.Random, bytes], bytes]
) -> st.SearchStrategy[tuple[bytes, list[int]]]:
    """Hypothesis-drawn bytes, transformed with a seeded ``then``, and cuts."""

    @st.composite
    def make(draw: st.DrawFn) -> tuple[bytes, list[int]]:
        rnd = random.Random(draw(st.integers(0, (1 << 64) - 1)))
        out = then(rnd, draw(data))
        return out, random_cuts(rnd, len(out))

    return make()


# ---------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------

_INTERESTING = [0x00, 0xFF, 0x7F, 0x80, 0x01, 0x0E, 0x02, 0x08]


def mutate(rnd: random.Random, data: bytes, max_ops: int = 4) -> bytes:
    """Bit flips, byte replacements, insertions, deletions and copies."""
    buf = bytearray(data)
    for _ in range(rnd.randrange(1, max_ops + 1)):
        op = rnd.choice(["flip", "flip", "set", "insert", "delete", "copy"])
        i = rnd.randrange(0, max(len(buf), 1))
        if op == "flip" and buf:
            buf[i] ^= 1 << rnd.randrange(8)
        elif op == "set" and buf:
            buf[i] = rnd.choice(_INTERESTING) if rnd.random() < 0.5 else rnd.randrange(256)
        elif op == "insert":
            buf[i:i] = rnd.randbytes(rnd.randrange(1, 9))
        elif op == "delete":
            del buf[i : i + rnd.randrange(1, 17)]
        elif op == "copy" and buf:
            j = rnd.randrange(len(buf))
            buf[j:j] = buf[i : i + rnd.randrange(1, 17)]
    return bytes(buf)


def mutated_raw_stream(rnd: random.Random) -> bytes:
    """(a) Valid frames with a few bytes flipped, replaced, inserted or deleted."""
    return mutate(rnd, valid_stream(rnd))


def mutated_part_stream(rnd: random.Random) -> bytes:
    """(a) One part of a valid frame mutated, re-framed with correct sizes and CRC."""
    case = random_frame(rnd)
    built = case.built
    part = rnd.choice(["command", "metadata", "payload", "raw", "raw", "smm"])
    checksum = rnd.random() < 0.5
    if part == "command":
        return _reframe(case, command=mutate(rnd, case.command.SerializeToString()),
                        checksum=checksum)
    if part == "metadata":
        return _reframe(case, metadata=mutate(rnd, built.metadata.SerializeToString()),
                        checksum=checksum)
    if part == "payload":
        return _reframe(case, payload=mutate(rnd, built.payload), checksum=checksum)
    # The payload before compression: recompressed, with a correct size or not.
    raw = built.raw
    if part == "smm" and built.batched and raw:
        # Mutate inside the first item's SingleMessageMetadata only.
        (size,) = struct.unpack_from(">I", raw, 0)
        raw = raw[:4] + mutate(rnd, raw[4 : 4 + size], 2) + raw[4 + size :]
    else:
        raw = mutate(rnd, raw)
    meta = pb.MessageMetadata()
    meta.CopyFrom(built.metadata)
    if built.codec != pb.NONE and rnd.random() < 0.75:
        meta.uncompressed_size = len(raw)
    return _reframe(case, metadata=meta.SerializeToString(),
                    payload=compress(built.codec, raw), checksum=checksum)


# ---------------------------------------------------------------------------
# Garbage
# ---------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= U64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_WILD_INTS = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**63 - 1, 2**63, U64, LIMIT, LIMIT + 1]


def _wild_int(rnd: random.Random) -> int:
    pick = rnd.random()
    if pick < 0.4:
        return rnd.randrange(0, 300)
    if pick < 0.7:
        return rnd.choice(_WILD_INTS)
    if pick < 0.9:
        return rnd.getrandbits(64)
    return -rnd.randrange(1, 2**63)


def proto_soup(
    rnd: random.Random, fields: list[int], max_fields: int = 12, depth: int = 1
) -> bytes:
    """Syntactically valid protobuf with random values in the given field numbers."""
    out = bytearray()
    for _ in range(rnd.randrange(0, max_fields + 1)):
        number = rnd.choice(fields)
        if rnd.random() < 0.5:
            out += _varint(number << 3) + _varint(_wild_int(rnd))
        else:
            if depth and rnd.random() < 0.4:  # a sub-message: KeyValue, MessageIdData, ...
                value = proto_soup(rnd, list(range(1, 9)), 4, depth - 1)
            elif rnd.random() < 0.2:
                value = b"\xff\xfe" + rnd.randbytes(rnd.randrange(0, 4))  # not UTF-8
            else:
                value = rnd.randbytes(rnd.randrange(0, 25))
            out += _varint(number << 3 | 2) + _varint(len(value)) + value
    return bytes(out)


_META_FIELDS = list(range(1, 35))
_COMMAND_TYPES = sorted(pb.BaseCommand.Type.values())
_SMM_FIELDS = list(range(1, 11))


def soup_batch(rnd: random.Random) -> bytes:
    """A batch payload made of random SingleMessageMetadata."""
    out = bytearray()
    for _ in range(rnd.randrange(1, 5)):
        smm = proto_soup(rnd, _SMM_FIELDS, 6)
        if rnd.random() < 0.5:
            smm += b"\x18" + _varint(rnd.randrange(0, 21))  # a payload_size
        out += struct.pack(">I", len(smm)) + smm + rnd.randbytes(rnd.randrange(0, 21))
    return bytes(out)


def garbage_stream(rnd: random.Random) -> bytes:
    """(c) Bytes that were never a frame, at several depths of plausibility."""
    kind = rnd.choice(["bytes", "sized", "command", "metadata", "metadata", "batch"])
    if kind == "bytes":
        return rnd.randbytes(rnd.randrange(0, 600))
    if kind == "sized":  # a well-sized frame of random bytes
        body = rnd.randbytes(rnd.randrange(0, 300))
        return struct.pack(">I", len(body)) + body
    if kind == "command":  # a command of some type with random fields in its body
        if rnd.random() < 0.2:
            cmd = proto_soup(rnd, list(range(1, 70)), 4)
        else:
            number = rnd.choice(_COMMAND_TYPES)
            sub = proto_soup(rnd, list(range(1, 12)), 6)
            cmd = b"\x08" + _varint(number) + _varint(number << 3 | 2) + _varint(len(sub)) + sub
        body = struct.pack(">I", len(cmd)) + cmd
        if rnd.random() < 0.5:  # maybe followed by a payload part
            body += rnd.randbytes(rnd.randrange(0, 65))
        return struct.pack(">I", len(body)) + body
    ack_set = [to_signed64(_wild_int(rnd) & U64) for _ in range(rnd.randrange(0, 3))]
    command = message_command(rnd.randrange(0, 5), rnd.randrange(0, 5), ack_set=ack_set)
    metadata = b""
    if rnd.random() < 0.9:  # the required fields first (the soup may repeat them)
        metadata = (
            b"\x0a\x01p" + b"\x10" + _varint(_wild_int(rnd)) + b"\x18" + _varint(_wild_int(rnd))
        )
    metadata += proto_soup(rnd, _META_FIELDS)
    if kind == "batch":
        payload = soup_batch(rnd)
        metadata += b"\x58" + _varint(rnd.randrange(1, 6))  # num_messages_in_batch
    else:
        payload = rnd.randbytes(rnd.randrange(0, 200))
    return raw_payload_frame(command.SerializeToString(), metadata, payload,
                             checksum=rnd.random() < 0.5)


# ---------------------------------------------------------------------------
# Lying sizes
# ---------------------------------------------------------------------------

_LIES = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, LIMIT - 1, LIMIT, LIMIT + 1, 10 * LIMIT]
_INT32_LIES = [2**31 - 1, -1, 0, LIMIT, LIMIT + 1, -(2**31)]


def _lie(rnd: random.Random) -> int:
    return rnd.choice(_LIES) if rnd.random() < 0.6 else rnd.getrandbits(32)


def _int32_lie(rnd: random.Random, *near: int) -> int:
    pick = rnd.random()
    if pick < 0.4:
        return rnd.choice(_INT32_LIES)
    if pick < 0.8 and near:
        return max(-(2**31), min(2**31 - 1, rnd.choice(near) + rnd.randrange(-2, 3)))
    return rnd.randrange(-(2**31), 2**31)


def _bombs() -> list[tuple[int, bytes, int]]:
    """(codec, payload, true size): payloads that inflate far beyond the limit."""
    out = []
    for codec in CODECS[1:]:
        size = 16 * LIMIT if codec != pb.SNAPPY else 4 * LIMIT  # snappy packs ~21:1 at best
        out.append((codec, compress(codec, bytes(size)), size))
    # A zstd frame that does not say its content size: decoded by streaming.
    size = 16 * LIMIT
    out.append((pb.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(bytes(size)),
                size))
    return out


BOMBS = _bombs()


def bomb_stream(rnd: random.Random) -> bytes:
    """A payload inflating to many times the limit, declaring any size."""
    codec, payload, size = rnd.choice(BOMBS)
    declared = rnd.choice([size, LIMIT, LIMIT - 1, 1000, 0, rnd.randrange(0, LIMIT)])
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                              compression=codec, uncompressed_size=declared)
    if rnd.random() < 0.5:
        meta.num_messages_in_batch = rnd.randrange(1, 100)
    return raw_payload_frame(message_command(1, 1).SerializeToString(), meta.SerializeToString(),
                             payload, checksum=rnd.random() < 0.5)


def lying_stream(rnd: random.Random) -> bytes:
    """(d) Valid frames whose metadata or framing declares sizes that are not true."""
    if rnd.random() < 0.08:
        return bomb_stream(rnd)
    case = random_frame(rnd)
    built = case.built
    meta = pb.MessageMetadata()
    meta.CopyFrom(built.metadata)
    n = len(built.items)
    what = rnd.choice([
        "uncompressed", "uncompressed", "count", "count", "compacted", "chunk",
        "total", "command", "metadata", "bem", "smm_size", "payload_size",
    ])
    if what == "uncompressed":
        if meta.compression == pb.NONE:
            meta.compression = rnd.choice(CODECS[1:])
        if rnd.random() < 0.5:
            meta.uncompressed_size = _lie(rnd)
        else:
            meta.uncompressed_size = max(0, len(built.raw) + rnd.randrange(-3, 4))
    elif what == "count":
        meta.num_messages_in_batch = _int32_lie(rnd, n)
    elif what == "compacted":
        meta.num_messages_in_batch = n
        meta.compacted_batch_indexes.extend(
            _int32_lie(rnd, *range(n)) for _ in range(rnd.randrange(0, n + 3))
        )
    elif what == "chunk":
        meta.uuid = rnd.choice(["u", "v"])
        meta.num_chunks_from_msg = _int32_lie(rnd, 2, 3)
        meta.chunk_id = _int32_lie(rnd, 0, 1)
        meta.total_chunk_msg_size = _int32_lie(rnd, len(built.payload))
    if what in ("uncompressed", "count", "compacted", "chunk"):
        frame = _reframe(case, metadata=meta.SerializeToString(), checksum=rnd.random() < 0.5)
        if meta.chunk_id < 2**31 - 1 and rnd.random() < 0.5:
            # A chunk sequence: the same frame again, as the next chunk.
            meta.chunk_id += 1
            frame += _reframe(case, metadata=meta.SerializeToString())
        return frame
    if what in ("smm_size", "payload_size") and built.batched:
        raw = bytearray(built.raw)
        if what == "smm_size":
            struct.pack_into(">I", raw, 0, _lie(rnd))
        else:
            (size,) = struct.unpack_from(">I", raw, 0)
            smm = pb.SingleMessageMetadata.FromString(bytes(raw[4 : 4 + size]))
            smm.payload_size = _int32_lie(rnd, smm.payload_size, len(raw))
            body = smm.SerializeToString()
            raw[0 : 4 + size] = struct.pack(">I", len(body)) + body
        if meta.compression != pb.NONE:
            meta.uncompressed_size = len(raw)
        return _reframe(case, metadata=meta.SerializeToString(),
                        payload=compress(built.codec, bytes(raw)))
    # Lies in the framing itself, at the position of each size field.
    data = bytearray(_reframe(case, checksum=rnd.random() < 0.5))
    (cmd_size,) = struct.unpack_from(">I", data, 4)
    pos = 8 + cmd_size
    if what == "total":
        at = 0
    elif what == "command":
        at = 4
    elif what == "bem" and data[pos : pos + 2] == b"\x0e\x02":
        at = pos + 2
    else:  # the metadata size: after the optional blocks
        if data[pos : pos + 2] == b"\x0e\x02":
            (bem_size,) = struct.unpack_from(">I", data, pos + 2)
            pos += 6 + bem_size
        if data[pos : pos + 2] == b"\x0e\x01":
            pos += 6
        at = pos
    struct.pack_into(">I", data, at, _lie(rnd))
    return bytes(data)


def truncated_stream(rnd: random.Random) -> bytes:
    """(b) Valid frames cut off anywhere."""
    data = valid_stream(rnd)
    return data[: rnd.randrange(0, len(data) + 1)]


def prefix_garbage_stream(rnd: random.Random) -> bytes:
    """(e) Valid frames (or the start of one) followed by garbage."""
    data = valid_stream(rnd)
    if rnd.random() < 0.5:
        data = data[: rnd.randrange(0, len(data) + 1)]
    tail = rnd.randbytes(rnd.randrange(1, 200)) if rnd.random() < 0.5 else garbage_stream(rnd)
    return data + tail


# ---------------------------------------------------------------------------
# The fuzz tests
# ---------------------------------------------------------------------------

Case = tuple[bytes, list[int]]


def _keep(rnd: random.Random, data: bytes) -> bytes:
    return data


@_fuzz_settings(EXAMPLES["mutated_raw"])
@given(case=st.one_of(
    _with_cuts(mutated_raw_stream),
    _with_cuts(mutated_raw_stream),
    _with_cuts(mutated_raw_stream),
    _drawn_with_cuts(drawn_streams, mutate),
))
def test_fuzz_mutated_frames(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["mutated_parts"])
@given(case=_with_cuts(mutated_part_stream))
def test_fuzz_mutated_frame_parts(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["truncated"])
@given(case=st.one_of(
    _with_cuts(truncated_stream),
    _with_cuts(truncated_stream),
    _with_cuts(truncated_stream),
    _drawn_with_cuts(drawn_streams, lambda rnd, data: data[: rnd.randrange(len(data) + 1)]),
))
def test_fuzz_truncated_frames(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["garbage"])
@given(case=st.one_of(
    _with_cuts(garbage_stream),
    _with_cuts(garbage_stream),
    _drawn_with_cuts(st.binary(max_size=600), _keep),
))
def test_fuzz_garbage(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["lying_sizes"])
@given(case=_with_cuts(lying_stream))
def test_fuzz_lying_sizes(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["prefix_garbage"])
@given(case=_with_cuts(prefix_garbage_stream))
def test_fuzz_valid_prefix_then_garbage(case: Case) -> None:
    check(*case)


# ---------------------------------------------------------------------------
# Memory: sampled with tracemalloc
# ---------------------------------------------------------------------------

def _memory_bound(size: int) -> int:
    """Peak traced allocation allowed while decoding one input of ``size`` bytes.

    A few frame limits (a payload inflated up to the limit, a retry of the
    codec, the joined Arrow values), plus what the input itself costs to hold
    (the decoder buffers it, frames copy it, chunks keep it), plus room for
    the Python and protobuf objects of a small input.
    """
    return 3 * LIMIT + 4 * size + 128 * 1024


_warmed_up = False


def _warm_up() -> None:
    """Decode a few inputs untraced: first calls allocate caches and lazy imports."""
    global _warmed_up
    if not _warmed_up:
        for seed in range(40):
            rnd = random.Random(seed)
            for build in (valid_stream, lying_stream, garbage_stream):
                run_pipeline(build(rnd), [])
        _warmed_up = True


def _traced_peak(data: bytes, cuts: list[int]) -> int:
    _warm_up()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        run_pipeline(data, cuts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


@_fuzz_settings(300)
@given(case=st.one_of(
    _with_cuts(lying_stream),
    _with_cuts(bomb_stream),
    _with_cuts(mutated_part_stream),
    _with_cuts(mutated_raw_stream),
    _with_cuts(garbage_stream),
))
def test_fuzz_memory_stays_near_the_frame_limit(case: Case) -> None:
    data, cuts = case
    used = _traced_peak(data, cuts)
    assert used <= _memory_bound(len(data)), (
        f"decoding {len(data)} bytes allocated {used} bytes at peak "
        f"(bound {_memory_bound(len(data))})"
    )


@pytest.mark.parametrize("codec", CODECS[1:])
def test_huge_declared_sizes_allocate_nothing_like_them(codec: int) -> None:
    """MESSAGEs that claim 4 GiB, or just over the limit, inside: rejected
    before allocating; one that claims exactly the limit allocates about it."""
    for declared in (2**32 - 1, LIMIT + 1, LIMIT):
        meta = pb.MessageMetadata(
            producer_name="p", sequence_id=1, publish_time=1, compression=codec,
            uncompressed_size=declared, num_messages_in_batch=2**31 - 1,
        )
        frame = raw_payload_frame(message_command(1, 1).SerializeToString(),
                                  meta.SerializeToString(), compress(codec, b"\x00" * 100))
        assert _traced_peak(frame, []) < _memory_bound(len(frame))


def test_batch_of_valid_items_survives_the_pipeline() -> None:
    """Sanity: the pipeline does decode valid input to rows."""
    items = [Item(payload=b"a"), Item(payload=b"b", compacted_out=True), Item(null_value=True)]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    built = build_entry(items, meta, pb.ZSTD)
    frame = raw_payload_frame(message_command(2, 3).SerializeToString(),
                              built.metadata.SerializeToString(), built.payload)
    sink = _Sink()
    decoder = FrameDecoder(max_frame_size=LIMIT)
    decoder.feed(frame)
    for f in decoder:
        sink.frame(f)
    assert sink.rows == 2
    assert sink.builder.build().column("value").to_pylist() == [b"a", None]
