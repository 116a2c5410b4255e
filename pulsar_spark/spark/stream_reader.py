"""The stream reader: ``spark.readStream.format("pulsar")``, its offsets and admission control.

Offsets hold one position per topic partition (see
:mod:`~pulsar_spark.spark.stream_offsets`). A micro-batch reads, per
partition, from its start position to its end position (always
``after:...``), both fixed when Spark plans it, so a batch re-run from the
checkpoint reads exactly the same messages: exactly-once reads. Every read
uses a non-durable subscription; nothing durable exists on the broker unless
``subscriptionName`` is set, in which case :meth:`commit` moves that durable
subscription to the committed end by cumulative ack (its backlog then shows
the query's progress).

Each trigger lists the topics again (``topicsPattern``) and their partitions,
so new topics and partitions join the stream, from their earliest message.
Data loss (``failOnDataLoss``: fail; else a warning): a partition that
vanished (a deleted topic); one now empty or ending before the stream's
position (deleted and created again, truncated: read again from its start);
a micro-batch whose start entry is gone, unless the entry planning saw after
it, in a later ledger, is still there (retention removed the start's ledger
only: the micro-batch reads from that entry).

Admission control (Spark 4.2+, :mod:`~pulsar_spark.spark.stream_admission`):
``maxRecordsPerTrigger`` and ``maxBytesPerTrigger`` bound a micro-batch, shared
fairly by the partitions; ``minRecordsPerTrigger`` with ``maxTriggerDelay``
holds a trigger until enough messages are there. ``Trigger.AvailableNow``
reads up to the latest positions of the moment it starts. Lag (messages behind
the latest positions, :mod:`~pulsar_spark.spark.stream_lag`) goes to
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

from ..client import PulsarClient
from ..client.last_ids import LastIds
from ..client.names import parse_topic
from ..client.reader_session import first_entry
from ..client.sized_scan import SizedRef, scan_sizes
from ..protocol.message_id import MessageId
from ..protocol.position import Position
from .connect import open_client
from .errors import CheckpointOffsetError
from .options import PulsarOptions
from .ranges import PartitionRange, plan_ranges, range_lost, read_positions, resolve_topics
from .read_schema import ReadSchema, check_unplanned
from .reader import typed_batches
from .spark_types import arrow_for
from .stream_admission import (
    ADMISSION_CONTROL,
    MinimumGate,
    ReadAllAvailable,
    ReadLimit,
    SupportsTriggerAvailableNow,
    TriggerLimits,
    admit,
)
from .stream_lag import Backlog, Behind, lag_report, log_lag
from .stream_loss import check_start, lost
from .stream_offsets import (
    EARLIEST,
    Offsets,
    after_entry,
    dump_offsets,
    order_key,
    parse_offsets,
)

__all__ = ["PulsarStreamPartition", "PulsarStreamReader"]

log = logging.getLogger(__name__)

#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 50_000


@dataclass(frozen=True)
class PulsarStreamPartition(InputPartition):
    """One partition's share of a micro-batch: from ``start`` to ``end`` (``after:``).
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
        #: Consumers kept per partition between triggers, for their last ids.
        self._last_ids: LastIds | None = None
        #: Latest positions found by the last latestOffset(), for progress reports.
        self._latest: Offsets | None = None
        #: What reportLatestOffset() gives: the latest positions and the lag.
        self._report: dict[str, object] | None = None
        #: Trigger.AvailableNow: the positions to stop at.
        self._target: Offsets | None = None
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

    def last_ids(self, topics: list[str]) -> dict[str, MessageId | None]:
        """The last message id of each partition (None: empty), asked all at once
        through the consumers kept between triggers (:class:`~..client.last_ids.LastIds`)."""
        if self._last_ids is None:
            client = self.client
            self._last_ids = LastIds(client._lookup, operation_timeout=client.operation_timeout)
        names = [parse_topic(topic) for topic in topics]
        found = self._last_ids.get(names)
        return {topic: found[name] for topic, name in zip(topics, names, strict=True)}

    def stop(self) -> None:
        if self._last_ids is not None:
            self._last_ids.close()
            self._last_ids = None
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- offsets ---------------------------------------------------------------------

    def initialOffset(self) -> dict[str, str]:
        """Where a new query starts: ``startingOffsets`` / ``startingTime`` per
        partition (``latest`` by default for streams), resolved now."""
        client = self.client
        offsets = {
            part.topic: self._resolve_time(client, part.topic, part.start)
            for part in plan_ranges(client, self.options)
        }
        latest = [topic for topic, start in offsets.items() if start.kind == "latest"]
        for topic, last in self.last_ids(latest).items():
            offsets[topic] = EARLIEST if last is None else after_entry(last)
        return dump_offsets(offsets)

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
        for topic, last in self.last_ids(self._discover()).items():
            current = start.get(topic, EARLIEST)
            if current.kind == "after" and (  # a position the stream reached
                last is None or order_key(after_entry(last)) < order_key(current)
            ):
                now = "is empty" if last is None else f"ends at {last}"
                lost(
                    self.options,
                    f"{topic}: the stream is at {current} but the topic now {now}: it was "
                    "deleted (and created again) or truncated, messages after that position "
                    "may be lost",
                    "reading it again from its first message",
                )
                current = EARLIEST
            # The last entry is read whole: the position is entry-level.
            end = None if last is None else after_entry(last)
            latest[topic] = end if end and order_key(end) > order_key(current) else current
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
        self._target = self._latest_positions({})

    def getDefaultReadLimit(self) -> ReadLimit:
        return self.limits.read_limit()

    def reportLatestOffset(self) -> dict[str, object] | None:
        """The latest positions per partition and, under ``lag``, the messages behind
        them (:func:`~.stream_lag.lag_report`): Spark only shows it in progress reports."""
        return self._report

    def _latest_offset(self, start: Offsets, limit: object) -> dict[str, str]:
        if self._target is not None:
            latest = dict(self._target)
            for topic, position in start.items():
                latest.setdefault(topic, position)
        else:
            latest = self._latest_positions(start)
            self._latest = latest
        here = {topic: start.get(topic, EARLIEST) for topic in latest}
        ends, taken = latest, None
        # Spark passes ReadAllAvailable for Trigger.Once (4.0/4.1 pass no limit at all).
        if limit is not None and not isinstance(limit, ReadAllAvailable):
            if self._gate is not None and self._target is None and self._hold(here, latest):
                self._report_lag(here, here, latest, None)
                return dump_offsets(start)  # as given: Spark sees no new data
            if self.limits.bounded:
                ends, taken = admit(
                    self._scan_sizes, start, latest, self.limits.max_rows, self.limits.max_bytes
                )
        self._report_lag(here, ends, latest, taken)
        return dump_offsets(ends)

    if ADMISSION_CONTROL:

        def latestOffset(self, start: dict[str, str], limit: ReadLimit) -> dict[str, str]:
            return self._latest_offset(parse_offsets(start), limit)

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
        self._report = {**dump_offsets(latest), "lag": report}
        if any(ends[topic] != here[topic] for topic in ends):  # once per micro-batch
            log_lag(report, here, ends)

    def _scan_sizes(
        self, topic: str, start: Position, end: Position, limit: int | None
    ) -> Generator[SizedRef, None, None]:
        window = self.options.receiver_queue_size
        return scan_sizes(self.client, topic, start, end, limit, receiver_queue_size=window)

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
        return [
            PulsarStreamPartition(
                topic,
                first.get(topic, EARLIEST),
                last[topic],
                self._successor(topic, first.get(topic, EARLIEST), last[topic]),
            )
            for topic in sorted(last)
            if first.get(topic, EARLIEST) != last[topic]
        ]

    def _successor(self, topic: str, start: Position, end: Position) -> Position | None:
        """The entry after the one ``start`` follows, when it lies in a later ledger
        (the micro-batch crosses ledgers: the start's may be removed before it is
        read); None when the start entry is gone already or there is none."""
        mid, stop = start.message_id, end.message_id
        if start.kind != "after" or mid is None or stop is None or stop.ledger == mid.ledger:
            return None
        lookup, name = self.client._lookup, parse_topic(topic)  # entries, not messages
        held = MessageId(mid.ledger, mid.entry, mid.partition, -1)
        found = first_entry(lookup, name, held, operation_timeout=self.client.operation_timeout)
        if found is None or found[0].ledger != mid.ledger:
            return None
        nxt = MessageId(mid.ledger, mid.entry + 1, mid.partition, -1)
        found = first_entry(lookup, name, nxt, operation_timeout=self.client.operation_timeout)
        if found is None or found[0].ledger == mid.ledger:
            return None  # the start's ledger goes on: nothing to fall back on
        return Position.at(found[0])

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PulsarStreamPartition)
        topic, start, end = partition.topic, partition.start, partition.end
        if end.kind != "after":  # a micro-batch ends after the last message it reads
            msg = f"end position {str(end)!r} of {topic} is not 'after:<id>'"
            raise CheckpointOffsetError(msg)
        options = self.options
        with open_client(options, operation_timeout=options.poll_timeout) as client:
            start, reported = check_start(client, partition, options)
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
        """Move the durable ``subscriptionName`` (when given) to ``end``."""
        name = self.options.subscription_name
        if name is None:
            return
        for topic, position in parse_offsets(end).items():
            mid = position.message_id
            if position.kind != "after" or mid is None:
                continue
            if mid.batch_index >= 0:  # inside an entry: only the entries before are done
                if mid.entry == 0:
                    continue
                mid = MessageId(mid.ledger, mid.entry - 1, mid.partition, -1)
            self.client.acknowledge_cumulative(topic, name, mid)
