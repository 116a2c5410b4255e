"""Framing: turning commands into bytes and a byte stream back into frames.

Wire grammar (all integers big-endian)::

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
commands only. Both optional blocks are accepted on receive (pulsar-lite
omits the checksum on MESSAGE frames); the encoder always writes the
checksum. ``total_size`` counts everything after itself and is checked
against the frame limit as soon as its four bytes arrive, before the frame
is buffered.

Nothing here does I/O: :class:`FrameDecoder` takes bytes with
:meth:`~FrameDecoder.feed` and hands back complete :class:`Frame` objects.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c
from google.protobuf.descriptor import FieldDescriptor as _FieldDescriptor
from google.protobuf.message import DecodeError, Message
from google.protobuf.message import EncodeError as ProtobufEncodeError

from . import PulsarApi_pb2 as pb
from .errors import (
    ChecksumMismatch,
    CommandDecodeError,
    CommandSizeError,
    EncodeError,
    FrameTooLarge,
    MetadataDecodeError,
    TruncatedFrame,
    UnknownCommand,
)
from .wire import WireError, fields, read_varint

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING",
    "DEFAULT_MAX_FRAME_SIZE",
    "Frame",
    "FrameDecoder",
    "encode_command",
    "encode_payload_command",
    "command_name",
    "subcommand",
    "frame_limit_for",
    "decode_frame_body",
]

DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024
#: Room for command and metadata on top of the largest message.
FRAME_PADDING = 10 * 1024
DEFAULT_MAX_FRAME_SIZE = DEFAULT_MAX_MESSAGE_SIZE + FRAME_PADDING

MAGIC_CRC32C = 0x0E01
MAGIC_BROKER_ENTRY_METADATA = 0x0E02

_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_SIZES = struct.Struct(">II")  # total_size, command_size
_MAGIC_SIZE = struct.Struct(">HI")  # magic, then a u32 (checksum or block size)
_SIZE_PREFIX = _U32.size

_PAYLOAD_TYPES = frozenset({pb.BaseCommand.SEND, pb.BaseCommand.MESSAGE})


def frame_limit_for(max_message_size: int) -> int:
    """The frame limit that follows a broker's ``CommandConnected.max_message_size``."""
    return max_message_size + FRAME_PADDING


# ---------------------------------------------------------------------------
# Command helpers
# ---------------------------------------------------------------------------

# BaseCommand keeps each sub-command in the field whose number is its type.
_FIELD_BY_TYPE: dict[int, str] = {
    value: pb.BaseCommand.DESCRIPTOR.fields_by_number[value].name
    for value in pb.BaseCommand.Type.values()
}
# Sub-commands with required fields must be present; PING/PONG-like ones may
# be left out by a peer without losing anything.
def _is_required(field: _FieldDescriptor) -> bool:
    # ``label`` is gone from newer protobuf runtimes, ``is_required`` new in them.
    required = getattr(field, "is_required", None)
    return required if required is not None else field.label == field.LABEL_REQUIRED


_NEEDS_BODY: frozenset[int] = frozenset(
    value
    for value, name in _FIELD_BY_TYPE.items()
    if any(
        _is_required(f)
        for f in pb.BaseCommand.DESCRIPTOR.fields_by_name[name].message_type.fields
    )
)


def command_name(type_value: int) -> str:
    """The spec's name of a command type, e.g. ``"SEND_RECEIPT"``."""
    try:
        return pb.BaseCommand.Type.Name(type_value)
    except ValueError:
        return f"UNKNOWN({type_value})"


def subcommand(command: pb.BaseCommand) -> Message:
    """The sub-command a BaseCommand carries, e.g. its ``CommandSendReceipt``."""
    return getattr(command, _FIELD_BY_TYPE[command.type])


def encode_command(command: pb.BaseCommand) -> bytes:
    """A simple (payload-free) command as one frame.

    Raises:
        EncodeError: the command is a SEND or MESSAGE (use
            :func:`encode_payload_command`), lacks its sub-command, or misses
            required fields.
    """
    if command.type in _PAYLOAD_TYPES:
        msg = f"{command_name(command.type)} carries a payload: use encode_payload_command"
        raise EncodeError(msg)
    body = _serialize_command(command)
    return _SIZES.pack(len(body) + 4, len(body)) + body


def _serialize_command(command: pb.BaseCommand) -> bytes:
    """``command`` as bytes, refusing what :class:`FrameDecoder` would reject."""
    name = _FIELD_BY_TYPE.get(command.type)
    if name is None:
        msg = f"cannot encode a command of unknown type {command.type}"
        raise EncodeError(msg)
    if command.type in _NEEDS_BODY and not command.HasField(name):
        msg = f"{command_name(command.type)} command lacks its {name!r} body"
        raise EncodeError(msg)
    return _serialize(command)


