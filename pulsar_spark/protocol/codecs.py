"""Payload compression codecs: compress as Pulsar producers do, decompress with size checks.

========  ====================================================================
NONE      payload as is
LZ4       one raw LZ4 *block*: no frame header, no size prefix
ZLIB      a zlib (RFC 1950) stream; Java and C++ producers sync-flush and never
          finish it, so it may have no final block and no Adler-32 trailer
ZSTD      one standard zstd frame
SNAPPY    one raw Snappy *block* (not the framed/stream format)
========  ====================================================================

The whole batch payload is compressed as one unit, and
``MessageMetadata.uncompressed_size`` says what it inflates to. Decoding
checks that size before allocating anything (it must not exceed the caller's
limit, normally the frame limit) and checks the result against it after.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable

import cramjam
import lz4.block
import zstandard

from . import PulsarApi_pb2 as pb
from .errors import DecompressionError, EncodeError, UncompressedSizeMismatch, UnknownCodec

__all__ = ["CODEC_NAMES", "codec_by_name", "compress", "decompress"]

Buffer = bytes | bytearray | memoryview

#: Codec names as users write them, by wire value.
CODEC_NAMES: dict[int, str] = {
    pb.NONE: "none",
    pb.LZ4: "lz4",
    pb.ZLIB: "zlib",
    pb.ZSTD: "zstd",
    pb.SNAPPY: "snappy",
}
_BY_NAME = {name: value for value, name in CODEC_NAMES.items()}


class _ZstdContexts(threading.local):
    """A zstd compressor and decompressor per thread: python-zstandard's contexts are not
    safe to use from two threads at once, and producers and readers run in several."""

    def __init__(self) -> None:
        self.compressor = zstandard.ZstdCompressor(level=3)
        self.decompressor = zstandard.ZstdDecompressor()


_zstd = _ZstdContexts()


def codec_by_name(name: str | None) -> int:
    """Wire value of a codec given by name (case-insensitive; ``None`` = NONE).

    Raises:
        UnknownCodec: (a ``ValueError``) not a codec Pulsar knows; the message
            lists the valid names.
    """
    if name is None:
        return pb.NONE
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        valid = ", ".join(sorted(_BY_NAME))
        msg = f"unknown compression {name!r}; expected one of {valid}"
        raise UnknownCodec(msg) from None


def compress(codec: int, data: Buffer) -> bytes:
    """Compress a payload the way the official producers do."""
    if codec == pb.NONE:
        return bytes(data)
    if codec == pb.LZ4:
        block: bytes = lz4.block.compress(data, store_size=False)
        return block
    if codec == pb.ZLIB:
        # A complete stream; decoders accept it as well as unfinished ones.
        return zlib.compress(data)
    if codec == pb.ZSTD:
        return _zstd.compressor.compress(data)
    if codec == pb.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    msg = f"cannot compress with unknown codec {codec}"
    raise EncodeError(msg)


def decompress(codec: int, data: Buffer, uncompressed_size: int, limit: int) -> Buffer:
    """Inflate ``data`` to exactly ``uncompressed_size`` bytes.

    Args:
        codec: ``CompressionType`` value from the metadata.
        data: the compressed payload.
        uncompressed_size: what the metadata declares.
        limit: the largest size this call may allocate (the frame limit);
            a declared size above it is rejected before any work is done.

    Raises:
        UncompressedSizeMismatch: declared size above ``limit``, or the
            payload inflates to a different size.
        DecompressionError: the codec rejects the bytes, or the codec is unknown.
    """
    if codec == pb.NONE:
        return data
    name = CODEC_NAMES.get(codec)
    if name is None:
        msg = f"unknown compression codec {codec}"
        raise DecompressionError(msg)
    if uncompressed_size > limit or uncompressed_size < 0:
        msg = (
            f"{name} payload declares an uncompressed size of {uncompressed_size} bytes, "
            f"above the limit of {limit} bytes"
        )
        raise UncompressedSizeMismatch(msg)
    try:
        out = _DECODERS[codec](data, uncompressed_size, limit)
    except (UncompressedSizeMismatch, DecompressionError):
        raise
    except Exception as exc:  # each codec library has its own error types
        msg = f"{name} payload of {len(data)} bytes does not decompress: {exc}"
        raise DecompressionError(msg) from exc
    if len(out) != uncompressed_size:
        # Decoders stop one byte past the declared size: "more" is all we know then.
        got = f"more than {uncompressed_size}" if len(out) > uncompressed_size else len(out)
        msg = (
            f"{name} payload inflates to {got} bytes, but its metadata declares {uncompressed_size}"
        )
        raise UncompressedSizeMismatch(msg)
    return out


def _lz4(data: Buffer, size: int, limit: int) -> Buffer:
    if not data and size == 0:
        return b""  # some producers send an empty payload for an empty message
    try:
        inflated: bytes = lz4.block.decompress(data, uncompressed_size=size)
    except lz4.block.LZ4BlockError:
        pass
    else:
        return inflated
    # A raw block does not say how much it holds, and the library only reports
    # "corrupt or too small": try again with room up to the limit to tell a
    # lying uncompressed_size from bytes that are not LZ4 at all.
    if limit > size:
        try:
            out = lz4.block.decompress(data, uncompressed_size=limit)
        except lz4.block.LZ4BlockError:
            pass
        else:
            msg = f"lz4 payload inflates to {len(out)} bytes, but its metadata declares {size}"
            raise UncompressedSizeMismatch(msg)
    msg = f"lz4 payload of {len(data)} bytes is not a raw LZ4 block of at most {limit} bytes"
    raise DecompressionError(msg)


def _zlib(data: Buffer, size: int, limit: int) -> Buffer:
    # One byte more than declared reveals a payload that inflates too far,
    # without ever allocating more than size + 1.
    return zlib.decompressobj().decompress(data, size + 1)


def _unzstd(data: Buffer, size: int, limit: int) -> Buffer:
    # The frame header may carry its own content size, which the library would
    # allocate without looking at max_output_size: check it first.
    content_size = zstandard.get_frame_parameters(data).content_size
    if content_size != zstandard.CONTENTSIZE_UNKNOWN:
        if content_size != size:
            msg = f"zstd frame declares {content_size} bytes inside, metadata declares {size}"
            raise UncompressedSizeMismatch(msg)
        if size:
            return _zstd.decompressor.decompress(data, max_output_size=size)
    # No content size in the header (or an empty one): stream out at most
    # one byte more than declared, which reveals a payload that inflates too far.
    out = bytearray()
    with _zstd.decompressor.stream_reader(data) as reader:
        while len(out) <= size:
            piece = reader.read(size + 1 - len(out))
            if not piece:
                break
            out += piece
    return out


def _snappy(data: Buffer, size: int, limit: int) -> Buffer:
    declared = cramjam.snappy.decompress_raw_len(data)
    if declared != size:
        msg = f"snappy payload declares {declared} bytes inside, metadata declares {size}"
        raise UncompressedSizeMismatch(msg)
    out = bytearray(size)
    written = cramjam.snappy.decompress_raw_into(data, out)
    if written != size:
        msg = f"snappy payload inflates to {written} bytes, metadata declares {size}"
        raise UncompressedSizeMismatch(msg)
    return out


_DECODERS: dict[int, Callable[[Buffer, int, int], Buffer]] = {
    pb.LZ4: _lz4,
    pb.ZLIB: _zlib,
    pb.ZSTD: _unzstd,
    pb.SNAPPY: _snappy,
}
