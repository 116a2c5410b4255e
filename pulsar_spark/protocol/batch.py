"""Batch payloads: several messages in one entry, split into items and laid out again.

Wire grammar of a batch payload, after decompression::

    batch   = item{N}
    item    = smm_size:u32  SingleMessageMetadata[smm_size]  payload[payload_size]

``N`` is ``MessageMetadata.num_messages_in_batch`` (or the length of
``compacted_batch_indexes`` when compaction kept only some items), and
``payload_size`` is the item's ``SingleMessageMetadata.payload_size``. A frame
is a batch when ``num_messages_in_batch`` is *present*, whatever its value: a
batch of one is still a batch.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from google.protobuf.message import DecodeError

from . import PulsarApi_pb2 as pb
from .errors import BatchDecodeError

__all__ = ["BatchItems", "check_count", "split_batch", "encode_batch", "is_batch"]

_U32 = struct.Struct(">I")
SingleMessageMetadata = pb.SingleMessageMetadata


def is_batch(metadata: pb.MessageMetadata) -> bool:
    """Whether a payload is a batch: decided by presence of ``num_messages_in_batch``."""
    batched: bool = metadata.HasField("num_messages_in_batch")
    return batched


class BatchItems(NamedTuple):
    """The items of one batch payload, as parallel lists."""

    metadata: list[pb.SingleMessageMetadata]
    #: Offset of each item's payload in the batch payload.
    starts: list[int]
    #: Length of each item's payload.
    sizes: list[int]


def check_count(count: int, size: int) -> None:
    """Refuse an item count that a ``size``-byte batch payload cannot hold.

    Every item takes at least 4 bytes, so a lying count fails here without
    anything being allocated in proportion to it.

    Raises:
        BatchDecodeError: ``count`` is not positive, or above ``size / 4``.
    """
    if count <= 0:
        msg = f"batch declares {count} messages"
        raise BatchDecodeError(msg)
    if count * 4 > size:
        msg = f"batch declares {count} messages but its payload has only {size} bytes"
        raise BatchDecodeError(msg)


def split_batch(
    data: bytes | bytearray | memoryview,
    count: int,
    *,
    # Cache for LOAD_FAST in the loop below.
    _unpack: Callable[[memoryview, int], tuple[Any, ...]] = _U32.unpack_from,
    _parse: Callable[[memoryview], pb.SingleMessageMetadata] = SingleMessageMetadata.FromString,
) -> BatchItems:
    """Split a decompressed batch payload into its ``count`` items.

    Raises:
        BatchDecodeError: ``count`` is not positive, an item runs past the end
            of the payload, an item's metadata does not decode or lacks
            ``payload_size``, or bytes are left after the last item. The
            message names the item's index and byte position.
    """
    end = len(data)
    check_count(count, end)
    view = data if isinstance(data, memoryview) else memoryview(data)
    smms: list[pb.SingleMessageMetadata] = []
    starts: list[int] = []
    sizes: list[int] = []
    add_smm, add_start, add_size = smms.append, starts.append, sizes.append
    pos = 0
    try:
        for index in range(count):
            (smm_size,) = _unpack(view, pos)
            pos += 4
            smm_end = pos + smm_size
            if smm_end > end:
                msg = (
                    f"metadata of batch item {index} ({smm_size} bytes at byte {pos}) runs "
                    f"past the end of the {end}-byte payload"
                )
                raise BatchDecodeError(msg)
            smm = _parse(view[pos:smm_end])
            size = smm.payload_size
            if size <= 0 and (size < 0 or not smm.HasField("payload_size")):
                msg = f"batch item {index} at byte {pos} has no valid payload_size ({size})"
                raise BatchDecodeError(msg)
            pos = smm_end + size
            if pos > end:
                msg = (
                    f"payload of batch item {index} ({size} bytes at byte {smm_end}) runs "
                    f"past the end of the {end}-byte payload"
                )
                raise BatchDecodeError(msg)
            add_smm(smm)
            add_start(smm_end)
            add_size(size)
    except struct.error:
        msg = f"batch item {index} at byte {pos} is cut off before its metadata size"
        raise BatchDecodeError(msg) from None
    except (DecodeError, RuntimeError, ValueError) as exc:
        msg = f"metadata of batch item {index} at byte {pos} does not decode: {exc}"
        raise BatchDecodeError(msg) from exc
    if pos != end:
        msg = f"{end - pos} bytes are left after the {count} messages the batch declares"
        raise BatchDecodeError(msg)
    return BatchItems(smms, starts, sizes)


def encode_batch(
    items: Iterable[tuple[pb.SingleMessageMetadata, bytes | bytearray | memoryview]],
) -> bytes:
    """Lay out items as a batch payload (before compression).

    Each item's ``payload_size`` is set from its payload.
    """
    parts: list[bytes | bytearray | memoryview] = []
    for smm, payload in items:
        smm.payload_size = len(payload)
        body = smm.SerializeToString()
        parts.append(_U32.pack(len(body)))
        parts.append(body)
        parts.append(payload)
    return b"".join(parts)