def _serialize(message: Message) -> bytes:
    try:
        return message.SerializeToString()
    except ProtobufEncodeError as exc:  # required fields not set
        msg = f"cannot encode {message.DESCRIPTOR.name}: {exc}"
        raise EncodeError(msg) from exc


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
            whole frame, as :class:`FrameDecoder` does), the command is not a
            SEND or MESSAGE, or a message misses required fields.
    """
    if command.type not in _PAYLOAD_TYPES:
        msg = f"{command_name(command.type)} carries no payload: use encode_command"
        raise EncodeError(msg)
    body = _serialize_command(command)
    meta = metadata if isinstance(metadata, bytes) else _serialize(metadata)
    meta_part = _U32.pack(len(meta)) + meta
    checksum = crc32c(payload, crc32c(meta_part))
    head = b""
    if broker_entry_metadata is not None:
        bem = _serialize(broker_entry_metadata)
        head = _MAGIC_SIZE.pack(MAGIC_BROKER_ENTRY_METADATA, len(bem)) + bem
    total = 4 + len(body) + len(head) + 6 + len(meta_part) + len(payload)
    # The limit counts the whole frame, size prefix included, as the decoder does.
    if max_frame_size is not None and total + _SIZE_PREFIX > max_frame_size:
        msg = (
            f"{command_name(command.type)} frame of {total + _SIZE_PREFIX} bytes exceeds "
            f"the frame limit of {max_frame_size} bytes"
        )
        raise EncodeError(msg)
    return b"".join(
        (
            _SIZES.pack(total, len(body)),
            body,
            head,
            _MAGIC_SIZE.pack(MAGIC_CRC32C, checksum),
            meta_part,
            payload,
        )
    )


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------


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
        bem = self.broker_entry_metadata
        if bem is not None and bem.HasField("broker_timestamp"):
            return bem.broker_timestamp
        return None

    @property
    def broker_index(self) -> int | None:
        """Broker index of the entry's last message, if exposed."""
        bem = self.broker_entry_metadata
        return bem.index if bem is not None and bem.HasField("index") else None


