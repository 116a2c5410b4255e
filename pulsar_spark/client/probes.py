"""One-shot probes of one topic (or partition): entries, last id, ids by time, id scans.

Each probe runs a short-lived :class:`~.reader.PartitionReader` through its
public API and builds no Arrow: :meth:`~.reader.PartitionReader.peek_entry`
looks at an entry without decoding it, :meth:`~.reader.PartitionReader.ids`
gives message ids and publish times with the Arrow path's selection.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator

from ..protocol import PulsarApi_pb2 as pb
from ..protocol.message_id import LATEST, MessageId
from .bounds import Bound
from .lookup import LookupService
from .names import TopicName
from .reader import PartitionReader
from .sinks import MessageRef

__all__ = ["first_entry", "last_message_id", "message_id_at_time", "partition_reader", "scan"]


def first_entry(
    lookup: LookupService, topic: TopicName, at: MessageId, *, operation_timeout: float = 30.0
) -> tuple[MessageId, pb.MessageMetadata] | None:
    """The first entry of ``topic`` (one partition) at or after ``at``, not decoded:
    its position (batch index -1) and metadata; None when there is none.

    Nothing is reassembled or decompressed: a probe of whether an entry still
    exists, or of the publish time of the last one (which may be a chunk).
    """
    reader = PartitionReader(lookup, topic, start=at, receiver_queue_size=1,
                             operation_timeout=operation_timeout)
    return reader.peek_entry()


def last_message_id(
    lookup: LookupService, topic: TopicName, *, operation_timeout: float = 30.0
) -> MessageId | None:
    """The id of the last message of ``topic`` (one partition); None when it is empty."""
    reader = PartitionReader(lookup, topic, start=LATEST, operation_timeout=operation_timeout)
    return reader.last_message_id()


def message_id_at_time(
    lookup: LookupService, topic: TopicName, publish_time: int, *, operation_timeout: float = 30.0
) -> MessageId | None:
    """The id of the first message of ``topic`` (one partition) published at or
    after ``publish_time`` (ms), found by a SEEK; None when there is none.

    A chunked message begins at its first chunk (its id is its last chunk's): a
    range that ends at the id given here must not hold its first chunks.
    """
    reader = PartitionReader(lookup, topic, start_time=publish_time, receiver_queue_size=100,
                             operation_timeout=operation_timeout)
    with contextlib.closing(reader.ids(limit=1)) as refs:
        found = next(refs, None)
    return None if found is None else found.message_id


def partition_reader(
    lookup: LookupService,
    topic: TopicName,
    start: Bound,
    end: Bound,
    *,
    operation_timeout: float = 30.0,
    receiver_queue_size: int = 1000,
    batch_rows: int = 10_000,
    missing_start: Callable[[MessageId, MessageId], None] | None = None,
) -> PartitionReader:
    """A reader of one partition between two bounds; an end time is resolved
    here (a SEEK), to stop before the first message published at or after it."""
    stop, stop_inclusive = end.message_id, end.inclusive
    if end.time_ms is not None:
        found = message_id_at_time(lookup, topic, end.time_ms,
                                   operation_timeout=operation_timeout)
        if found is not None:
            stop, stop_inclusive = found, False
    return PartitionReader(
        lookup, topic, start=start.message_id, start_inclusive=start.inclusive,
        start_time=start.time_ms, end=stop, end_inclusive=stop_inclusive,
        receiver_queue_size=receiver_queue_size, batch_rows=batch_rows,
        operation_timeout=operation_timeout, missing_start=missing_start,
    )


def scan(
    lookup: LookupService,
    topic: TopicName,
    start: Bound,
    end: Bound,
    *,
    limit: int | None = None,
    receiver_queue_size: int = 1000,
    operation_timeout: float = 30.0,
) -> Generator[MessageRef, None, None]:
    """The ids and publish times of the messages of ``topic`` (one partition)
    between two bounds, at most ``limit`` of them (see :meth:`PartitionReader.ids`)."""
    reader = partition_reader(lookup, topic, start, end, operation_timeout=operation_timeout,
                              receiver_queue_size=receiver_queue_size)
    return reader.ids(limit)
