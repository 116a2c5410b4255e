"""A message that is not batched, laid out as a batch of one item (its metadata re-tagged)."""

from __future__ import annotations

import struct

from pulsar_spark.protocol.entry import Entry
from pulsar_spark.protocol.errors import CorruptMessage, WireError
from pulsar_spark.protocol.wire import encode_varint, fields

__all__ = ["as_batch_of_one"]

_U32 = struct.Struct(">I")


def as_batch_of_one(entry: Entry) -> tuple[bytes, list[int], list[int]]:
    """A non-batched message laid out as a one-item batch payload, so that
    :meth:`.ArrowBatchBuilder.build` treats all rows alike."""
    head = _smm_from_metadata(entry.metadata.SerializeToString(), entry.sizes[0])
    return b"".join((_U32.pack(len(head)), head, entry.data)), [4 + len(head)], [entry.sizes[0]]


# MessageMetadata field number -> SingleMessageMetadata field number, for the
# fields a message's own metadata shares with a batch item's.
_TO_SMM = {4: 1, 6: 2, 12: 5, 17: 6, 18: 7, 2: 8, 25: 9, 30: 10}


def _smm_from_metadata(meta: bytes, payload_size: int) -> bytes:
    """Re-tag the shared fields of serialized MessageMetadata as SingleMessageMetadata.

    Works on the wire bytes, so that strings that are not UTF-8 travel as they are.
    """
    out = bytearray()
    try:
        for field, wire, start, end in fields(meta):
            target = _TO_SMM.get(field)
            if target is not None:
                out += encode_varint(target << 3 | wire)
                out += meta[start:end]
    except WireError as exc:  # cannot come from SerializeToString
        msg = f"message metadata does not re-encode: {exc}"
        raise CorruptMessage(msg) from exc
    out += encode_varint(3 << 3) + encode_varint(payload_size)
    return bytes(out)