class FrameDecoder:
    """Incremental, sans-IO frame decoder.

    Feed it whatever bytes arrive with :meth:`feed`; take complete frames
    with :meth:`next_frame` (``None`` means "need more bytes") or by iterating.
    At end of input, :meth:`close` raises :class:`TruncatedFrame` if a partial
    frame is left. After any error the stream cannot be resynchronised, and
    every later call raises the same error.

    Each frame's size is checked against the limit before its body is
    buffered; take the frames that are ready after each :meth:`feed` and the
    buffer never holds more than one frame plus one received piece.

    Args:
        max_frame_size: largest ``total_size + 4`` accepted. Follow the broker's
            ``max_message_size`` with :meth:`set_max_message_size`.
    """

    __slots__ = ("_base", "_buf", "_error", "_pos", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of the next frame in _buf
        self._base = 0  # stream offset of _buf[0]
        self._error: Exception | None = None
        self.max_frame_size = max_frame_size

    def set_max_message_size(self, max_message_size: int) -> None:
        """Follow ``CommandConnected.max_message_size``."""
        self.max_frame_size = frame_limit_for(max_message_size)

    @property
    def offset(self) -> int:
        """Stream offset of the next frame."""
        return self._base + self._pos

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes. Only buffers; frames come from :meth:`next_frame`.

        Raises:
            FrameTooLarge: the next frame to be taken declares a size above the
                limit; raised as soon as its 4-byte size is here, before its
                body is buffered. (An oversized frame queued behind frames not
                yet taken is reported by :meth:`next_frame` once they are.)
        """
        if self._error is not None:
            raise self._error
        if self._pos and self._pos >= len(self._buf) // 2:
            # Drop consumed bytes once they are at least half the buffer, so
            # each byte is moved O(1) times overall.
            del self._buf[: self._pos]
            self._base += self._pos
            self._pos = 0
        self._buf += data
        self._check_next_size()

    def close(self) -> None:
        """Declare end of input.

        Raises:
            TruncatedFrame: a partial frame is buffered.
        """
        if self._error is not None:
            raise self._error
        # Complete frames not taken yet are fine; only a partial one at the end is not.
        buf, pos, end = self._buf, self._pos, len(self._buf)
        while end - pos >= _SIZE_PREFIX:
            (total,) = _U32.unpack_from(buf, pos)
            if pos + _SIZE_PREFIX + total > end:
                break
            pos += _SIZE_PREFIX + total
        left = end - pos
        if left:
            need = "its 4-byte size"
            if left >= _SIZE_PREFIX:
                (total,) = _U32.unpack_from(buf, pos)
                need = f"{total + _SIZE_PREFIX} bytes"
            msg = f"input ends inside a frame: {left} bytes present of {need}"
            self._fail(TruncatedFrame(msg, offset=self._base + pos))

    def __iter__(self) -> FrameDecoder:
        return self

    def __next__(self) -> Frame:
        frame = self.next_frame()
        if frame is None:
            raise StopIteration
        return frame

    def next_frame(self) -> Frame | None:
        """The next complete frame, or ``None`` if more bytes are needed."""
        if self._error is not None:
            raise self._error
        buf, pos = self._buf, self._pos
        if len(buf) - pos < _SIZE_PREFIX:
            return None
        # Checked here (against the limit in force now) as well as in feed():
        # a frame taken before this one may have changed the limit.
        self._check_next_size()
        (total,) = _U32.unpack_from(buf, pos)
        end = pos + _SIZE_PREFIX + total
        if end > len(buf):
            return None
        data = bytes(buf[pos + _SIZE_PREFIX : end])
        offset = self._base + pos
        self._pos = end
        try:
            return decode_frame_body(data, offset)
        except Exception as exc:
            self._error = exc
            raise

    # -- internals -----------------------------------------------------------

    def _check_next_size(self) -> None:
        """Reject an oversized frame as soon as its size prefix is visible."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos >= _SIZE_PREFIX:
            (total,) = _U32.unpack_from(buf, pos)
            if total + _SIZE_PREFIX > self.max_frame_size:
                msg = (
                    f"frame declares {total + _SIZE_PREFIX} bytes, above the frame limit "
                    f"of {self.max_frame_size} bytes"
                )
                self._fail(FrameTooLarge(msg, offset=self._base + pos))

    def _fail(self, exc: Exception) -> None:
        self._error = exc
        self._buf = bytearray()
        self._pos = 0
        raise exc


def decode_frame_body(data: bytes, offset: int = 0) -> Frame:
    """Decode one frame given everything after its ``total_size`` prefix.

    Args:
        data: the ``total_size`` bytes of the frame.
        offset: stream offset of the frame, for error messages.
    """
    total = len(data)
    if total < 4:
        msg = f"frame of {total} bytes is too short to hold its command size"
        raise TruncatedFrame(msg, offset=offset)
    (cmd_size,) = _U32.unpack_from(data, 0)
    if cmd_size > total - 4:
        msg = f"command size {cmd_size} exceeds the {total - 4} bytes left in the frame"
        raise CommandSizeError(msg, offset=offset)
    view = memoryview(data)
    command = _parse_command(view[4 : 4 + cmd_size], offset)
    frame = Frame(command, offset, total + _SIZE_PREFIX)
    pos = 4 + cmd_size
    if command.type in _PAYLOAD_TYPES:
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
        if type_value is not None and type_value not in _FIELD_BY_TYPE:
            _raise_unknown(type_value, offset)
        msg = f"cannot decode {command_name(type_value or 0) if type_value else 'command'}: {exc}"
        raise CommandDecodeError(msg, offset=offset) from exc
    if not command.HasField("type"):
        type_value = _raw_type(view)
        if type_value is not None:
            _raise_unknown(type_value, offset)
        msg = "command has no type"
        raise CommandDecodeError(msg, offset=offset)
    if command.type in _NEEDS_BODY and not command.HasField(_FIELD_BY_TYPE[command.type]):
        msg = (
            f"{command_name(command.type)} command lacks its "
            f"{_FIELD_BY_TYPE[command.type]!r} body"
        )
        raise CommandDecodeError(msg, offset=offset)
    # Parsing does not check required fields (serializing does); the
    # reference clients reject a command that lacks them, and so do we.
    if not command.IsInitialized():
        missing = ", ".join(command.FindInitializationErrors())
        msg = f"{command_name(command.type)} command lacks required fields: {missing}"
        raise CommandDecodeError(msg, offset=offset)
    return command


def _raise_unknown(type_value: int, offset: int) -> None:
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
    if total - pos >= 6 and _U16.unpack_from(data, pos)[0] == MAGIC_BROKER_ENTRY_METADATA:
        (_, size) = _MAGIC_SIZE.unpack_from(data, pos)
        pos += 6
        if size > total - pos:
            msg = f"broker entry metadata of {size} bytes runs past the end of the {name} frame"
            raise TruncatedFrame(msg, offset=offset)
        bem = pb.BrokerEntryMetadata()
        try:
            bem.ParseFromString(view[pos : pos + size])
        except (DecodeError, RuntimeError, ValueError) as exc:
            msg = f"cannot decode broker entry metadata of {name}: {exc}"
            raise MetadataDecodeError(msg, offset=offset) from exc
        frame.broker_entry_metadata = bem
        pos += size
    if total - pos >= 6 and _U16.unpack_from(data, pos)[0] == MAGIC_CRC32C:
        (_, expected) = _MAGIC_SIZE.unpack_from(data, pos)
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
    (meta_size,) = _U32.unpack_from(data, pos)
    pos += 4
    if meta_size > total - pos:
        msg = (
            f"metadata size {meta_size} of {name} exceeds the {total - pos} bytes left "
            "in the frame"
        )
        raise TruncatedFrame(msg, offset=offset)
    metadata = pb.MessageMetadata()
    try:
        metadata.ParseFromString(view[pos : pos + meta_size])
    except (DecodeError, RuntimeError, ValueError) as exc:
        msg = f"cannot decode message metadata of {name}: {exc}"
        raise MetadataDecodeError(msg, offset=offset) from exc
    if not metadata.IsInitialized():
        missing = ", ".join(metadata.FindInitializationErrors())
        msg = f"message metadata of {name} lacks required fields: {missing}"
        raise MetadataDecodeError(msg, offset=offset)
    frame.metadata = metadata
    frame.payload = view[pos + meta_size :]
