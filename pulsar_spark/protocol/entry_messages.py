"""Messages as Python objects (:class:`Message`, :func:`messages`), and their key helper.

Tools and tests read messages this way; readers build Arrow from the same
:class:`~.entry.Entry` (:mod:`pulsar_spark.columnar`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import CorruptMessage
from .ids.message_id import MessageId, to_signed64
from .wire import text

if TYPE_CHECKING:
    from .entry import Entry

_U64 = 0xFFFF_FFFF_FFFF_FFFF

__all__ = ["Message", "decode_key", "messages"]


def decode_key(key: str | bytes, b64: bool, *, message_id: str = "") -> bytes:
    """Partition key bytes: UTF-8 of the key, or its base64 decoding.

    ``key`` is what protobuf gives for the ``partition_key`` string field:
    ``str``, or ``bytes`` when the wire bytes are not valid UTF-8 (some
    producers write raw bytes). Raw bytes are the key bytes as sent.
    """
    if not b64:
        return key.encode() if isinstance(key, str) else bytes(key)
    try:
        return base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError) as exc:
        msg = f"partition key {key!r} is flagged base64 but does not decode: {exc}"
        raise CorruptMessage(msg, message_id=message_id or None) from exc


@dataclass(slots=True)
class Message:
    """One message as Python objects (tools and tests; readers use Arrow).

    Text fields hold valid text: bytes that are not UTF-8 on the wire are
    decoded with U+FFFD replacements, as the Java client does. ``sequence_id``
    is signed 64-bit, like the Java client's and the Arrow ``sequenceId``.
    """

    message_id: MessageId
    value: bytes | None
    key: bytes | None
    #: The key as the producer gave it (base64 text when ``key`` was bytes).
    partition_key: str | None
    ordering_key: bytes | None
    properties: dict[str, str]
    event_time: int | None
    publish_time: int
    producer_name: str
    sequence_id: int
    schema_version: bytes | None = None
    broker_publish_time: int | None = None
    broker_index: int | None = None
    replicated_from: str | None = None
    #: The key names of a message handed on still encrypted (crypto failure
    #: action ``consume``): ``value`` is then ciphertext. None otherwise.
    encryption_keys: tuple[str, ...] | None = None


def messages(entry: Entry, positions: Sequence[int] | None = None) -> list[Message]:
    """Build :class:`Message` objects for the chosen positions (all by default)."""
    meta = entry.metadata
    if positions is None:
        positions = range(entry.count)
    bem = entry.broker_entry_metadata
    broker_time = bem.broker_timestamp if bem and bem.HasField("broker_timestamp") else None
    # The index is that of the entry's last message; items count from the batch's
    # original size, so that compaction (which drops items) changes no index.
    first_index = None
    if bem and bem.HasField("index"):
        size = meta.num_messages_in_batch if meta.HasField("num_messages_in_batch") else 1
        first_index = bem.index - size + 1
    data = entry.data
    out = []
    for pos in positions:
        batch_index = entry.batch_indexes[pos]
        id_text = entry.id_text(batch_index)
        start, size = entry.starts[pos], entry.sizes[pos]
        src = entry.smms[pos] if entry.smms is not None else meta
        if entry.smms is not None:
            seq = src.sequence_id if src.HasField("sequence_id") else meta.sequence_id + batch_index
        else:
            seq = meta.sequence_id
        if src.HasField("partition_key") and not src.null_partition_key:
            pkey: str | None = text(src.partition_key)
            key: bytes | None = decode_key(
                src.partition_key, src.partition_key_b64_encoded, message_id=id_text
            )
        else:
            pkey = key = None
        out.append(
            Message(
                message_id=entry.message_id(batch_index),
                value=None if src.null_value else bytes(data[start : start + size]),
                key=key,
                partition_key=pkey,
                ordering_key=src.ordering_key if src.HasField("ordering_key") else None,
                properties={text(kv.key): text(kv.value) for kv in src.properties},
                event_time=src.event_time or None,
                publish_time=meta.publish_time,
                producer_name=text(meta.producer_name),
                sequence_id=to_signed64(seq & _U64),
                schema_version=meta.schema_version if meta.HasField("schema_version") else None,
                broker_publish_time=broker_time,
                broker_index=(
                    None
                    if first_index is None
                    else to_signed64((first_index + max(batch_index, 0)) & _U64)
                ),
                replicated_from=(
                    text(meta.replicated_from) if meta.HasField("replicated_from") else None
                ),
                encryption_keys=entry.encrypted_with or None,
            )
        )
    return out
