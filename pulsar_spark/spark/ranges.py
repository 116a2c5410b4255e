"""Partition ranges: what one Spark task reads, how a read is planned and split.

A :class:`PartitionRange` is one topic partition (or non-partitioned topic)
between two positions. Positions are strings, so ranges pickle small:

* ``"earliest"``, ``"latest"``;
* a message id ``"ledger:entry:partition:batch"`` (batch -1: the whole entry);
* ``"time:<epoch ms>"``, the first message published at or after that time.

The start is inclusive; the end is inclusive when ``end_inclusive`` (``latest``
always is) and exclusive otherwise, so that ranges that share a boundary
never overlap.

Planning (:func:`plan_ranges`) lists the topics and their partitions and
applies ``startingOffsets``/``endingOffsets``/``startingTime``/``endingTime``.
It needs the broker only for the partition counts (and the namespace listing
of ``topicsPattern``): ``latest`` and times are resolved by each task when it
starts reading.

Splitting (:func:`split_ranges`, ``minPartitions``) cuts a range at message
ids, so the pieces are exactly the rows of the whole:

* when its first and last messages lie in the same ledger, at evenly spaced
  entry ids (entries of a ledger are numbered without gaps);
* otherwise at the first message published at or after evenly spaced publish
  times (:meth:`PulsarClient.message_id_at_time`), since ledger ids are not
  contiguous. Publish times are per entry, so these boundaries fall between
  entries too.

Each boundary ends one piece (exclusive) and starts the next (inclusive).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from ..client import PulsarClient
from ..protocol.message_id import MessageId
from .options import PulsarOptionError, PulsarOptions, pattern_parts

__all__ = [
    "DataLossError",
    "PartitionRange",
    "plan_ranges",
    "read_range",
    "resolve_topics",
    "split_ranges",
]

log = logging.getLogger(__name__)

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_TIME = "time:"


class DataLossError(RuntimeError):
    """A read could not start where it was asked to (with ``failOnDataLoss=true``)."""


@dataclass(frozen=True)
class PartitionRange:
    """One partition between two positions (see the module docstring)."""

    topic: str
    start: str = "earliest"
    end: str = "latest"
    end_inclusive: bool = True

    def __str__(self) -> str:
        close = "]" if self.end_inclusive else ")"
        return f"{self.topic}[{self.start}, {self.end}{close}"


def _bound(position: str) -> str | dt.datetime:
    """A position as :meth:`PulsarClient.read_batches` takes it."""
    if position.startswith(_TIME):
        return _EPOCH + dt.timedelta(milliseconds=int(position[len(_TIME):]))
    return position


def _is_id(position: str) -> bool:
    return position not in ("earliest", "latest") and not position.startswith(_TIME)


# -- planning ----------------------------------------------------------------------------


def resolve_topics(client: PulsarClient, options: PulsarOptions) -> list[str]:
    """The full names of the (base) topics to read, sorted."""
    if options.topic is not None:
        return [options.topic]
    if options.topics is not None:
        return sorted(options.topics)
    assert options.topics_pattern is not None
    namespace, regex = pattern_parts(options.topics_pattern)
    try:
        listed = client.list_topics(namespace)
    except Exception as exc:
        msg = (f"listing the topics of namespace {namespace} failed "
               f"(GetTopicsOfNamespace; pulsar-lite does not answer it): {exc}")
        raise PulsarOptionError(option="topicsPattern", message=msg) from exc
    matcher = re.compile(regex)
    found = set()
    for name in listed:
        base = re.sub(r"-partition-\d+$", "", name)
        if matcher.fullmatch(base):
            found.add(base)
    return sorted(found)


def _offset_for(
    option: str, spec_items: tuple[dict, dict], topic: str, partition: int, partitioned: bool,
) -> str | None:
    """The position ``startingOffsets``/``endingOffsets`` give one partition, if any."""
    by_topic, by_partition = spec_items
    position = by_partition.get((topic, partition))
    if position is None:
        position = by_topic.get(topic)
        if position is not None and partitioned and _is_id(position):
            named = MessageId.parse(position).partition
            if named < 0:
                msg = (f"{topic} is partitioned: give its message ids per partition, as "
                       f'{{"{topic}-partition-N": id}} or {{"{topic}": {{"N": id}}}}')
                raise PulsarOptionError(option, msg)
            if named != partition:
                return None
    if position is not None and _is_id(position):
        mid = MessageId.parse(position)
        if mid.partition not in (-1, partition):
            msg = f"message id {position} names partition {mid.partition}, not {partition}"
            raise PulsarOptionError(option, msg)
        position = str(MessageId(mid.ledger, mid.entry, partition, mid.batch_index))
    return position


def plan_ranges(client: PulsarClient, options: PulsarOptions) -> list[PartitionRange]:
    """One range per partition of every topic read, bounds applied."""
    topics = resolve_topics(client, options)
    starting, ending = options.starting_offsets, options.ending_offsets
    start_items = (dict(starting.by_topic), dict(starting.by_partition))
    end_items = (dict(ending.by_topic), dict(ending.by_partition))
    known: set = set()
    ranges = []
    for topic in topics:
        partitions = client.get_partitions(topic)
        partitioned = partitions != [topic]
        known.add(("t", topic))
        for name in partitions:
            index = int(name.rsplit("-partition-", 1)[1]) if partitioned else -1
            known.add(("p", topic, index))
            if options.starting_time is not None:
                start = f"{_TIME}{options.starting_time}"
            else:
                start = _offset_for("startingOffsets", start_items, topic, index,
                                    partitioned) or starting.default
            if options.ending_time is not None:
                end, inclusive = f"{_TIME}{options.ending_time}", False
            else:
                end = _offset_for("endingOffsets", end_items, topic, index,
                                  partitioned) or ending.default
                inclusive = end == "latest"
            ranges.append(PartitionRange(name, start, end, inclusive))
    for option, spec in (("startingOffsets", starting), ("endingOffsets", ending)):
        keys = [("t", t) for t, _ in spec.by_topic] + [("p", t, p) for (t, p), _ in
                                                       spec.by_partition]
        for key in keys:
            if key not in known:
                what = key[1] if key[0] == "t" else f"partition {key[2]} of {key[1]}"
                msg = f"names {what}, which this read does not include (topics: {topics})"
                raise PulsarOptionError(option, msg)
    return ranges


# -- splitting ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Probe:
    first: MessageId
    first_ms: int
    stop: MessageId  # the last message to read (inclusive) or the one after (exclusive)
    stop_inclusive: bool

    @property
    def same_ledger(self) -> bool:
        return self.first.ledger == self.stop.ledger

    @property
    def entries(self) -> int:
        return max(self.stop.entry - self.first.entry + 1, 1)


def _first_row(client: PulsarClient, part: PartitionRange) -> tuple[MessageId, int] | None:
    batches = client.read_batches(
        part.topic, _bound(part.start), _bound(part.end), end_inclusive=part.end_inclusive,
        receiver_queue_size=1, batch_rows=1,
    )
    try:
        for batch in batches:
            if batch.num_rows:
                mid = MessageId.parse(batch.column("messageId")[0].as_py())
                when = batch.column("publishTime").cast(pa.int64())[0].as_py() // 1000
                return mid, when
        return None
    finally:
        batches.close()  # type: ignore[attr-defined]


def _probe(client: PulsarClient, part: PartitionRange) -> _Probe | None:
    first = _first_row(client, part)
    if first is None:
        return None
    stop: MessageId | None = None
    inclusive = True
    if _is_id(part.end):
        stop, inclusive = MessageId.parse(part.end), part.end_inclusive
    elif part.end.startswith(_TIME):
        stop = client.message_id_at_time(part.topic, int(part.end[len(_TIME):]))
        inclusive = False
    if stop is None:
        stop, inclusive = client.get_last_message_id(part.topic), True
    if stop is None:
        return None
    return _Probe(first[0], first[1], stop, inclusive)


def _entry_boundaries(probe: _Probe, pieces: int) -> list[MessageId]:
    first, stop = probe.first, probe.stop
    count = probe.entries
    cuts = sorted({first.entry + (i * count) // pieces for i in range(1, pieces)})
    return [MessageId(first.ledger, e, first.partition, -1) for e in cuts
            if first.entry < e <= stop.entry]


def _time_boundaries(client: PulsarClient, part: PartitionRange, probe: _Probe,
                     pieces: int) -> list[MessageId]:
    stop_entry = MessageId(probe.stop.ledger, probe.stop.entry, probe.first.partition, -1)
    last = _first_row(client, PartitionRange(part.topic, str(stop_entry), str(stop_entry)))
    if last is None or last[1] <= probe.first_ms:
        return []
    first_key = (probe.first.ledger, probe.first.entry)
    stop_key = (probe.stop.ledger, probe.stop.entry)
    span = last[1] - probe.first_ms
    found: list[MessageId] = []
    for i in range(1, pieces):
        when = probe.first_ms + (span * i) // pieces
        mid = client.message_id_at_time(part.topic, when)
        if mid is None:
            continue
        key = (mid.ledger, mid.entry)
        # Keep boundaries strictly inside the range, in order.
        if key <= first_key or key > stop_key or (found and key <= (found[-1].ledger,
                                                                      found[-1].entry)):
            continue
        found.append(MessageId(mid.ledger, mid.entry, probe.first.partition, -1))
    return found


def _shares(weights: list[int], total: int) -> list[int]:
    """Split ``total`` pieces over ranges by weight, each at least one."""
    n = len(weights)
    extra = total - n
    whole = sum(weights)
    shares = [1 + (extra * w) // whole for w in weights]
    order = sorted(range(n), key=lambda i: -weights[i])
    i = 0
    while sum(shares) < total:
        shares[order[i % n]] += 1
        i += 1
    return shares


def split_ranges(
    client: PulsarClient, ranges: list[PartitionRange], min_partitions: int, *,
    by_time: bool = False,
) -> list[PartitionRange]:
    """At least ``min_partitions`` ranges (when the data allows) with exactly the
    rows of ``ranges``; empty ranges are dropped. ``by_time`` splits by publish
    time even within one ledger (for tests)."""
    if min_partitions <= len(ranges):
        return ranges
    probed = [(part, _probe(client, part)) for part in ranges]
    probed = [(part, probe) for part, probe in probed if probe is not None]
    if not probed:
        return []
    known = [p.entries for _, p in probed if p.same_ledger]
    typical = max(known) if known else 1
    weights = [p.entries if p.same_ledger else typical for _, p in probed]
    out: list[PartitionRange] = []
    for (part, probe), pieces in zip(probed, _shares(weights, min_partitions), strict=True):
        if pieces <= 1:
            out.append(part)
            continue
        if probe.same_ledger and not by_time:
            cuts = _entry_boundaries(probe, pieces)
        else:
            cuts = _time_boundaries(client, part, probe, pieces)
        starts = [part.start] + [str(c) for c in cuts]
        ends = [(str(c), False) for c in cuts] + [(part.end, part.end_inclusive)]
        out.extend(PartitionRange(part.topic, s, e, inc)
                   for s, (e, inc) in zip(starts, ends, strict=True))
    return out


# -- reading -----------------------------------------------------------------------------


def read_range(
    client: PulsarClient, part: PartitionRange, options: PulsarOptions, *, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    """The rows of ``part`` as RecordBatches with the row schema.

    With ``failOnDataLoss`` (the default), a read that starts at a message id
    whose entry is gone (retention, deletion) fails with :class:`DataLossError`;
    without, it logs a warning and goes on from the next message.
    """
    def missing_start(_: MessageId, first: MessageId) -> None:
        _start_gone(part, str(first), options)

    yield from client.read_batches(
        part.topic, _bound(part.start), _bound(part.end), end_inclusive=part.end_inclusive,
        receiver_queue_size=options.receiver_queue_size, batch_rows=batch_rows,
        missing_start=missing_start,
    )


def _start_gone(part: PartitionRange, first: str, options: PulsarOptions) -> None:
    """The entry ``part`` starts at is gone; the broker has ``first`` next."""
    msg = (f"{part.topic}: the read was to start at {part.start}, but the first entry "
           f"available is {first}: the messages in between are gone (retention or "
           f"deletion)")
    if options.fail_on_data_loss:
        msg = f"{msg}. Set failOnDataLoss=false to read from {first} on."
        raise DataLossError(msg)
    log.warning("%s; reading on (failOnDataLoss=false)", msg)
