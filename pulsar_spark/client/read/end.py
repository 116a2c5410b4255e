"""Where a bounded read ends, fixed against the topic's last message when it starts."""

from __future__ import annotations

from pulsar_spark.protocol.ids.message_id import MessageId

__all__ = ["beyond", "end_position"]


def beyond(end: MessageId, last: MessageId) -> bool:
    """Whether ``end`` lies after the topic's ``last`` message. A last id without
    a batch index (pulsar-lite's) stands for its whole entry."""
    end_key, last_key = (end.ledger, end.entry), (last.ledger, last.entry)
    if end_key != last_key or last.batch_index < 0:
        return end_key > last_key
    return end.batch_index > last.batch_index


def end_position(
    last: MessageId | None,
    end: MessageId,
    end_inclusive: bool,
    start: MessageId,
    start_inclusive: bool,
) -> tuple[MessageId, bool] | None:
    """The end of a read from ``start`` to ``end`` and whether it is inclusive, given
    the topic's ``last`` message id; None when there is nothing to read.

    An end at LATEST or past the last message becomes the last message, inclusive.
    """
    if last is None:
        return None
    if end.is_latest or beyond(end, last):
        end, end_inclusive = last, True
    end_key, start_key = (end.ledger, end.entry), (start.ledger, start.entry)
    if not start.is_earliest and (start.is_latest or end_key < start_key):
        return None
    if not start_inclusive and start.batch_index < 0 and end_key == start_key:
        return None
    if (
        not end_inclusive
        and end.batch_index < 0
        and not start.is_earliest
        and (end_key <= start_key)
    ):
        return None  # the read ends before the entry it starts at
    return end, end_inclusive
