"""The stream reader: ``spark.readStream.format("pulsar")``, its offsets and admission control.

Offsets hold one position per topic partition (see
:mod:`~pulsar_spark.spark.stream.offsets`). A micro-batch reads, per
partition, from its start position to its end position (always
``after:...``), both fixed when Spark plans it, so a batch re-run from the
checkpoint reads exactly the same messages: exactly-once reads. Tasks read
through non-durable subscriptions; what keeps their data on the broker is the
query's durable subscription (:mod:`~pulsar_spark.spark.stream.subscription`),
made when the query first plans, checked at every trigger and moved to each
committed end by :meth:`commit` (``subscriptionMode=nonDurable``: none).

Each trigger lists the topics again (``topicsPattern``) and their partitions,
so new topics and partitions join the stream, from their earliest message.
Data loss (``failOnDataLoss``: fail; else a warning): a partition that
vanished (a deleted topic); one now empty or ending before the stream's
position while the subscription no longer holds that position (deleted and
created again, truncated: read again from its start); a micro-batch whose
start entry is gone, unless the entry after it is still there and known to
follow it (the subscription holds the position, or planning saw that entry
after it in a later ledger: retention removed the start's ledger once read,
and the micro-batch reads from that entry). A partition the subscription
holds that retention emptied after the stream read it is not a loss.

Admission control (Spark 4.2+, :mod:`~pulsar_spark.spark.stream.admission`):
``maxRecordsPerTrigger`` and ``maxBytesPerTrigger`` bound a micro-batch, shared
fairly by the partitions; ``minRecordsPerTrigger`` with ``maxTriggerDelay``
holds a trigger until enough messages are there. ``Trigger.AvailableNow``
reads up to the latest positions of the moment it starts. Lag (messages behind
the latest positions, :mod:`~pulsar_spark.spark.stream.lag`) goes to
``StreamingQueryProgress`` through ``reportLatestOffset()`` and to the log.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Generator, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from pulsar_spark.client import LastIds, PartitionEnd, PulsarClient, SizedRef, parse_topic
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position

from ..connect import open_client
from ..errors import CheckpointOffsetError
from ..options.parse import PulsarOptions
from ..ranges import PartitionRange, plan_ranges, range_lost, read_positions, resolve_topics
from ..read_schema import ReadSchema, check_unplanned
from ..reader import typed_batches
from ..spark_types import arrow_for
from ..splits import split_ranges
from .admission import (
    ADMISSION_CONTROL,
    MinimumGate,
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
    TriggerLimits,
    admit,
)
from .lag import Backlog, Behind, lag_report, log_lag
from .loss import check_start, lost
from .offsets import (
    EARLIEST,
    Offsets,
    after_entry,
    dump_offsets,
    order_key,
    parse_offsets,
    subscription_in,
)
from .subscription import StreamSubscription, holds, new_name

__all__ = ["PulsarStreamPartition", "PulsarStreamReader"]

log = logging.getLogger(__name__)

#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 50_000


@dataclass(frozen=True)
class PulsarStreamPartition(InputPartition):
    """One partition's share of a micro-batch: from ``start`` to ``end`` (``after:``;
    ``from:`` ends a piece ``minPartitions`` cut, which the next piece starts at).
    ``successor``: the entry that followed the start's, in a later ledger, when the
    micro-batch was planned (what to read from if the start's ledger goes)."""

    topic: str
    start: Position
    end: Position
    successor: Position | None = None


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pulsar")``, see the module docstring."""

    def __init__(self, options: PulsarOptions, read: ReadSchema, schema: StructType) -> None:
        self.options = options
        self.read_schema = read
        #: The Arrow schema Spark expects of the batches.
        self.target = arrow_for(schema)
        self._checked = read.unplanned is None
        self._client: PulsarClient | None = None
        #: Consumers kept per partition between triggers, for their last ids
        #: (non-durable; durable ones are the subscription's).
        self._last_ids: LastIds | None = None
        #: The name of the stream's durable subscription, once known (None:
        #: ``subscriptionMode=nonDurable``, or not known yet).
        self.subscription_name: str | None = None
        self._subscription: StreamSubscription | None = None
        self._warned_left = False
        #: Latest positions found by the last latestOffset(), for progress reports.
        self._latest: Offsets | None = None
        #: What reportLatestOffset() gives: the latest positions and the lag.
        self._report: dict[str, object] | None = None
        #: Trigger.AvailableNow: the positions to stop at.
        self._target: Offsets | None = None
        self._target_pending = False
        self.limits = TriggerLimits.of(options)
        self._gate = (
            None
            if self.limits.min_rows is None
            else MinimumGate(self.limits.min_rows, self.limits.max_delay_ms)
        )
        self.backlog = Backlog(self._scan_ids)

    # -- the driver's client ---------------------------------------------------------

    @property
    def client(self) -> PulsarClient:
        if self._client is None:
            self._client = open_client(self.options)
        return self._client

    def ends(self, topics: list[str]) -> dict[str, PartitionEnd]:
        """The last message id of each partition (None: empty) and the durable
        subscription's mark-delete position there, asked all at once through the
        consumers kept between triggers: the subscription's once its name is known
        (which makes it where it is missing), else non-durable ones."""
        subscription = self._durable()
        if subscription is not None:
            return subscription.ends(topics)
        if self._last_ids is None:
            self._last_ids = self.client.last_ids()
        names = [parse_topic(topic) for topic in topics]
        found = self._last_ids.ends(names)
        return {topic: found[name] for topic, name in zip(topics, names, strict=True)}

    @property
    def consumers_attached(self) -> int:
        """Consumers the triggers have attached so far to ask for last ids (durable or
        not): one per partition, unless failures made them attach again."""
        kept = self._subscription if self._subscription is not None else self._last_ids
        return 0 if kept is None else kept.attached

    def _durable(self) -> StreamSubscription | None:
        if self.subscription_name is None:
            return None
        if self._subscription is None:
            if self._last_ids is not None:  # non-durable ones, from before the name was known
                self._last_ids.close()
                self._last_ids = None
            self._subscription = StreamSubscription(self.client, self.subscription_name)
        return self._subscription

    def _learn(self, offset: dict[str, str] | None, positions: Offsets) -> None:
        """Take the subscription's name from an offset Spark hands over (a restart), or
        name one and place it at ``positions`` when the offset names none (a checkpoint
        of an older version): the subscription then holds the stream's data."""
        if self.subscription_name is not None or self._warned_left:
            return
        found = subscription_in(offset)
        if not self.options.durable:
            if found is not None:
                self._warned_left = True
                log.warning(
                    "subscriptionMode=nonDurable, but the checkpoint's durable subscription "
                    "%r stays on the broker, keeping unread messages, until it is dropped "
                    "(pulsar_spark.spark.stream.subscription.drop_subscription)",
                    found,
                )
            return
        wanted = self.options.subscription_name
        if found is not None and wanted is not None and found != wanted:
            log.warning(
                "the checkpoint's durable subscription is %r, subscriptionName says %r: "
                "using %r from now on; %r stays on the broker, keeping unread messages, "
                "until it is dropped (pulsar_spark.spark.stream.subscription.drop_subscription)",
                *(found, wanted, wanted, found),
            )
        if (wanted is not None and wanted != found) or found is None:
            self._start_subscription(wanted or new_name(self.options.subscription_prefix))
            self._place(positions)
        else:
            self._start_subscription(found)
            subscription = self._durable()
            assert subscription is not None
            subscription.expect(positions)

    def _start_subscription(self, name: str) -> None:
        self.subscription_name = name
        log.info(
            "the stream holds its data on the broker with the durable subscription %r; "
            "stopped for good, drop it (pulsar_spark.spark.stream.subscription."
            "drop_subscription) or it keeps unread messages",
            name,
        )

    def _place(self, positions: Offsets) -> None:
        """Make the subscription on ``positions``' partitions and move it to them."""
        subscription = self._durable()
        if subscription is None or not positions:
            return
        ends = subscription.ends(list(positions))  # made at the earliest message where new
        subscription.move(positions)
        for topic, end in ends.items():
            if end.mark_delete is not None and not holds(end.mark_delete, positions[topic]):
                log.warning(
                    "%s: the durable subscription %r is already past the stream's position "
                    "%s (at %s): messages between may be gone",
                    *(topic, self.subscription_name, positions[topic], end.mark_delete),
                )

    def stop(self) -> None:
        if self._last_ids is not None:
            self._last_ids.close()
            self._last_ids = None
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- offsets ---------------------------------------------------------------------

    def initialOffset(self) -> dict[str, str]:
        """Where a new query starts: ``startingOffsets`` / ``startingTime`` per
        partition (``latest`` by default for streams), resolved now; the durable
        subscription is made there before anything can be deleted."""
        client = self.client
        if self.options.durable and self.subscription_name is None:
            name = self.options.subscription_name
            self._start_subscription(name or new_name(self.options.subscription_prefix))
        offsets = {
            part.topic: self._resolve_time(client, part.topic, part.start)
            for part in plan_ranges(client, self.options)
        }
        # Every partition is asked (durable: the subscription is made on each, at
        # its earliest message, holding from now on what the start resolves to).
        for topic, end in self.ends(list(offsets)).items():
            if offsets[topic].kind == "latest":
                offsets[topic] = EARLIEST if end.last is None else after_entry(end.last)
        self._place(offsets)
        return self._dump(offsets)

    def _dump(self, positions: Offsets) -> dict[str, str]:
        return dump_offsets(positions, self.subscription_name)

    def _resolve_time(self, client: PulsarClient, topic: str, start: Position) -> Position:
        if start.kind == "time":
            assert start.time_ms is not None
            found = client.message_id_at_time(topic, start.time_ms)
            if found is not None:
                return Position.at(found)
            return Position.latest()  # every message is older
        return start

    def _discover(self) -> list[str]:
        """Every partition read now: topics listed again, partitions counted again."""
        client = self.client
        partitions = []
        for topic in resolve_topics(client, self.options):
            partitions.extend(client.get_partitions(topic))
        return partitions

    def _latest_positions(self, start: Offsets) -> Offsets:
        latest = {}
        for topic, end in self.ends(self._discover()).items():
            last, current = end.last, start.get(topic, EARLIEST)
            if end.deleted and current.message_id is not None:
                lost(
                    self.options,
                    f"{topic}: the topic was deleted, with the stream's durable subscription "
                    f"{self.subscription_name!r}, while the stream was at {current}: "
                    "messages after that position may be lost",
                    "reading the topic again from its first message",
                )
                current = EARLIEST
            elif current.kind == "after" and (  # a position the stream reached
                last is None or order_key(after_entry(last)) < order_key(current)
            ):
                if holds(end.mark_delete, current):
                    latest[topic] = current  # retention removed what it had read: no loss
                    continue
                now = "is empty" if last is None else f"ends at {last}"
                held = (
                    ""
                    if end.mark_delete is None
                    else f" (its durable subscription {self.subscription_name!r} is at "
                    f"{end.mark_delete}, past that position: it was deleted or expired and "
                    "made again)"
                )
                lost(
                    self.options,
                    f"{topic}: the stream is at {current} but the topic now {now}{held}: it "
                    "was deleted (and created again) or truncated, messages after that "
                    "position may be lost",
                    "reading it again from its first message",
                )
                current = EARLIEST
            # The last entry is read whole: the position is entry-level.
            stop = None if last is None else after_entry(last)
            latest[topic] = stop if stop and order_key(stop) > order_key(current) else current
        for topic, position in start.items():
            if topic not in latest:
                lost(
                    self.options,
                    f"{topic}: the partition is gone (the topic was deleted, or no longer "
                    f"matches) with the stream at {position}: messages after it may be lost",
                    "leaving it out (it is read from its start if it comes back)",
                )
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow``: stop at what is there now."""
        # Fixed at the first trigger, which Spark makes at once: asking now, before
        # Spark hands over the checkpoint's offsets (and the subscription they name),
        # would ask through consumers that re-create a deleted topic unnoticed.
        self._target, self._target_pending = None, True

    def getDefaultReadLimit(self) -> ReadLimit:
        return self.limits.read_limit()

    def reportLatestOffset(self) -> dict[str, object] | None:
        """The latest positions per partition and, under ``lag``, the messages behind
        them (:func:`~.lag.lag_report`): Spark only shows it in progress reports."""
        return self._report

    def _latest_offset(self, start: Offsets, limit: object) -> dict[str, str]:
        if self._target_pending:  # Trigger.AvailableNow's first trigger: stop at these
            self._target_pending = False
            self._target = found = self._latest_positions(start)
        elif self._target is not None:
            found = self._latest_positions(start)
        if self._target is not None:
            # Checked as every trigger is (data loss, the subscription's hold), then
            # bounded by the positions of the moment Trigger.AvailableNow started.
            latest = {}
            for topic in {**self._target, **start}:
                at = start.get(topic, EARLIEST)
                now, goal = found.get(topic, at), self._target.get(topic, at)
                if order_key(now) < order_key(at):  # lost: read again from its start
                    latest[topic] = now
                else:
                    latest[topic] = goal if order_key(goal) > order_key(at) else at
        else:
            latest = self._latest_positions(start)
            self._latest = latest
        here = {topic: start.get(topic, EARLIEST) for topic in latest}
        ends, taken = latest, None
        # Spark passes ReadAllAvailable for Trigger.Once (4.0/4.1 pass no limit at all).
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            if self._gate is not None and self._target is None and self._hold(here, latest):
                self._report_lag(here, here, latest, None)
                return self._dump(start)  # as given: Spark sees no new data
            if self.limits.bounded:
                ends, taken = admit(
                    self._scan_sizes, start, latest, self.limits.max_rows, self.limits.max_bytes
                )
        self._report_lag(here, ends, latest, taken)
        return self._dump(ends)

    if ADMISSION_CONTROL:

        def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
            positions = parse_offsets(start)
            self._learn(start, positions)
            # ``start`` is where the last micro-batch ended, which Spark asks from only
            # once its commit log holds that micro-batch: the sink has everything before.
            subscription = self._durable()
            if subscription is not None:
                subscription.move(positions)
            return self._latest_offset(positions, limit)

    else:  # pragma: no cover - Spark 4.0/4.1 call latestOffset() with no arguments

        def latestOffset(self) -> dict[str, str]:  # type: ignore[misc]
            return self._latest_offset(self._latest or {}, None)

    # -- admission control and lag (stream_admission, stream_lag) ----------------------

    def _hold(self, here: Offsets, latest: Offsets) -> bool:
        """Whether minRecordsPerTrigger holds this trigger (see MinimumGate)."""
        assert self._gate is not None
        limit = self.backlog.share(len(latest))
        available = sum(
            self.backlog.behind(topic, here[topic], there, limit).messages
            for topic, there in latest.items()
        )
        return self._gate.hold(available)

    def _report_lag(
        self, here: Offsets, ends: Offsets, latest: Offsets, taken: dict[str, int] | None
    ) -> None:
        """Messages between ``ends`` and ``latest``, for reportLatestOffset and the log."""
        backlog = self.backlog
        backlog.forget(latest)
        behind: dict[str, Behind] = {}
        limit = backlog.share(len(latest))
        for topic, there in latest.items():
            if taken is not None:
                backlog.moved(topic, here[topic], ends[topic], taken[topic])
            behind[topic] = backlog.behind(topic, ends[topic], there, limit)
        report = lag_report(behind)
        self._report = {**self._dump(latest), "lag": report}
        if any(ends[topic] != here[topic] for topic in ends):  # once per micro-batch
            log_lag(report, here, ends)

    def _scan_sizes(
        self, topic: str, start: Position, end: Position, limit: int | None
    ) -> Generator[SizedRef, None, None]:
        window = self.options.receiver_queue_size
        return self.client.scan_sizes(topic, start, end, limit, receiver_queue_size=window)

    def _scan_ids(
        self, topic: str, start: Position, end: Position, limit: int
    ) -> Generator[MessageId, None, None]:
        window = self.options.receiver_queue_size
        scan = self.client.scan_ids(topic, start, end, limit=limit, receiver_queue_size=window)
        with contextlib.closing(scan) as refs:
            for ref in refs:
                yield ref.message_id

    # -- planning and reading --------------------------------------------------------------

    def partitions(self, start: dict[str, str], end: dict[str, str]) -> list[InputPartition]:
        if not self._checked:  # planning could not reach the broker: plan again
            check_unplanned(self.client, self.options, self.read_schema)
            self._checked = True
        first, last = parse_offsets(start), parse_offsets(end)
        self._learn(start, first)
        parts = [
            PulsarStreamPartition(
                topic,
                first.get(topic, EARLIEST),
                last[topic],
                self._successor(topic, first.get(topic, EARLIEST), last[topic]),
            )
            for topic in sorted(last)
            # An end at ``earliest``: the partition was found deleted (or emptied) and is
            # read again from its start (failOnDataLoss=false): nothing to read yet.
            if first.get(topic, EARLIEST) != last[topic] and last[topic].kind == "after"
        ]
        wanted = self.options.min_partitions
        if wanted is not None and len(parts) < wanted:
            parts = self._split(parts, wanted)
        planned: list[InputPartition] = list(parts)
        return planned

    def _split(
        self, parts: list[PulsarStreamPartition], wanted: int
    ) -> list[PulsarStreamPartition]:
        """``minPartitions``: the micro-batch's ranges cut into at least ``wanted`` pieces
        (as a batch read's, :func:`.splits.split_ranges`), with exactly the same rows. A
        range's first piece keeps its start and successor (the data-loss checks run
        there); a range nothing was found in is kept whole, for its read to report."""
        ranges = [PartitionRange(p.topic, p.start, p.end) for p in parts]
        pieces: dict[str, list[PartitionRange]] = {}
        for piece in split_ranges(self.client, ranges, wanted):
            pieces.setdefault(piece.topic, []).append(piece)
        out: list[PulsarStreamPartition] = []
        for part in parts:
            found = pieces.get(part.topic)
            if not found or found[0].start != part.start or found[-1].end != part.end:
                out.append(part)
                continue
            out.append(PulsarStreamPartition(part.topic, part.start, found[0].end, part.successor))
            out.extend(PulsarStreamPartition(r.topic, r.start, r.end) for r in found[1:])
        return out

    def _successor(self, topic: str, start: Position, end: Position) -> Position | None:
        """The entry after the one ``start`` follows, when it lies in a later ledger
        (the start's ledger may be removed before it is read, or is already): found
        while the start's entry is still there, or, when the subscription holds the
        start (everything after it is kept), whatever entry comes first after it;
        None otherwise, or when the micro-batch stays in the start's ledger."""
        mid, stop = start.message_id, end.message_id
        if start.kind != "after" or mid is None or stop is None or stop.ledger == mid.ledger:
            return None
        client = self.client  # entries, not messages
        found = client.first_entry_at(topic, mid.with_batch_index(-1))
        if found is None:
            return None
        if found.ledger != mid.ledger:  # the start's ledger is gone
            return Position.at(found) if self._holds(topic, start) else None
        found = client.first_entry_at(topic, MessageId(mid.ledger, mid.entry + 1, mid.partition))
        if found is None or found.ledger == mid.ledger:
            return None  # the start's ledger goes on: nothing to fall back on
        return Position.at(found)

    def _holds(self, topic: str, start: Position) -> bool:
        """Whether the durable subscription keeps everything after ``start`` (asked
        now: a micro-batch re-run after a restart is planned with no trigger before)."""
        subscription = self._durable()
        if subscription is None:
            return False
        return holds(subscription.end(topic).mark_delete, start)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PulsarStreamPartition)
        topic, start, end = partition.topic, partition.start, partition.end
        # A micro-batch ends after its last message; a piece minPartitions cut, at the next.
        if end.kind not in ("after", "from"):
            msg = f"end position {str(end)!r} of {topic} is not 'after:<id>' or 'from:<id>'"
            raise CheckpointOffsetError(msg)
        options = self.options
        with open_client(options, operation_timeout=options.poll_timeout) as client:
            start, reported = check_start(client, topic, start, partition.successor, options)
            part = PartitionRange(topic, start, end)

            def missing_start(held: MessageId, first: MessageId) -> None:
                if not reported:  # a loss check_start found is reported once
                    range_lost(part, held, first, options)

            batches = read_positions(
                client, topic, start, end, options, batch_rows=BATCH_ROWS,
                missing_start=missing_start,
            )  # fmt: skip
            yield from typed_batches(
                client, topic, batches, self.read_schema, self.target, stream=True
            )

    def commit(self, end: dict[str, str]) -> None:
        """Move the durable subscription to ``end``: the sink has everything before it,
        so the broker may delete it."""
        positions = parse_offsets(end)
        self._learn(end, positions)
        subscription = self._durable()
        if subscription is not None:
            subscription.move(positions)
