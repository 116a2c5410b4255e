"""Partition ranges: what one Spark task of a batch read reads, how it is planned and read.

A :class:`PartitionRange` is one topic partition (or non-partitioned topic)
between two :class:`~pulsar_spark.protocol.ids.position.Position`\\ s: ``earliest``,
``latest``, a message id (``from:L:E:P:B`` or ``after:L:E:P:B``, batch -1: the
whole entry) or a publish time (``time:<epoch ms>``, the first message
published at or after it). They pickle small. The start is the first position
read and the end the first position not read (``from:X`` stops before X,
``after:X`` after it, ``time:T`` before the first message published at or
after T, ``latest`` after the last message when the read starts), so that
ranges that share a boundary never overlap.

Planning (:func:`plan_ranges`) lists the topics and their partitions and
applies ``startingOffsets``/``endingOffsets``/``startingTime``/``endingTime``.
It needs the broker only for the partition counts (and the namespace listing
of ``topicsPattern``). A batch read then fixes its ends on the driver
(:func:`fix_ends`): ``latest`` becomes the last message's id and an end time
the id of the first message published at or after it, so a retried task or a
recomputed DataFrame reads exactly the same messages; a partition with nothing
to read ends at ``earliest`` (its task reads nothing, whatever comes later; the
read keeps one task per partition). Start times stay times (a seek gives the same messages
whenever it runs).

Splitting a range for ``minPartitions`` is :mod:`.splits`'s.
:func:`read_positions` is the one place a position reaches the client, and
where a chunked message begun in the range that never completes (no further
chunk came for the reader's ``CHUNK_WAIT``, or the topic was terminated) is
data loss (:func:`chunk_lost`), for batch reads and micro-batches alike: with
``failOnDataLoss`` the task fails with :class:`DataLossError` naming it;
without, a WARNING says what was skipped and the read goes on. The user's
choice to drop incomplete chunked messages
(``autoAckOldestChunkedMessageOnQueueFull``) drops them with a WARNING.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import pyarrow as pa

from pulsar_spark.client import ClientError, OperationTimeout, PulsarClient
from pulsar_spark.client.read.chunk_bounds import IncompleteChunked
from pulsar_spark.client.read.end import beyond
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import InvalidPosition, Position
from pulsar_spark.protocol.topics import PARTITION_SUFFIX, base_topic

from .errors import DataLossError, PulsarOptionError
from .options.parse import PulsarOptions
from .options.values import OffsetSpec, pattern_parts

__all__ = [
    "chunk_lost",
    "PartitionRange",
    "fix_ends",
    "plan_ranges",
    "range_lost",
    "read_positions",
    "read_range",
    "resolve_topics",
]

log = logging.getLogger(__name__)

_EARLIEST, _LATEST = Position.earliest(), Position.latest()


@dataclass(frozen=True)
class PartitionRange:
    """One partition between two positions (see the module docstring); positions
    given as text are parsed. ``end_inclusive``, whether the message ``end`` names is
    read (``after:`` and ``latest`` ends), follows from ``end``: given, it must agree."""

    topic: str
    start: Position = _EARLIEST
    end: Position = _LATEST
    end_inclusive: bool | None = None

    def __post_init__(self) -> None:
        for name in ("start", "end"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, Position.parse(value, what=name))
        inclusive = self.end.kind in ("after", "latest")
        if self.end_inclusive not in (None, inclusive):
            msg = f"a range ending at {self.end} {'reads' if inclusive else 'stops before'} it"
            raise InvalidPosition(msg)
        object.__setattr__(self, "end_inclusive", inclusive)

    def __str__(self) -> str:
        close = "]" if self.end_inclusive else ")"
        return f"{self.topic}[{self.start}, {self.end}{close}"


def read_positions(
    client: PulsarClient,
    topic: str,
    start: Position,
    end: Position,
    options: PulsarOptions,
    *,
    batch_rows: int,
    missing_start: Callable[[MessageId, MessageId], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``topic`` from ``start`` up to ``end`` (see the module docstring);
    a chunked message lost at the range's end is reported by :func:`chunk_lost`."""

    def chunk_loss(lost: IncompleteChunked) -> None:
        chunk_lost(PartitionRange(topic, start, end), lost, options)

    return client.read_batches(
        topic,
        start,
        end,
        receiver_queue_size=options.receiver_queue_size,
        batch_rows=batch_rows,
        missing_start=missing_start,
        private_key=None if options.private_key is None else options.private_key.spec,
        crypto_failure_action=options.crypto_failure_action,
        chunk_loss=chunk_loss,
    )


