"""CRC32C and the payload codecs, pinned to known bytes and checked against lying sizes."""

from __future__ import annotations

import os
import struct
import tracemalloc
import zlib

import pytest
import zstandard

from pulsar_spark.protocol import (
    CODEC_NAMES,
    CorruptMessage,
    DecompressionError,
    EncodeError,
    UncompressedSizeMismatch,
    codec_by_name,
    compress,
    decompress,
    pb,
)
from pulsar_spark.protocol.framing.checksum import crc32c

CODECS = {"NONE": pb.NONE, "LZ4": pb.LZ4, "ZLIB": pb.ZLIB, "ZSTD": pb.ZSTD, "SNAPPY": pb.SNAPPY}
COMPRESSING = {name: value for name, value in CODECS.items() if value != pb.NONE}
LIMIT = 1 << 20

# ---------------------------------------------------------------------------
# CRC32C
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", 0x00000000),
        (b"123456789", 0xE3069283),  # the CRC-32C check value
        # RFC 3720 (iSCSI), appendix B.4
        (bytes(32), 0x8A9136AA),
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
    ],
)
def test_crc32c_vectors(data: bytes, expected: int) -> None:
    assert crc32c(data) == expected


def test_crc32c_continues_over_pieces() -> None:
    data = os.urandom(1000)
    assert crc32c(data[600:], crc32c(data[:600])) == crc32c(data)


def test_golden_send_checksums_recompute(golden) -> None:
    # The checksum the official client wrote covers metadata size, metadata and payload.
    data = golden.data("client-to-broker")
    for frame in golden.payload_frames("client-to-broker"):
        (cmd_size,) = struct.unpack_from(">I", data, frame.offset + 4)
        at = frame.offset + 8 + cmd_size
        magic, on_wire = struct.unpack_from(">HI", data, at)
        assert magic == 0x0E01
        covered = data[at + 6 : frame.offset + frame.size]
        assert crc32c(covered) == on_wire
        meta = frame.metadata.SerializeToString()
        assert covered == struct.pack(">I", len(meta)) + meta + bytes(frame.payload)


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------

PAYLOADS = {
    "empty": b"",
    "one byte": b"a",
    "text": b"pulsar-spark " * 100,
    "random": os.urandom(10_000),
    "zeros": bytes(200_000),
}


@pytest.mark.parametrize("data", PAYLOADS.values(), ids=PAYLOADS.keys())
@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_round_trip(codec: int, data: bytes) -> None:
    packed = compress(codec, data)
    assert isinstance(packed, bytes)
    for given in (packed, bytearray(packed), memoryview(packed)):
        assert bytes(decompress(codec, given, len(data), LIMIT)) == data


@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_compression_shrinks_repetitive_data(codec: int) -> None:
    assert len(compress(codec, bytes(100_000))) < 10_000


def test_none_passes_data_through() -> None:
    data = b"as is"
    assert decompress(pb.NONE, data, 0, 10) is data
    assert compress(pb.NONE, memoryview(data)) == data


def test_zlib_compress_writes_a_complete_stream() -> None:
    assert zlib.decompress(compress(pb.ZLIB, b"abc")) == b"abc"


# ---------------------------------------------------------------------------
# Pinned decode vectors: known compressed bytes, known output
# ---------------------------------------------------------------------------

PULSAR = b"pulsar pulsar pulsar pulsar pulsar!"  # 35 bytes

VECTORS = {
    "LZ4 literals only": (
        pb.LZ4,
        # token 0x30: 3 literals, no match
        bytes.fromhex("30") + b"abc",
        b"abc",
    ),
    "LZ4 with a match": (
        pb.LZ4,
        # token 0x7f: 7 literals "pulsar ", match length 15+...; offset 7;
        # length byte 4 -> match of 15+4+4 = 23; token 0x50: 5 literals "lsar!"
        bytes.fromhex("7f") + b"pulsar " + bytes.fromhex("0700 04 50") + b"lsar!",
        PULSAR,
    ),
    "Snappy literal": (
        pb.SNAPPY,
        # varint length 5; literal tag (5-1)<<2
        bytes.fromhex("05 10") + b"hello",
        b"hello",
    ),
    "Snappy with a copy": (
        pb.SNAPPY,
        # length 12; literal "abc" (tag 0x08); copy-1 of length 9 at offset 3 (tag 0x15, 0x03)
        bytes.fromhex("0c 08") + b"abc" + bytes.fromhex("15 03"),
        b"abcabcabcabc",
    ),
    "zlib without final block (sync flush, never finished)": (
        pb.ZLIB,
        bytes.fromhex("789c2a28cd294e2c5228c04d2902000000ffff"),
        PULSAR,
    ),
    "zlib complete stream": (
        pb.ZLIB,
        bytes.fromhex("789c2b28cd294e2c5228c04d290200f97f0d95"),
        PULSAR,
    ),
    "zstd frame with content size": (
        pb.ZSTD,
        bytes.fromhex("28b52ffd20237500004070756c736172202101000a8b11"),
        PULSAR,
    ),
    "zstd frame without content size": (
        pb.ZSTD,
        bytes.fromhex("28b52ffd00007500004070756c736172202101000a8b11"),
        PULSAR,
    ),
}


