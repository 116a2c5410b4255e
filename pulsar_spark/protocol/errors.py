"""The one error hierarchy of pulsar-spark: :class:`PulsarError` and its classes, retriable or not.

Every error the connector raises derives from :class:`PulsarError`. Each class
says whether retrying can help through its ``retriable`` attribute, so callers
branch on policy rather than on message text::

    PulsarError                      retriable?
    +-- ProtocolError                no   bytes that break the wire protocol
    |   +-- FrameError
    |   |   +-- TruncatedFrame       the stream ends inside a frame
    |   |   +-- FrameTooLarge        a size prefix beyond the frame limit
    |   |   +-- CommandSizeError     command size beyond its frame
    |   |   +-- ChecksumMismatch     CRC32C of metadata+payload differs
    |   +-- CommandDecodeError       BaseCommand bytes that do not parse
    |   +-- UnknownCommand           a command type this client does not know
    |   +-- MetadataDecodeError      undecodable message/broker-entry metadata
    |   +-- CorruptMessage           a payload that cannot be turned into messages
    |   |   +-- DecompressionError
    |   |   +-- UncompressedSizeMismatch
    |   |   +-- BatchDecodeError
    |   |   +-- ChunkError
    |   +-- WireError                protobuf wire format read by hand that is broken
    +-- EncodeError                  no   what we were asked to send cannot be framed
    +-- InvalidArgument              no   a value given by the caller (also a ValueError)
    |   +-- InvalidMessageId         text (or serialized bytes) that is not a message id
    |   +-- UnknownCodec             a compression name Pulsar does not know
    +-- ServerError                  per code: an ERROR / SEND_ERROR from the broker
        +-- one class per ServerError code (see :func:`server_error`)

``WireError`` and the ``InvalidArgument`` classes also derive from
``ValueError``, so code written against ``ValueError`` keeps catching them.
Protocol errors carry ``offset`` (the stream offset of the frame at fault,
when known) and ``message_id`` (the message at fault, when known), and their
text says both.
"""

from __future__ import annotations

from typing import ClassVar

from . import PulsarApi_pb2 as pb

__all__ = [
    "PulsarError",
    "ProtocolError",
    "FrameError",
    "TruncatedFrame",
    "FrameTooLarge",
    "CommandSizeError",
    "ChecksumMismatch",
    "CommandDecodeError",
    "UnknownCommand",
    "MetadataDecodeError",
    "CorruptMessage",
    "DecompressionError",
    "UncompressedSizeMismatch",
    "BatchDecodeError",
    "ChunkError",
    "WireError",
    "EncodeError",
    "InvalidArgument",
    "InvalidMessageId",
    "UnknownCodec",
    "ServerError",
    "server_error",
]


class PulsarError(Exception):
    """Root of every error raised by pulsar-spark."""

    #: Whether the same operation may succeed if tried again (after a reconnect).
    retriable: ClassVar[bool] = False


class ProtocolError(PulsarError):
    """Bytes received from the peer break the Pulsar protocol.

    Args:
        msg: what was wrong.
        offset: stream offset of the frame at fault, if known.
        message_id: ``ledger:entry:partition:batch`` of the message at fault, if known.
    """

    def __init__(
        self, msg: str, *, offset: int | None = None, message_id: str | None = None
    ) -> None:
        self.offset = offset
        self.message_id = message_id
        where = []
        if offset is not None:
            where.append(f"frame at byte offset {offset}")
        if message_id is not None:
            where.append(f"message {message_id}")
        super().__init__(f"{msg} ({', '.join(where)})" if where else msg)
        self.reason = msg


class FrameError(ProtocolError):
    """The framing of the byte stream is broken."""


class TruncatedFrame(FrameError):
    """The input ended, or a declared size ran past the end of its frame."""


class FrameTooLarge(FrameError):
    """A frame declares a size above the negotiated frame limit."""


class CommandSizeError(FrameError):
    """The command size does not fit inside its frame."""


class ChecksumMismatch(FrameError):
    """The CRC32C over metadata and payload does not match the frame's checksum."""


class CommandDecodeError(ProtocolError):
    """The BaseCommand protobuf cannot be decoded."""


class UnknownCommand(ProtocolError):
    """A BaseCommand whose type this client does not know."""

    def __init__(
        self,
        msg: str,
        *,
        type_value: int | None = None,
        offset: int | None = None,
        message_id: str | None = None,
    ) -> None:
        super().__init__(msg, offset=offset, message_id=message_id)
        self.type_value = type_value


class MetadataDecodeError(ProtocolError):
    """MessageMetadata or BrokerEntryMetadata cannot be decoded."""


