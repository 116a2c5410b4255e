"""Fuzz inputs (c), (d) and (e): garbage, lying sizes, decompression bombs, prefixes.

Built from one seed with :class:`random.Random`, like the inputs of
``fuzz_seeds.py``, which supplies the valid frames they start from.
"""

from __future__ import annotations

import random
import struct

import zstandard
from fuzz_seeds import LIMIT, reframe, valid_stream
from strategies import (
    CODECS,
    U64,
    message_command,
    random_frame,
    raw_payload_frame,
)

from pulsar_spark.protocol import compress, pb
from pulsar_spark.protocol.ids.message_id import to_signed64

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
    return raw_payload_frame(
        command.SerializeToString(), metadata, payload, checksum=rnd.random() < 0.5
    )


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
    out.append(
        (pb.ZSTD, zstandard.ZstdCompressor(write_content_size=False).compress(bytes(size)), size)
    )
    return out


BOMBS = _bombs()


def bomb_stream(rnd: random.Random) -> bytes:
    """A payload inflating to many times the limit, declaring any size."""
    codec, payload, size = rnd.choice(BOMBS)
    declared = rnd.choice([size, LIMIT, LIMIT - 1, 1000, 0, rnd.randrange(0, LIMIT)])
    meta = pb.MessageMetadata(
        producer_name="p",
        sequence_id=1,
        publish_time=1,
        compression=codec,
        uncompressed_size=declared,
    )
    if rnd.random() < 0.5:
        meta.num_messages_in_batch = rnd.randrange(1, 100)
    return raw_payload_frame(
        message_command(1, 1).SerializeToString(),
        meta.SerializeToString(),
        payload,
        checksum=rnd.random() < 0.5,
    )


def lying_stream(rnd: random.Random) -> bytes:
    """(d) Valid frames whose metadata or framing declares sizes that are not true."""
    if rnd.random() < 0.08:
        return bomb_stream(rnd)
    case = random_frame(rnd)
    built = case.built
    meta = pb.MessageMetadata()
    meta.CopyFrom(built.metadata)
    n = len(built.items)
    what = rnd.choice(
        [
            "uncompressed",
            "uncompressed",
            "count",
            "count",
            "compacted",
            "chunk",
            "total",
            "command",
            "metadata",
            "bem",
            "smm_size",
            "payload_size",
        ]
    )
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
        frame = reframe(case, metadata=meta.SerializeToString(), checksum=rnd.random() < 0.5)
        if meta.chunk_id < 2**31 - 1 and rnd.random() < 0.5:
            # A chunk sequence: the same frame again, as the next chunk.
            meta.chunk_id += 1
            frame += reframe(case, metadata=meta.SerializeToString())
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
        return reframe(
            case, metadata=meta.SerializeToString(), payload=compress(built.codec, bytes(raw))
        )
    # Lies in the framing itself, at the position of each size field.
    data = bytearray(reframe(case, checksum=rnd.random() < 0.5))
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


def prefix_garbage_stream(rnd: random.Random) -> bytes:
    """(e) Valid frames (or the start of one) followed by garbage."""
    data = valid_stream(rnd)
    if rnd.random() < 0.5:
        data = data[: rnd.randrange(0, len(data) + 1)]
    tail = rnd.randbytes(rnd.randrange(1, 200)) if rnd.random() < 0.5 else garbage_stream(rnd)
    return data + tail