@pytest.mark.parametrize(("codec", "packed", "expected"), VECTORS.values(), ids=VECTORS.keys())
def test_decode_vector(codec: int, packed: bytes, expected: bytes) -> None:
    assert bytes(decompress(codec, packed, len(expected), LIMIT)) == expected


def test_zlib_vector_without_final_block_is_what_strict_zlib_refuses() -> None:
    packed = VECTORS["zlib without final block (sync flush, never finished)"][1]
    assert packed.endswith(b"\x00\x00\xff\xff")  # the sync-flush marker, then nothing
    with pytest.raises(zlib.error, match="incomplete or truncated"):
        zlib.decompress(packed)


def test_zstd_vectors_differ_only_in_content_size() -> None:
    with_size = VECTORS["zstd frame with content size"][1]
    without = VECTORS["zstd frame without content size"][1]
    assert zstandard.get_frame_parameters(with_size).content_size == len(PULSAR)
    assert zstandard.get_frame_parameters(without).content_size == zstandard.CONTENTSIZE_UNKNOWN


def test_lz4_empty_payload_for_empty_message() -> None:
    assert bytes(decompress(pb.LZ4, b"", 0, LIMIT)) == b""
    assert bytes(decompress(pb.LZ4, b"\x00", 0, LIMIT)) == b""


# ---------------------------------------------------------------------------
# uncompressed_size lies
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_declared_size_above_limit_is_refused_before_any_work(codec: int) -> None:
    packed = compress(codec, b"small")
    with pytest.raises(UncompressedSizeMismatch, match="above the limit of 64 bytes"):
        decompress(codec, packed, 65, 64)
    # A size no allocation could honour is refused just the same.
    with pytest.raises(UncompressedSizeMismatch):
        decompress(codec, packed, 2**40, 64)
    with pytest.raises(UncompressedSizeMismatch):
        decompress(codec, b"\xff" * 10, 2**40, 64)


BOMB = bytes(16 << 20)  # 16 MiB of zeros: a few KiB compressed


@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_a_compression_bomb_never_allocates_past_the_limit(codec: int) -> None:
    packed = compress(codec, BOMB)
    assert len(packed) < 1 << 20
    limit = 256 << 10
    tracemalloc.start()
    try:
        with pytest.raises(UncompressedSizeMismatch):
            decompress(codec, packed, len(BOMB), limit)  # the truth, but above the limit
        with pytest.raises(CorruptMessage):
            decompress(codec, packed, 1_000, limit)  # a lie within the limit
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * limit


DATA = b"0123456789abcdef" * 64  # 1 KiB


@pytest.mark.parametrize("delta", [-1, +1, -500, +500])
@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_declared_size_that_is_not_the_real_one(codec: int, delta: int) -> None:
    packed = compress(codec, DATA)
    with pytest.raises(UncompressedSizeMismatch):
        decompress(codec, packed, len(DATA) + delta, LIMIT)


@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_declared_zero_for_a_non_empty_payload(codec: int) -> None:
    with pytest.raises(UncompressedSizeMismatch):
        decompress(codec, compress(codec, DATA), 0, LIMIT)


