"""Sans-IO Pulsar binary protocol: framing, commands, metadata, batches, codecs, positions.

Nothing in this package opens a socket, starts a thread or reads a clock.
Bytes go in (:class:`FrameDecoder`), frames and messages come out; commands
and payloads go in (:func:`encode_command`, :func:`encode_payload_command`),
bytes come out. It imports neither pyarrow nor numpy: the Arrow decoding of
messages is :mod:`pulsar_spark.columnar`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pulsar_spark.lazy import lazy_exports

if TYPE_CHECKING:
    from . import PulsarApi_pb2 as pb
    from .batch import BatchItems, encode_batch, is_batch, split_batch
    from .chunks import ChunkAssembler, ChunkedMessage, is_chunk
    from .codecs import CODEC_NAMES, codec_by_name, compress, decompress
    from .entry import Entry, open_entry, select
    from .entry_messages import Message, decode_key, messages
    from .errors import (
        BatchDecodeError,
        ChecksumMismatch,
        ChunkError,
        CommandDecodeError,
        CommandSizeError,
        CorruptMessage,
        DecompressionError,
        EncodeError,
        FrameError,
        FrameTooLarge,
        MetadataDecodeError,
        ProtocolError,
        PulsarError,
        ServerError,
        TruncatedFrame,
        UncompressedSizeMismatch,
        UnknownCommand,
        server_error,
    )
    from .framing import (
        DEFAULT_MAX_FRAME_SIZE,
        DEFAULT_MAX_MESSAGE_SIZE,
        FRAME_PADDING,
        Frame,
        FrameDecoder,
        command_name,
        decode_frame_body,
        encode_command,
        encode_payload_command,
        frame_limit_for,
        subcommand,
    )
    from .ids.message_id import EARLIEST, LATEST, MessageId
    from .ids.position import InvalidPosition, Position
    from .topics import base_topic, partition_name

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BatchItems": "batch",
        "encode_batch": "batch",
        "is_batch": "batch",
        "split_batch": "batch",
        "ChunkAssembler": "chunks",
        "ChunkedMessage": "chunks",
        "is_chunk": "chunks",
        "CODEC_NAMES": "codecs",
        "codec_by_name": "codecs",
        "compress": "codecs",
        "decompress": "codecs",
        "Entry": "entry",
        "open_entry": "entry",
        "select": "entry",
        "Message": "entry_messages",
        "decode_key": "entry_messages",
        "messages": "entry_messages",
        "BatchDecodeError": "errors",
        "ChecksumMismatch": "errors",
        "ChunkError": "errors",
        "CommandDecodeError": "errors",
        "CommandSizeError": "errors",
        "CorruptMessage": "errors",
        "DecompressionError": "errors",
        "EncodeError": "errors",
        "FrameError": "errors",
        "FrameTooLarge": "errors",
        "MetadataDecodeError": "errors",
        "ProtocolError": "errors",
        "PulsarError": "errors",
        "ServerError": "errors",
        "TruncatedFrame": "errors",
        "UncompressedSizeMismatch": "errors",
        "UnknownCommand": "errors",
        "server_error": "errors",
        "DEFAULT_MAX_FRAME_SIZE": "framing",
        "DEFAULT_MAX_MESSAGE_SIZE": "framing",
        "FRAME_PADDING": "framing",
        "Frame": "framing",
        "FrameDecoder": "framing",
        "command_name": "framing",
        "decode_frame_body": "framing",
        "encode_command": "framing",
        "encode_payload_command": "framing",
        "frame_limit_for": "framing",
        "subcommand": "framing",
        "EARLIEST": "ids.message_id",
        "LATEST": "ids.message_id",
        "MessageId": "ids.message_id",
        "InvalidPosition": "ids.position",
        "Position": "ids.position",
        "base_topic": "topics",
        "partition_name": "topics",
    },
    {"pb": "PulsarApi_pb2"},
)

# fmt: off
__all__ = [
    "pb",
    "BatchItems", "encode_batch", "is_batch", "split_batch",
    "ChunkAssembler", "ChunkedMessage", "is_chunk",
    "CODEC_NAMES", "codec_by_name", "compress", "decompress",
    "Entry", "Message", "decode_key", "messages", "open_entry", "select",
    "BatchDecodeError", "ChecksumMismatch", "ChunkError", "CommandDecodeError",
    "CommandSizeError", "CorruptMessage", "DecompressionError", "EncodeError", "FrameError",
    "FrameTooLarge", "MetadataDecodeError", "ProtocolError", "PulsarError", "ServerError",
    "TruncatedFrame", "UncompressedSizeMismatch", "UnknownCommand", "server_error",
    "DEFAULT_MAX_FRAME_SIZE", "DEFAULT_MAX_MESSAGE_SIZE", "FRAME_PADDING", "Frame",
    "FrameDecoder", "command_name", "decode_frame_body", "encode_command",
    "encode_payload_command", "frame_limit_for", "subcommand",
    "EARLIEST", "LATEST", "MessageId",
    "InvalidPosition", "Position",
    "base_topic", "partition_name",
]
# fmt: on
