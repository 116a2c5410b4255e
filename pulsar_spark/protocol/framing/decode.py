"""Frame decoding: the bytes of one frame turned into a :class:`Frame`, every field checked.

Wire grammar of what is accepted (all integers big-endian)::

    frame          = total_size:u32  rest[total_size]
    rest           = command_size:u32  command[command_size]  [payload_part]
    payload_part   = [broker_entry]  [checksummed]  metadata_size:u32
                     metadata[metadata_size]  payload[*]
    broker_entry   = 0x0e02  size:u32  BrokerEntryMetadata[size]
    checksummed    = 0x0e01  crc32c:u32
                     ; CRC32C (Castagnoli) of every byte after the checksum
                     ; field to the end of the frame: metadata_size,
                     ; metadata and payload (not the broker entry block)

``command`` is a ``BaseCommand``; ``payload_part`` follows SEND and MESSAGE
commands only, and any other command must fill its frame exactly. Both
optional blocks are accepted (pulsar-lite omits the checksum on MESSAGE
frames); a checksum that is present is verified. :func:`decode_frame_body`
takes ``rest``: splitting a byte stream into frames, and the frame limit, are
:class:`~.stream.FrameDecoder`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn

from google.protobuf.message import DecodeError, Message

from .. import PulsarApi_pb2 as pb
from ..errors import (
    ChecksumMismatch,
    CommandDecodeError,
    CommandSizeError,
    MetadataDecodeError,
    TruncatedFrame,
    UnknownCommand,
    WireError,
)
from ..wire import fields, read_varint
from .checksum import crc32c
from .format import (
    FIELD_BY_TYPE,
    MAGIC_BROKER_ENTRY_METADATA,
    MAGIC_CRC32C,
    MAGIC_SIZE,
    PAYLOAD_TYPES,
    SIZE_PREFIX,
    U16,
    U32,
    command_name,
    missing_body,
)

__all__ = ["Frame", "decode_frame_body"]


@dataclass(slots=True)
class Frame:
    """One decoded frame.

    ``metadata``, ``payload`` and friends are set for SEND and MESSAGE frames
    only. ``payload`` is a zero-copy view into the frame's bytes.
    """

    command: pb.BaseCommand
    #: Offset of the frame's first byte in the decoded stream.
    offset: int
    #: Whole frame length, size prefix included.
    size: int
    metadata: pb.MessageMetadata | None = None
    payload: memoryview | None = None
    broker_entry_metadata: pb.BrokerEntryMetadata | None = None
    #: Whether the frame carried the optional 0x0e01 + CRC32C block (verified).
    has_checksum: bool = False

    @property
    def type_name(self) -> str:
        return command_name(self.command.type)

    @property
    def broker_publish_time(self) -> int | None:
        """Broker timestamp (ms) from the broker entry metadata, if exposed."""
        return self._broker_entry_field("broker_timestamp")

    @property
    def broker_index(self) -> int | None:
        """Broker index of the entry's last message, if exposed."""
        return self._broker_entry_field("index")

    def _broker_entry_field(self, name: str) -> int | None:
        bem = self.broker_entry_metadata
        if bem is None or not bem.HasField(name):
            return None
        value: int = getattr(bem, name)
        return value


def decode_frame_body(data: bytes, offset: int = 0) -> Frame:
    """Decode one frame given everything after its ``total_size`` prefix.

    Args:
        data: the ``total_size`` bytes of the frame.
        offset: stream offset of the frame, for error messages.

    Raises:
        ProtocolError: (a subclass of) naming what is wrong and ``offset``.
    """
    total = len(data)
    if total < 4:
        msg = f"frame of {total} bytes is too short to hold its command size"
        raise TruncatedFrame(msg, offset=offset)
    (cmd_size,) = U32.unpack_from(data, 0)
    if cmd_size > total - 4:
        msg = f"command size {cmd_size} exceeds the {total - 4} bytes left in the frame"
        raise CommandSizeError(msg, offset=offset)
    view = memoryview(data)
    command = _parse_command(view[4 : 4 + cmd_size], offset)
    frame = Frame(command, offset, total + SIZE_PREFIX)
    pos = 4 + cmd_size
    if command.type in PAYLOAD_TYPES:
        _decode_payload_part(frame, data, view, pos, offset)
    elif pos != total:
        msg = (
            f"{command_name(command.type)} carries no payload, but {total - pos} bytes "
            f"follow its {cmd_size}-byte command"
        )
        raise CommandSizeError(msg, offset=offset)
    return frame