@pytest.mark.parametrize("delta", [-1, +1])
def test_zstd_without_content_size_checks_the_declared_size(delta: int) -> None:
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(DATA)
    assert zstandard.get_frame_parameters(packed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert bytes(decompress(pb.ZSTD, packed, len(DATA), LIMIT)) == DATA
    with pytest.raises(UncompressedSizeMismatch):
        decompress(pb.ZSTD, packed, len(DATA) + delta, LIMIT)


def test_zstd_header_content_size_that_disagrees_with_the_metadata() -> None:
    # The frame header says 16 MiB; the metadata says 1000, within the limit.
    # The header is believed by the library, so it must be checked first.
    packed = zstandard.ZstdCompressor().compress(BOMB)
    assert zstandard.get_frame_parameters(packed).content_size == len(BOMB)
    tracemalloc.start()
    try:
        with pytest.raises(UncompressedSizeMismatch, match="zstd frame declares 16777216"):
            decompress(pb.ZSTD, packed, 1_000, LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < LIMIT


def test_snappy_header_length_that_disagrees_with_the_metadata() -> None:
    with pytest.raises(UncompressedSizeMismatch, match="snappy payload declares 12"):
        decompress(pb.SNAPPY, VECTORS["Snappy with a copy"][1], 11, LIMIT)


# ---------------------------------------------------------------------------
# Garbage and unknown codecs
# ---------------------------------------------------------------------------

GARBAGE = {
    "0xff run": b"\xff" * 32,
    "zlib header, bad body": b"\x78\x9c\xff\xff\xff\xff\xff\xff",
    "truncated zstd": VECTORS["zstd frame with content size"][1][:-6],
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=GARBAGE.keys())
@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_garbage_is_a_corrupt_message(codec: int, garbage: bytes) -> None:
    with pytest.raises(CorruptMessage):
        decompress(codec, garbage, len(PULSAR), LIMIT)


@pytest.mark.parametrize("codec", COMPRESSING.values(), ids=COMPRESSING.keys())
def test_garbage_is_a_decompression_error(codec: int) -> None:
    with pytest.raises(DecompressionError) as info:
        decompress(codec, b"\xff" * 32, 100, LIMIT)
    assert CODEC_NAMES[codec] in str(info.value)


def test_truncated_lz4_block_is_a_decompression_error() -> None:
    packed = VECTORS["LZ4 with a match"][1]
    with pytest.raises(DecompressionError):
        decompress(pb.LZ4, packed[:-3], len(PULSAR), LIMIT)


def test_unknown_codec() -> None:
    with pytest.raises(DecompressionError, match="unknown compression codec 9"):
        decompress(9, b"x", 1, LIMIT)
    with pytest.raises(EncodeError, match="unknown codec 9"):
        compress(9, b"x")


def test_codec_errors_are_corrupt_messages() -> None:
    assert issubclass(DecompressionError, CorruptMessage)
    assert issubclass(UncompressedSizeMismatch, CorruptMessage)
    assert DecompressionError is not UncompressedSizeMismatch


# ---------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------


def test_codec_names() -> None:
    assert CODEC_NAMES == {
        pb.NONE: "none",
        pb.LZ4: "lz4",
        pb.ZLIB: "zlib",
        pb.ZSTD: "zstd",
        pb.SNAPPY: "snappy",
    }
    assert (pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY) == (0, 1, 2, 3, 4)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lz4", pb.LZ4),
        ("LZ4", pb.LZ4),
        ("Zstd", pb.ZSTD),
        (" snappy ", pb.SNAPPY),
        ("ZLIB", pb.ZLIB),
        ("none", pb.NONE),
        ("NONE", pb.NONE),
        (None, pb.NONE),
    ],
)
def test_codec_by_name(name: str | None, expected: int) -> None:
    assert codec_by_name(name) == expected


@pytest.mark.parametrize("name", ["gzip", "", "lz4-frame", "snappy-framed"])
def test_codec_by_name_lists_the_valid_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown compression") as info:
        codec_by_name(name)
    assert "lz4, none, snappy, zlib, zstd" in str(info.value)
    assert repr(name) in str(info.value)


def test_zstd_compresses_and_inflates_from_many_threads_at_once() -> None:
    """Producers and readers share the module from several threads: each payload, compressed
    and inflated while seven other threads do the same, comes back as it went in."""
    import threading

    start = threading.Barrier(8)
    failures: list[str] = []

    def work(n: int) -> None:
        payloads = [os.urandom(512) * (1 + (n + i) % 64) for i in range(150)]
        start.wait()
        for payload in payloads:
            packed = compress(pb.ZSTD, payload)
            back = bytes(decompress(pb.ZSTD, packed, len(payload), len(payload)))
            if back != payload or zstandard.decompress(packed) != payload:
                failures.append(f"thread {n}: a {len(payload)}-byte payload came back changed")

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
