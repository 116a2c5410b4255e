"""Publish time to message id: the first message of one partition published at or after
a time, found by a SEEK and an id-level scan (:meth:`~.reader.PartitionReader.ids`)."""

from __future__ import annotations

import contextlib

from pulsar_spark.protocol.ids.message_id import EARLIEST, MessageId

from ..names import TopicName
from ..net.lookup import LookupService
from .bounds import Bound
from .chunk_bounds import skip_incomplete

__all__ = ["message_id_at_time"]


def message_id_at_time(
    lookup: LookupService, topic: TopicName, publish_time: int, *, operation_timeout: float = 30.0
) -> MessageId | None:
    """The id of the first message of ``topic`` (one partition) published at or
    after ``publish_time`` (ms), found by a SEEK and an id-level scan; None when
    there is none.

    A chunked message begins at its first chunk (its id is its last chunk's): a
    range that ends at the id given here must not hold its first chunks. The scan
    gives messages as they complete, so a message completed first (a plain one
    between the chunks) may come after one begun earlier: the answer is the entry
    of the first message begun. One never completed is skipped with a WARNING
    (:func:`~.chunk_bounds.skip_incomplete`).
    """
    from .reader import PartitionReader  # here: reader imports this module

    reader = PartitionReader(
        lookup,
        topic,
        start=Bound(EARLIEST, True, publish_time),
        receiver_queue_size=100,
        operation_timeout=operation_timeout,
        chunk_loss=skip_incomplete,
    )
    with contextlib.closing(reader.ids(limit=1)) as refs:
        found = next(refs, None)
    if found is None:
        return None
    begun = reader.first_begun
    found_id = found.message_id
    if begun is not None and begun < (found_id.ledger, found_id.entry):
        return MessageId(begun[0], begun[1], found_id.partition, -1)
    return found_id
