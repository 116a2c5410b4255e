"""Frame layout: size limits, magic numbers, fixed structs and the command type table.

What the frame encoder (:mod:`.encode`) and decoder (:mod:`.decode`,
:mod:`.stream`) share; each of those modules gives the wire grammar it
writes or reads. ``BaseCommand`` keeps each sub-command in the field whose
number is its type, which the table below maps once.
"""

from __future__ import annotations

import struct

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from .. import PulsarApi_pb2 as pb

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING",
    "DEFAULT_MAX_FRAME_SIZE",
    "MAGIC_CRC32C",
    "MAGIC_BROKER_ENTRY_METADATA",
    "command_name",
    "subcommand",
    "frame_limit_for",
    "missing_body",
    "checksum_block",
    "broker_entry_block",
]

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
#: Room for command and metadata on top of the largest message.
FRAME_PADDING = 10 * 1024
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

U32 = struct.Struct(">I")
U16 = struct.Struct(">H")
SIZES = struct.Struct(">II")  # total_size, command_size
MAGIC_SIZE = struct.Struct(">HI")  # magic, then a u32 (checksum or block size)
SIZE_PREFIX = U32.size

#: Command types whose frame carries metadata and a payload.
PAYLOAD_TYPES = frozenset({pb.BaseCommand.SEND, pb.BaseCommand.MESSAGE})


def checksum_block(crc: int) -> bytes:
    """The ``0x0e01 crc32c:u32`` block that precedes ``metadata_size``."""
    return MAGIC_SIZE.pack(MAGIC_CRC32C, crc)


def broker_entry_block(serialized: bytes) -> bytes:
    """The ``0x0e02 size:u32 BrokerEntryMetadata`` block a broker puts first."""
    return MAGIC_SIZE.pack(MAGIC_BROKER_ENTRY_METADATA, len(serialized)) + serialized


def frame_limit_for(max_message_size: int) -> int:
    """The frame limit that follows a broker's ``CommandConnected.max_message_size``."""
    return max_message_size + FRAME_PADDING


#: The BaseCommand field that holds the sub-command, by command type.
FIELD_BY_TYPE: dict[int, str] = {
    value: pb.BaseCommand.DESCRIPTOR.fields_by_number[value].name
    for value in pb.BaseCommand.Type.values()
}


def _is_required(field: FieldDescriptor) -> bool:
    # ``label`` is gone from newer protobuf runtimes, ``is_required`` new in them.
    required = getattr(field, "is_required", None)
    if required is not None:
        return bool(required)
    return bool(field.label == field.LABEL_REQUIRED)


#: Sub-commands with required fields must be present; PING/PONG-like ones may
#: be left out by a peer without losing anything.
NEEDS_BODY: frozenset[int] = frozenset(
    value
    for value, name in FIELD_BY_TYPE.items()
    if any(
        _is_required(f) for f in pb.BaseCommand.DESCRIPTOR.fields_by_name[name].message_type.fields
    )
)


def command_name(type_value: int) -> str:
    """The spec's name of a command type, e.g. ``"SEND_RECEIPT"``."""
    try:
        name: str = pb.BaseCommand.Type.Name(type_value)
    except ValueError:
        return f"UNKNOWN({type_value})"
    return name


def subcommand(command: pb.BaseCommand) -> Message:
    """The sub-command a BaseCommand carries, e.g. its ``CommandSendReceipt``."""
    body: Message = getattr(command, FIELD_BY_TYPE[command.type])
    return body


def missing_body(command: pb.BaseCommand) -> str | None:
    """Why ``command`` cannot be framed as it is, or ``None`` if it can.

    An unknown type, or a type whose sub-command has required fields with that
    sub-command left out, is refused on both sides of the wire.
    """
    name = FIELD_BY_TYPE.get(command.type)
    if name is None:
        return f"unknown command type {command.type}"
    if command.type in NEEDS_BODY and not command.HasField(name):
        return f"{command_name(command.type)} command lacks its {name!r} body"
    return None
