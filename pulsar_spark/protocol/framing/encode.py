"""Frame encoding: a BaseCommand, and for SEND/MESSAGE its metadata and payload, as bytes.

Wire grammar of what is written (all integers big-endian)::

    frame          = total_size:u32  command_size:u32  command[command_size]
                     [payload_part]
    payload_part   = [broker_entry]  0x0e01  crc32c:u32
                     metadata_size:u32  metadata[metadata_size]  payload[*]
    broker_entry   = 0x0e02  size:u32  BrokerEntryMetadata[size]

``total_size`` counts every byte after itself. ``payload_part`` follows SEND
and MESSAGE commands only, and always carries the checksum: CRC32C
(Castagnoli) of ``metadata_size``, ``metadata`` and ``payload``. Only a broker
writes the ``broker_entry`` block. A frame limit, when given, counts the whole
frame including ``total_size``, as :class:`~.stream.FrameDecoder` does.
"""

from __future__ import annotations

from google.protobuf.message import EncodeError as ProtobufEncodeError
from google.protobuf.message import Message

from .. import PulsarApi_pb2 as pb
from ..errors import EncodeError
from .checksum import crc32c
from .format import (
    FIELD_BY_TYPE,
    PAYLOAD_TYPES,
    SIZE_PREFIX,
    SIZES,
    U32,
    broker_entry_block,
    checksum_block,
    command_name,
    missing_body,
)

__all__ = ["encode_command", "encode_payload_command"]


def encode_command(command: pb.BaseCommand) -> bytes:
    """A simple (payload-free) command as one frame.

    Raises:
        EncodeError: the command is a SEND or MESSAGE (use
            :func:`encode_payload_command`), lacks its sub-command, or misses
            required fields.
    """
    if command.type in PAYLOAD_TYPES:
        msg = f"{command_name(command.type)} carries a payload: use encode_payload_command"
        raise EncodeError(msg)
    body = _serialize_command(command)
    return SIZES.pack(len(body) + 4, len(body)) + body


def encode_payload_command(
    command: pb.BaseCommand,
    metadata: pb.MessageMetadata | bytes,
    payload: bytes | bytearray | memoryview,
    *,
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None,
    max_frame_size: int | None = None,
) -> bytes:
    """A SEND or MESSAGE frame: command, optional broker entry block, checksum,
    metadata and payload.

    The ``0x0e01`` magic and CRC32C are always written. ``broker_entry_metadata``
    is what a broker prepends; clients leave it out.

    Raises:
        EncodeError: the frame would exceed ``max_frame_size`` (which counts the
            whole frame, as :class:`~.stream.FrameDecoder` does), the
            command is not a SEND or MESSAGE, or a message misses required fields.
    """
    if command.type not in PAYLOAD_TYPES:
        msg = f"{command_name(command.type)} carries no payload: use encode_command"
        raise EncodeError(msg)
    body = _serialize_command(command)
    meta = metadata if isinstance(metadata, bytes) else _serialize(metadata)
    meta_part = U32.pack(len(meta)) + meta
    checksum = crc32c(payload, crc32c(meta_part))
    head = b""
    if broker_entry_metadata is not None:
        head = broker_entry_block(_serialize(broker_entry_metadata))
    total = 4 + len(body) + len(head) + 6 + len(meta_part) + len(payload)
    # The limit counts the whole frame, size prefix included, as the decoder does.
    if max_frame_size is not None and total + SIZE_PREFIX > max_frame_size:
        msg = (
            f"{command_name(command.type)} frame of {total + SIZE_PREFIX} bytes exceeds "
            f"the frame limit of {max_frame_size} bytes"
        )
        raise EncodeError(msg)
    return b"".join(
        (
            SIZES.pack(total, len(body)),
            body,
            head,
            checksum_block(checksum),
            meta_part,
            payload,
        )
    )


def _serialize_command(command: pb.BaseCommand) -> bytes:
    """``command`` as bytes, refusing what the frame decoder would reject."""
    if command.type not in FIELD_BY_TYPE:
        msg = f"cannot encode a command of unknown type {command.type}"
        raise EncodeError(msg)
    problem = missing_body(command)
    if problem is not None:
        raise EncodeError(problem)
    return _serialize(command)


def _serialize(message: Message) -> bytes:
    try:
        data: bytes = message.SerializeToString()
    except ProtobufEncodeError as exc:  # required fields not set
        msg = f"cannot encode {message.DESCRIPTOR.name}: {exc}"
        raise EncodeError(msg) from exc
    return data