# -- planning ----------------------------------------------------------------------------


def resolve_topics(client: PulsarClient, options: PulsarOptions) -> list[str]:
    """The full names of the (base) topics to read, sorted (a pattern skips the
    exactly-once sink's own topics, ``__pulsar_spark_*``).

    Raises:
        PulsarOptionError: ``topicsPattern`` names a namespace that cannot be listed
            (malformed, or the broker does not answer GetTopicsOfNamespace, as
            pulsar-lite does not). A lost connection or a broker error keeps its class.
    """
    if options.topic is not None:
        return [options.topic]
    if options.topics is not None:
        return sorted(options.topics)
    assert options.topics_pattern is not None
    namespace, regex = pattern_parts(options.topics_pattern)
    try:
        listed = client.list_topics(namespace)
    except (ClientError, OperationTimeout, TimeoutError) as exc:
        msg = (
            f"listing the topics of namespace {namespace} failed "
            f"(GetTopicsOfNamespace; pulsar-lite does not answer it): {exc}"
        )
        raise PulsarOptionError(option="topicsPattern", message=msg) from exc
    matcher = re.compile(regex)
    return sorted(
        base
        for base in {base for base, _ in map(base_topic, listed)}
        if matcher.fullmatch(base) and not _sink_bookkeeping(base)
    )


def _sink_bookkeeping(topic: str) -> bool:
    """Whether ``topic`` is one of the exactly-once sink's own (its transaction registry and
    commit logs, ``__pulsar_spark_*``): a pattern never reads them."""
    return topic.rsplit("/", 1)[-1].startswith("__pulsar_spark_")


def _offset_for(
    option: str, spec: OffsetSpec, topic: str, partition: int, partitioned: bool
) -> Position | None:
    """The position ``startingOffsets``/``endingOffsets`` give one partition, if any."""
    position = dict(spec.by_partition).get((topic, partition))
    if position is None:
        position = dict(spec.by_topic).get(topic)
        if position is not None and partitioned and position.message_id is not None:
            named = position.message_id.partition
            if named < 0:
                msg = (
                    f"{topic} is partitioned: give its message ids per partition, as "
                    f'{{"{topic}{PARTITION_SUFFIX}N": id}} or '
                    f'{{"{topic}": {{"N": id}}}}'
                )
                raise PulsarOptionError(option, msg)
            if named != partition:
                return None
    if position is not None and position.message_id is not None:
        mid = position.message_id
        if mid.partition not in (-1, partition):
            msg = f"message id {mid} names partition {mid.partition}, not {partition}"
            raise PulsarOptionError(option, msg)
        mid = MessageId(mid.ledger, mid.entry, partition, mid.batch_index)
        position = Position.of(mid, inclusive=position.inclusive)
    return position


def plan_ranges(client: PulsarClient, options: PulsarOptions) -> list[PartitionRange]:
    """One range per partition of every topic read, bounds applied."""
    topics = resolve_topics(client, options)
    # startingTime/endingTime exclude startingOffsets/endingOffsets: one spec per side.
    starting, ending = options.starting_offsets, options.ending_offsets
    start_option, end_option = "startingOffsets", "endingOffsets"
    if options.starting_time is not None:
        starting, start_option = options.starting_time, "startingTime"
    if options.ending_time is not None:
        ending, end_option = options.ending_time, "endingTime"
    known_topics: set[str] = set()
    known_partitions: set[tuple[str, int]] = set()  # partition -1: a topic without any
    ranges = []
    for topic in topics:
        partitions = client.get_partitions(topic)
        partitioned = partitions != [topic]
        known_topics.add(topic)
        for name in partitions:
            index = base_topic(name)[1] if partitioned else -1
            known_partitions.add((topic, index))
            start = (
                _offset_for(start_option, starting, topic, index, partitioned) or starting.default
            )
            end = _offset_for(end_option, ending, topic, index, partitioned) or ending.default
            ranges.append(PartitionRange(name, start, end))
    for option, spec in ((start_option, starting), (end_option, ending)):
        unknown = [t for t, _ in spec.by_topic if t not in known_topics]
        for (t, i), _ in spec.by_partition:
            if (t, i) not in known_partitions:
                unknown.append(f"partition {i} of {t}")
        if unknown:
            msg = f"names {unknown[0]}, which this read does not include (topics: {topics})"
            raise PulsarOptionError(option, msg)
    return ranges