class CorruptMessage(ProtocolError):
    """A message payload that cannot be turned into messages."""


class DecompressionError(CorruptMessage):
    """The codec rejected the payload."""


class UncompressedSizeMismatch(CorruptMessage):
    """The payload does not inflate to the size its metadata declares, or declares too much."""


class BatchDecodeError(CorruptMessage):
    """A batch payload does not split into the messages its metadata declares.

    ``item``, when known, is the index of the item at fault in the call that
    raised (a batch, or the rows of a bulk decode).
    """

    def __init__(
        self,
        msg: str,
        *,
        item: int | None = None,
        offset: int | None = None,
        message_id: str | None = None,
    ) -> None:
        super().__init__(msg, offset=offset, message_id=message_id)
        self.item = item


class ChunkError(CorruptMessage):
    """Chunks of a large message that cannot be put back together."""


class WireError(ProtocolError, ValueError):
    """Bytes that are not protobuf wire format (truncated, over-long, bad wire type)."""


class EncodeError(PulsarError):
    """A command or message that cannot be encoded (too large, bad field value, ...)."""


class InvalidArgument(PulsarError, ValueError):
    """A value the caller gave that is not valid here; the text names it and why."""


class InvalidMessageId(InvalidArgument):
    """Text (``ledger:entry[:partition[:batch_index]]``) or bytes that are not a message id."""


class UnknownCodec(InvalidArgument):
    """A compression codec name Pulsar does not know; the text lists the valid ones."""


# ---------------------------------------------------------------------------
# Errors reported by the broker
# ---------------------------------------------------------------------------


class ServerError(PulsarError):
    """An error the broker reported, with its ServerError code and message."""

    #: The ServerError code: the class's, or the one the broker sent for a
    #: code this client does not know.
    code: int = pb.UnknownError

    def __init__(self, message: str, *, code: int | None = None, context: str = "") -> None:
        if code is not None and code != type(self).code:
            self.code = code
        self.broker_message = message
        self.context = context
        name = _code_name(self.code)
        text = f"broker error {name}: {message}"
        super().__init__(f"{context}: {text}" if context else text)

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle as cls(*args); args holds the formatted text, which
        # would be wrapped a second time. Rebuild from the parts instead.
        return (
            _rebuild_server_error,
            (type(self), self.broker_message, self.code, self.context),
            self.__dict__,
        )


def _rebuild_server_error(
    cls: type[ServerError], message: str, code: int, context: str
) -> ServerError:
    return cls(message, code=code, context=context)


def _code_name(code: int) -> str:
    try:
        name: str = pb.ServerError.Name(code)
    except ValueError:
        return f"ServerError({code})"
    return name


# Codes after which the same request may succeed on a fresh lookup or later.
# Everything else is fatal for the operation that got it: authentication,
# authorization, unknown or terminated topics, busy names, schema conflicts.
_RETRIABLE_CODES = frozenset(
    {
        pb.UnknownError,
        pb.MetadataError,
        pb.PersistenceError,
        pb.ServiceNotReady,
        pb.TooManyRequests,
        pb.ConsumerNotFound,
        pb.SubscriptionNotFound,
        pb.TransactionCoordinatorNotFound,
    }
)

_BY_CODE: dict[int, type[ServerError]] = {}
for _name, _code in pb.ServerError.items():
    _cls = type(
        _name if _name.endswith(("Error", "Exception")) else _name + "Error",
        (ServerError,),
        {
            "code": _code,
            "retriable": _code in _RETRIABLE_CODES,
            "__doc__": f"The broker answered {_name} ({_code}).",
            "__module__": __name__,
        },
    )
    _BY_CODE[_code] = _cls
    globals()[_cls.__name__] = _cls
    __all__.append(_cls.__name__)
del _name, _code, _cls


def server_error(code: int, message: str, *, context: str = "") -> ServerError:
    """The :class:`ServerError` subclass instance for a broker error code.

    A code this client does not know keeps its number and counts as fatal.
    """
    cls = _BY_CODE.get(code, ServerError)
    # Under a retriable code, an answer no retry can change: a producer without
    # encryption keys on a namespace with encryptionRequired gets MetadataError
    # "Encryption is required in <topic>" every time.
    if code == pb.MetadataError and message.startswith("Encryption is required"):
        cls = EncryptionRequiredError
    return cls(message, code=code, context=context)


class EncryptionRequiredError(_BY_CODE[pb.MetadataError]):  # type: ignore[misc,valid-type]
    """MetadataError for a producer without keys where the namespace requires encryption:
    not retriable (set ``encryptionKeys``/``publicKey``)."""

    retriable = False


__all__.append("EncryptionRequiredError")
