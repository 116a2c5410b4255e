"""Shared Hypothesis strategies (and their plain builders) for the protocol tests.

The central model is :class:`Item`: one message as a producer means it. From a
list of items the helpers build what goes on the wire (SingleMessageMetadata,
MessageMetadata, a batch payload, compressed, framed as MESSAGE or SEND) and
what a reader must give back (:meth:`Item.expected`). They live in
``entry_strategies.py`` (items and entries), ``frame_strategies.py`` (frames)
and ``seeded_inputs.py`` (the same shapes from one seed); this module gathers them.
"""

from __future__ import annotations

from tests.protocol.entry_strategies import (
    CODECS,
    U64,
    Built,
    Item,
    ack_set_from_acked,
    ack_sets,
    build_entry,
    built_entries,
    codecs,
    item_lists,
    items,
    message_ids,
    metadata_base,
    properties,
    texts,
)
from tests.protocol.frame_strategies import (
    FrameCase,
    decode_stream,
    message_command,
    message_dict,
    message_frames,
    payload_frames,
    pieces,
    raw_payload_frame,
    send_command,
    send_frames,
    split_points,
)
from tests.protocol.seeded_inputs import (
    random_built,
    random_cuts,
    random_frame,
    random_item,
    seeded,
)

__all__ = [
    "CODECS",
    "U64",
    "Item",
    "Built",
    "FrameCase",
    "codecs",
    "texts",
    "properties",
    "items",
    "item_lists",
    "message_ids",
    "ack_sets",
    "ack_set_from_acked",
    "metadata_base",
    "build_entry",
    "built_entries",
    "message_command",
    "send_command",
    "raw_payload_frame",
    "message_frames",
    "send_frames",
    "payload_frames",
    "split_points",
    "pieces",
    "message_dict",
    "decode_stream",
    "random_item",
    "random_built",
    "random_frame",
    "random_cuts",
    "seeded",
]
