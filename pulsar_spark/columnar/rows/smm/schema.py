"""The SingleMessageMetadata fields the columnar decoder knows: tag tables, field slots, and
:class:`SmmColumns`, the columns they decode into.

Tables are indexed by a tag "index": the tag itself when it is below 128, else
128 + wire type (field numbers >= 16 are unknown to both message types). The
wire grammar is in :mod:`.columns`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from ...arrays import Bytes, Int64s, Mask, UInt64s

__all__ = [
    "ADV",
    "BAD",
    "KV_KEY",
    "KV_SLOTS",
    "KV_VALUE",
    "LENF",
    "NTAGS",
    "PROPS_TAG",
    "SMM_SLOTS",
    "VAR",
    "Slot",
    "SmmColumns",
    "field_tag",
]

NTAGS = 136
_tags = np.arange(NTAGS)
_wire = np.where(_tags < 128, _tags & 7, _tags - 128)
_field = np.where(_tags < 128, _tags >> 3, 16)
#: Wire type that this reader cannot skip, or field number 0.
BAD = np.isin(_wire, (3, 4, 6, 7)) | (_field == 0)
#: Bytes after the tag when the value is a 1-byte varint (plus its length for
#: wire type 2); a fixed size for wire types 1 and 5; past any end for a bad tag.
ADV = np.select([BAD, _wire == 1, _wire == 5], [2**62, 8, 4], 1).astype(np.int64)
#: 1 for length-delimited fields: the first value byte is a length to add.
LENF = ((_wire == 2) & ~BAD).astype(np.uint8)
#: Whether the value starts with a varint (wire types 0 and 2).
VAR = ((_wire == 0) | (_wire == 2)) & ~BAD
del _tags, _wire, _field


def field_tag(field: int, wire: int) -> int:
    """The tag of a field: its number and wire type in one varint value."""
    return field << 3 | wire


class Slot:
    """Slots (rows of the position table) of SingleMessageMetadata; 0 = skipped."""

    KEY, PAYLOAD, COMPACTED, EVENT, B64 = 1, 2, 3, 4, 5
    ORDERING, SEQ, NULL_VALUE, NULL_KEY = 6, 7, 8, 9


SMM_SLOTS = np.zeros(NTAGS, np.int64)
for _f, _w, _s in (
    (2, 2, Slot.KEY),
    (3, 0, Slot.PAYLOAD),
    (4, 0, Slot.COMPACTED),
    (5, 0, Slot.EVENT),
    (6, 0, Slot.B64),
    (7, 2, Slot.ORDERING),
    (8, 0, Slot.SEQ),
    (9, 0, Slot.NULL_VALUE),
    (10, 0, Slot.NULL_KEY),
):
    SMM_SLOTS[field_tag(_f, _w)] = _s
PROPS_TAG = field_tag(1, 2)

KV_KEY, KV_VALUE = 1, 2
KV_SLOTS = np.zeros(NTAGS, np.int64)
KV_SLOTS[field_tag(1, 2)] = KV_KEY
KV_SLOTS[field_tag(2, 2)] = KV_VALUE
del _f, _w, _s


class SmmColumns(NamedTuple):
    """Fields of ``N`` SingleMessageMetadata as columns (NumPy arrays).

    Arrays are of length ``N`` unless noted. Byte ranges (``*_start``,
    ``*_len``) are positions in :attr:`data`, the input buffer; they are 0
    when the field is absent. Values of absent fields are protobuf defaults.
    """

    #: The input buffer as a uint8 array (a view, not a copy).
    data: Bytes
    payload_size: Int64s  # an int32 on the wire
    has_payload_size: Mask
    compacted_out: Mask
    event_time: UInt64s  # 0 when unset
    partition_key_b64_encoded: Mask
    has_sequence_id: Mask
    sequence_id: UInt64s
    null_value: Mask
    null_partition_key: Mask
    has_key: Mask  # partition_key present (possibly empty)
    key_start: Int64s
    key_len: Int64s
    has_ordering_key: Mask
    ordering_key_start: Int64s
    ordering_key_len: Int64s
    #: Length ``N + 1``: item ``i`` has property pairs
    #: ``prop_offsets[i]:prop_offsets[i + 1]`` of the flat arrays below.
    prop_offsets: NDArray[np.int32]
    #: One per property pair over all items, in wire order.
    prop_key_start: Int64s
    prop_key_len: Int64s
    prop_value_start: Int64s
    prop_value_len: Int64s
