"""Serialized message ids: the bytes other clients hand out for a :class:`MessageId`.

Java's ``MessageId.toByteArray()``, and C++'s and Python's ``serialize()``,
give a message id as a ``MessageIdData`` protobuf::

    ledgerId                 uint64, -1 sent as 2^64-1 (earliest), INT64_MAX for latest
    entryId                  uint64, likewise
    partition                int32, absent for -1 (a topic without partitions)
    batch_index              int32, absent for -1 (not in a batch)
    ack_set, batch_size      batch bookkeeping, not part of the position
    first_chunk_message_id   on a chunked message's id, whose ledger and entry are
                             its last chunk's: where its first chunk lives

:func:`id_to_bytes` writes what those clients write for an id (fields in number
order, so the bytes are the same byte for byte) and :func:`id_from_bytes` reads
such bytes back, checking that they are a message id and not some other data.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError

from .. import PulsarApi_pb2 as pb
from ..errors import InvalidMessageId
from .message_id import MessageId

__all__ = ["SerializedId", "id_from_bytes", "id_to_bytes"]


@dataclass(frozen=True, slots=True)
class SerializedId:
    """What a serialized id says: the message's id and, for a chunked message,
    its first chunk's (``message_id`` is then the last chunk's)."""

    message_id: MessageId
    first_chunk: MessageId | None = None


def id_to_bytes(message_id: MessageId, *, first_chunk: MessageId | None = None) -> bytes:
    """The bytes Java's ``toByteArray()`` (Python's ``serialize()``) gives for this id."""
    data = message_id.to_pb()
    if first_chunk is not None:
        data.first_chunk_message_id.CopyFrom(first_chunk.to_pb())
    serialized: bytes = data.SerializeToString()
    return serialized


def id_from_bytes(raw: bytes) -> SerializedId:
    """Read a serialized id back.

    Raises:
        InvalidMessageId: the bytes are not a ``MessageIdData`` (corrupt, a
            required field missing) or name no message (a negative ledger or
            entry other than the earliest id's -1:-1, an out-of-range partition
            or batch index); the message says which.
    """
    data = pb.MessageIdData()
    try:
        data.ParseFromString(bytes(raw))
    except DecodeError:
        msg = f"{len(raw)} bytes that are not a serialized MessageIdData (corrupt protobuf)"
        raise InvalidMessageId(msg) from None
    message_id = _checked(data, "")
    first_chunk = None
    if data.HasField("first_chunk_message_id"):
        first_chunk = _checked(data.first_chunk_message_id, "its first chunk's ")
    return SerializedId(message_id, first_chunk)


def _checked(data: pb.MessageIdData, whose: str) -> MessageId:
    if not data.IsInitialized():
        missing = ", ".join(data.FindInitializationErrors())
        msg = f"bytes that are not a serialized MessageIdData: {whose}{missing} missing"
        raise InvalidMessageId(msg)
    found = MessageId.from_pb(data)
    if not (found.is_earliest or found.is_latest) and (found.ledger < 0 or found.entry < 0):
        msg = f"{whose}ledger {found.ledger} and entry {found.entry} name no message"
        raise InvalidMessageId(msg)
    if found.partition < -1 or found.batch_index < -1:
        msg = f"{whose}partition {found.partition} or batch index {found.batch_index} below -1"
        raise InvalidMessageId(msg)
    return found