def _parse_command(view: memoryview, offset: int) -> pb.BaseCommand:
    command = pb.BaseCommand()
    try:
        command.ParseFromString(view)
    except (DecodeError, RuntimeError, ValueError) as exc:
        type_value = _raw_type(view)
        if type_value is not None and type_value not in FIELD_BY_TYPE:
            _raise_unknown(type_value, offset)
        msg = f"cannot decode {command_name(type_value or 0) if type_value else 'command'}: {exc}"
        raise CommandDecodeError(msg, offset=offset) from exc
    if not command.HasField("type"):
        type_value = _raw_type(view)
        if type_value is not None:
            _raise_unknown(type_value, offset)
        msg = "command has no type"
        raise CommandDecodeError(msg, offset=offset)
    problem = missing_body(command)
    if problem is not None:
        raise CommandDecodeError(problem, offset=offset)
    # Parsing does not check required fields (serializing does); the
    # reference clients reject a command that lacks them, and so do we.
    if not command.IsInitialized():
        missing = ", ".join(command.FindInitializationErrors())
        msg = f"{command_name(command.type)} command lacks required fields: {missing}"
        raise CommandDecodeError(msg, offset=offset)
    return command


def _raise_unknown(type_value: int, offset: int) -> NoReturn:
    msg = f"unknown command type {type_value}"
    raise UnknownCommand(msg, type_value=type_value, offset=offset)


def _raw_type(view: memoryview) -> int | None:
    """The value of BaseCommand field 1 (``type``) read by hand, if there is one."""
    try:
        for field, wire, start, _ in fields(view):
            if field == 1 and wire == 0:
                return read_varint(view, start)[0]
    except WireError:
        return None
    return None


def _decode_payload_part(
    frame: Frame, data: bytes, view: memoryview, pos: int, offset: int
) -> None:
    total = len(data)
    name = command_name(frame.command.type)
    if total - pos >= 6 and U16.unpack_from(data, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        (_, size) = MAGIC_SIZE.unpack_from(data, pos)
        pos += 6
        if size > total - pos:
            msg = f"broker entry metadata of {size} bytes runs past the end of the {name} frame"
            raise TruncatedFrame(msg, offset=offset)
        bem = pb.BrokerEntryMetadata()
        _parse_metadata(bem, view[pos : pos + size], f"broker entry metadata of {name}", offset)
        frame.broker_entry_metadata = bem
        pos += size
    if total - pos >= 6 and U16.unpack_from(data, pos)[0] == MAGIC_CRC32C:
        (_, expected) = MAGIC_SIZE.unpack_from(data, pos)
        pos += 6
        actual = crc32c(view[pos:])
        if actual != expected:
            msg = (
                f"CRC32C mismatch in {name}: frame says {expected:#010x}, "
                f"metadata and payload give {actual:#010x}"
            )
            raise ChecksumMismatch(msg, offset=offset)
        frame.has_checksum = True
    if total - pos < 4:
        msg = f"{name} frame ends before its metadata size"
        raise TruncatedFrame(msg, offset=offset)
    (meta_size,) = U32.unpack_from(data, pos)
    pos += 4
    if meta_size > total - pos:
        msg = (
            f"metadata size {meta_size} of {name} exceeds the {total - pos} bytes left in the frame"
        )
        raise TruncatedFrame(msg, offset=offset)
    metadata = pb.MessageMetadata()
    _parse_metadata(metadata, view[pos : pos + meta_size], f"message metadata of {name}", offset)
    if not metadata.IsInitialized():
        missing = ", ".join(metadata.FindInitializationErrors())
        msg = f"message metadata of {name} lacks required fields: {missing}"
        raise MetadataDecodeError(msg, offset=offset)
    frame.metadata = metadata
    frame.payload = view[pos + meta_size :]


def _parse_metadata(message: Message, view: memoryview, what: str, offset: int) -> None:
    """Parse ``view`` into ``message``, or raise :class:`MetadataDecodeError` about ``what``."""
    try:
        message.ParseFromString(view)
    except (DecodeError, RuntimeError, ValueError) as exc:
        msg = f"cannot decode {what}: {exc}"
        raise MetadataDecodeError(msg, offset=offset) from exc
