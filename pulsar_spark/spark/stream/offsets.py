"""Stream offsets: the positions a checkpoint holds per partition, parsed, ordered and written.

An offset is a JSON object with one position per topic partition (the full
partition name, or the topic name when it is not partitioned)::

    {"persistent://public/default/orders-partition-0": "after:12:40:0:-1",
     "persistent://public/default/orders-partition-1": "earliest"}

=====================  ===================================================
position               the next micro-batch reads
=====================  ===================================================
``earliest``           from the first message (nothing consumed yet)
``after:L:E:P:B``      what follows message ``L:E:P:B`` (batch index -1:
                       the whole entry ``L:E`` was consumed)
``from:L:E:P:B``       from message ``L:E:P:B`` on, that one included
=====================  ===================================================

Beside the positions, the key ``subscription`` (never a topic's name, which has
``://``) names the durable subscription that holds the stream's data on the
broker (:mod:`~pulsar_spark.spark.stream.subscription`), so that a query restarted
from its checkpoint finds it again. Offsets without it (written before streams
held subscriptions, or with ``subscriptionMode=nonDurable``) read as before.

These are the text forms of :class:`~pulsar_spark.protocol.ids.position.Position`,
so checkpoints written by earlier versions of the connector read back as they
were. :func:`parse_offsets` is the one place they are parsed (Spark hands the
reader offsets it read from the checkpoint) and :func:`dump_offsets` the one
place they are written.
"""

from __future__ import annotations

from collections.abc import Mapping

from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import InvalidPosition, Position

from ..errors import CheckpointOffsetError

__all__ = [
    "EARLIEST",
    "SUBSCRIPTION_KEY",
    "Offsets",
    "after_entry",
    "dump_offsets",
    "order_key",
    "parse_offset",
    "parse_offsets",
    "reaches",
    "subscription_in",
]

#: Positions per partition, as the stream reader works with them.
Offsets = dict[str, Position]

EARLIEST = Position.earliest()
#: The key of the stream's durable subscription in an offset.
SUBSCRIPTION_KEY = "subscription"
_KINDS = ("earliest", "after", "from")


def parse_offset(text: object, topic: str) -> Position:
    """One partition's position from an offset (``earliest``, ``after:``, ``from:``).

    Raises:
        CheckpointOffsetError: anything else.
    """
    try:
        position = Position.parse(text, what=topic)  # type: ignore[arg-type]
    except InvalidPosition:
        position = None
    if (
        position is None
        or position.kind not in _KINDS
        or not (position.kind == "earliest" or str(text).startswith(position.kind + ":"))
    ):
        msg = (
            f"offset {text!r} of {topic} in the checkpoint is not 'earliest', "
            "'after:<id>' or 'from:<id>'"
        )
        raise CheckpointOffsetError(msg)
    return position


def parse_offsets(offset: Mapping[str, object] | None) -> Offsets:
    """An offset as Spark hands it over (parsed JSON), as positions per partition
    (its subscription is :func:`subscription_in`'s)."""
    return {
        topic: parse_offset(text, topic)
        for topic, text in (offset or {}).items()
        if topic != SUBSCRIPTION_KEY
    }


def subscription_in(offset: Mapping[str, object] | None) -> str | None:
    """The durable subscription an offset names; None when it names none.

    Raises:
        CheckpointOffsetError: a subscription that is not a non-empty string.
    """
    name = (offset or {}).get(SUBSCRIPTION_KEY)
    if name is None:
        return None
    if not isinstance(name, str) or not name:
        msg = f"the subscription {name!r} in the checkpoint's offset is not a name"
        raise CheckpointOffsetError(msg)
    return name


def dump_offsets(
    positions: Mapping[str, Position], subscription: str | None = None
) -> dict[str, str]:
    """Positions per partition (and the durable subscription holding them, when
    there is one) as the offset Spark writes to the checkpoint."""
    offset = {topic: str(position) for topic, position in positions.items()}
    if subscription is not None:
        offset[SUBSCRIPTION_KEY] = subscription
    return offset


def order_key(position: Position) -> tuple[int, int, int]:
    """Where the next message to read sits, for ordering positions."""
    mid = position.message_id
    if mid is None:
        return (-2, -2, -2)
    if position.kind == "from":
        return (mid.ledger, mid.entry, max(mid.batch_index, 0) - 1)  # just before it
    return (mid.ledger, mid.entry, mid.batch_index if mid.batch_index >= 0 else 1 << 31)


def after_entry(message_id: MessageId) -> Position:
    """What follows the whole entry of ``message_id``."""
    entry = MessageId(message_id.ledger, message_id.entry, message_id.partition, -1)
    return Position.after(entry)


def reaches(message_id: MessageId, end: Position) -> bool:
    """Whether reading up to ``message_id`` (included) reaches ``end``."""
    return end.message_id is not None and order_key(Position.after(message_id)) >= order_key(end)
