"""Fuzz inputs (a) and (b): valid seed frames, their mutations and truncations, with cuts.

Inputs are built from one seed with :class:`random.Random`; :func:`with_cuts`
and :func:`drawn_with_cuts` turn a builder into a Hypothesis strategy of
``(bytes, cut positions)``. See ``test_fuzz.py`` for what is checked.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from pathlib import Path

from hypothesis import strategies as st
from strategies import (
    CODECS,
    FrameCase,
    message_command,
    message_frames,
    random_cuts,
    random_frame,
    raw_payload_frame,
    seeded,
    send_frames,
)

from pulsar_spark.protocol import compress, encode_command, pb

#: Frame limit of the fuzzed decoder, and the decompression limit of entries.
LIMIT = 64 * 1024


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
GOLDEN_PAYLOAD_FRAMES = [f for f in GOLDEN_FRAMES if struct.unpack_from(">I", f, 4)[0] + 8 < len(f)]

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
    return reframe(case, checksum=False)


def reframe(
    case: FrameCase,
    *,
    command: bytes | None = None,
    metadata: bytes | None = None,
    payload: bytes | None = None,
    checksum: bool = True,
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
            producer_name="p",
            sequence_id=1,
            publish_time=1,
            uuid=uuid,
            chunk_id=i,
            num_chunks_from_msg=n,
            total_chunk_msg_size=len(whole),
        )
        if codec != pb.NONE:
            meta.compression = codec
            meta.uncompressed_size = len(payload)
        frames.append(
            raw_payload_frame(
                message_command(3, 10 + i).SerializeToString(),
                meta.SerializeToString(),
                whole[bounds[i] : bounds[i + 1]],
                checksum=rnd.random() < 0.5,
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


def with_cuts(
    build: Callable[[random.Random], bytes],
) -> st.SearchStrategy[tuple[bytes, list[int]]]:
    def make(rnd: random.Random) -> tuple[bytes, list[int]]:
        data = build(rnd)
        return data, random_cuts(rnd, len(data))

    return seeded(make)


def drawn_with_cuts(
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
        return reframe(
            case, command=mutate(rnd, case.command.SerializeToString()), checksum=checksum
        )
    if part == "metadata":
        return reframe(
            case, metadata=mutate(rnd, built.metadata.SerializeToString()), checksum=checksum
        )
    if part == "payload":
        return reframe(case, payload=mutate(rnd, built.payload), checksum=checksum)
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
    return reframe(
        case,
        metadata=meta.SerializeToString(),
        payload=compress(built.codec, raw),
        checksum=checksum,
    )


def truncated_stream(rnd: random.Random) -> bytes:
    """(b) Valid frames cut off anywhere."""
    data = valid_stream(rnd)
    return data[: rnd.randrange(0, len(data) + 1)]