#: Partitions whose end is asked for at once when a batch read fixes its ends.
END_PROBES_IN_FLIGHT = 8


def fix_ends(client: PulsarClient, ranges: list[PartitionRange]) -> list[PartitionRange]:
    """``ranges`` with every ``latest`` or time end made a message id (and ids past
    the last message that message's), now (on the driver), so that every run of a
    task reads the same messages; a range with nothing to read (an empty
    partition) ends at ``earliest``: nothing. The
    partitions are asked in parallel (one GetLastMessageId, or a seek for an end
    time, each)."""
    if not ranges:
        return []
    workers = min(END_PROBES_IN_FLIGHT, len(ranges))
    with ThreadPoolExecutor(workers, thread_name_prefix="pulsar-end") as pool:
        return list(pool.map(lambda part: _fixed_end(client, part), ranges))


def _fixed_end(client: PulsarClient, part: PartitionRange) -> PartitionRange:
    end = part.end
    if end.kind == "time":
        assert end.time_ms is not None
        found = client.message_id_at_time(part.topic, end.time_ms)
        if found is not None:  # stop before it, as the time end says
            return replace(part, end=Position.at(found), end_inclusive=None)
    last = client.get_last_message_id(part.topic)
    if last is None:
        return replace(part, end=_EARLIEST, end_inclusive=None)
    if end.message_id is not None and not beyond(end.message_id, last):
        return part  # an id the topic has reached: fixed already
    return replace(part, end=Position.after(last), end_inclusive=None)


# -- reading -----------------------------------------------------------------------------


def read_range(
    client: PulsarClient, part: PartitionRange, options: PulsarOptions, *, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The rows of ``part`` as RecordBatches with the row schema.

    With ``failOnDataLoss`` (the default), a read that finds messages of its
    range gone fails with :class:`DataLossError`: its start id's entry removed
    (retention, deletion), or, while it reads, ledgers removed or the partition
    deleted and created again, or a chunked message begun in it never completed
    (:func:`chunk_lost`). Without, it logs a warning and goes on from the next
    message still there.
    """

    def missing_start(held: MessageId, first: MessageId) -> None:
        range_lost(part, held, first, options)

    if part.end.kind == "earliest":  # planned empty (see fix_ends)
        return

    yield from read_positions(
        client, part.topic, part.start, part.end, options, batch_rows=batch_rows,
        missing_start=missing_start,
    )  # fmt: skip


def range_lost(
    part: PartitionRange, held: MessageId, first: MessageId, options: PulsarOptions
) -> None:
    """Entries of ``part`` after ``held`` and before ``first`` are gone."""
    msg = (
        f"{part.topic}: reading {part}, the entries after {held} and before {first} are "
        "gone: messages of the range were lost (retention, truncation, or the topic "
        "was deleted and created again)"
    )
    if options.fail_on_data_loss:
        msg = f"{msg}. Set failOnDataLoss=false to read on from {first}."
        raise DataLossError(msg)
    log.warning("%s; reading on (failOnDataLoss=false)", msg)


def chunk_lost(part: PartitionRange, lost: IncompleteChunked, options: PulsarOptions) -> None:
    """A chunked message begun in ``part`` will never be complete (see ``lost``)."""
    msg = (
        f"{lost.topic}: reading {part}, chunked message {lost.uuid!r} (first chunk "
        f"{lost.first_chunk}) was begun in the range and never completed: {lost.cause}; "
        "it is lost from the read"
    )
    if options.fail_on_data_loss:
        msg = f"{msg}. Set failOnDataLoss=false to skip it and read on."
        raise DataLossError(msg)
    log.warning("%s; skipped, reading on (failOnDataLoss=false)", msg)
