"""The stream reader: ``spark.readStream.format("pulsar")``.

Offsets
-------
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

A micro-batch reads, per partition, from its start position to its end
position (always ``after:...``), both fixed when Spark plans it, so a batch
re-run from the checkpoint reads exactly the same messages: exactly-once
reads. Every read uses a non-durable subscription; nothing durable exists on
the broker unless ``subscriptionName`` is set, in which case :meth:`commit`
moves that durable subscription to the committed end by cumulative ack (its
backlog then shows the query's progress).

Each trigger lists the topics again (``topicsPattern``) and their partitions,
so new topics and partitions join the stream, from their earliest message.

Admission control (Spark 4.2+): ``maxRecordsPerTrigger`` bounds the rows of a
micro-batch. The driver counts messages ahead of each partition's start and
spreads the budget fairly: each partition with data gets an equal share,
and what a partition cannot use goes to the others. ``Trigger.AvailableNow``
reads up to the latest positions of the moment it starts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from ..client import PulsarClient
from ..protocol.message_id import MessageId
from .compat import require_spark, spark_version
from .connect import open_client
from .options import PulsarOptionError, PulsarOptions
from .ranges import DataLossError, plan_ranges, resolve_topics

__all__ = ["PulsarStreamPartition", "PulsarStreamReader", "StreamPosition"]

log = logging.getLogger(__name__)

#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 50_000
EARLIEST = "earliest"
_AFTER, _FROM = "after:", "from:"

# Admission control and Trigger.AvailableNow for Python sources came with Spark 4.2.
ADMISSION_CONTROL = spark_version() >= (4, 2)
if ADMISSION_CONTROL:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
else:  # pragma: no cover - exercised on Spark 4.0/4.1 only
    ReadAllAvailable = ReadLimit = ReadMaxRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: Spark before 4.2 has no Trigger.AvailableNow for Python sources."""


@dataclass(frozen=True)
class StreamPosition:
    """A parsed position (see the module docstring)."""

    kind: str  # "earliest", "after" or "from"
    message_id: MessageId | None = None

    @classmethod
    def parse(cls, text: str, topic: str) -> StreamPosition:
        if text == EARLIEST:
            return cls(EARLIEST)
        for kind, prefix in (("after", _AFTER), ("from", _FROM)):
            if text.startswith(prefix):
                try:
                    return cls(kind, MessageId.parse(text[len(prefix):]))
                except ValueError:
                    break
        msg = (f"offset {text!r} of {topic} in the checkpoint is not 'earliest', "
               "'after:<id>' or 'from:<id>'")
        raise ValueError(msg)

    def __str__(self) -> str:
        if self.kind == EARLIEST:
            return EARLIEST
        return f"{self.kind}:{self.message_id}"

    def key(self) -> tuple[int, int, int]:
        """Where the next message to read sits, for ordering positions."""
        if self.message_id is None:
            return (-2, -2, -2)
        mid = self.message_id
        if self.kind == "from":
            return (mid.ledger, mid.entry, max(mid.batch_index, 0) - 1)  # just before it
        return (mid.ledger, mid.entry, mid.batch_index if mid.batch_index >= 0 else 1 << 31)


def _after(message_id: MessageId) -> str:
    return f"{_AFTER}{message_id}"


def _entry(message_id: MessageId) -> MessageId:
    return MessageId(message_id.ledger, message_id.entry, message_id.partition, -1)


@dataclass(frozen=True)
class PulsarStreamPartition(InputPartition):
    """One partition's share of a micro-batch: from ``start`` to ``end`` (positions)."""

    topic: str
    start: str
    end: str


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("pulsar")``, see the module docstring."""

    def __init__(self, options: PulsarOptions) -> None:
        self.options = options
        self._client: PulsarClient | None = None
        #: Latest positions found by the last latestOffset(), for progress reports.
        self._latest: dict[str, str] | None = None
        #: Trigger.AvailableNow: the positions to stop at.
        self._target: dict[str, str] | None = None
        if options.max_records_per_trigger is not None:
            # Older Sparks never tell a Python source where a micro-batch starts after a
            # restart, so the limit cannot be kept: refused rather than ignored.
            require_spark("pulsar option 'maxRecordsPerTrigger' (admission control for "
                          "Python streaming sources)", (4, 2))

    # -- the driver's client ---------------------------------------------------------

    @property
    def client(self) -> PulsarClient:
        if self._client is None:
            self._client = open_client(self.options)
        return self._client

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- offsets ---------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` / ``startingTime`` per
        partition (``latest`` by default for streams), resolved now."""
        client = self.client
        offsets = {}
        for part in plan_ranges(client, self.options):
            offsets[part.topic] = self._resolve_start(client, part.topic, part.start)
        return offsets

    def _resolve_start(self, client: PulsarClient, topic: str, start: str) -> str:
        if start == EARLIEST:
            return EARLIEST
        if start == "latest":
            last = client.get_last_message_id(topic)
            return EARLIEST if last is None else _after(_entry(last))
        if start.startswith("time:"):
            found = client.message_id_at_time(topic, int(start[len("time:"):]))
            if found is not None:
                return f"{_FROM}{found}"
            last = client.get_last_message_id(topic)  # every message is older
            return EARLIEST if last is None else _after(_entry(last))
        return f"{_FROM}{start}"

    def _discover(self) -> list[str]:
        """Every partition read now: topics listed again, partitions counted again."""
        client = self.client
        partitions = []
        for topic in resolve_topics(client, self.options):
            partitions.extend(client.get_partitions(topic))
        return partitions

    def _latest_positions(self, start: dict) -> dict[str, str]:
        client = self.client
        latest = {}
        for topic in self._discover():
            current = start.get(topic, EARLIEST)
            last = client.get_last_message_id(topic)
            if last is None:
                latest[topic] = current
                continue
            # The last entry is read whole: the position is entry-level.
            end = _after(_entry(last))
            here = StreamPosition.parse(current, topic)
            there = StreamPosition.parse(end, topic)
            latest[topic] = end if there.key() > here.key() else current
        # Partitions that vanished (a deleted topic) keep their position.
        for topic, position in start.items():
            latest.setdefault(topic, position)
        return latest

    def prepareForTriggerAvailableNow(self) -> None:
        """``Trigger.AvailableNow``: stop at what is there now."""
        self._target = self._latest_positions({})

    def getDefaultReadLimit(self):
        rows = self.options.max_records_per_trigger
        if rows is None:
            return ReadAllAvailable()
        return ReadMaxRows(rows)

    def reportLatestOffset(self) -> dict | None:
        return self._latest

    def _latest_offset(self, start: dict | None, limit: object) -> dict:
        start = dict(start or {})
        if self._target is not None:
            latest = dict(self._target)
            for topic, position in start.items():
                latest.setdefault(topic, position)
        else:
            latest = self._latest_positions(start)
            self._latest = latest
        self._log_lag(start, latest)
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return self._admit(start, latest, limit.max_rows)
        return latest

    if ADMISSION_CONTROL:

        def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
            return self._latest_offset(start, limit)

    else:  # pragma: no cover - Spark 4.0/4.1 call latestOffset() with no arguments

        def latestOffset(self) -> dict:  # type: ignore[override]
            return self._latest_offset(self._latest or {}, None)

    def _log_lag(self, start: dict, latest: dict) -> None:
        behind = {}
        for topic, position in latest.items():
            here = StreamPosition.parse(start.get(topic, EARLIEST), topic)
            there = StreamPosition.parse(position, topic)
            if here.message_id is not None and there.message_id is not None and (
                    here.message_id.ledger == there.message_id.ledger):
                behind[topic] = there.message_id.entry - here.message_id.entry
        if behind:
            log.info("pulsar stream: entries behind latest per partition: %s", behind)

    # -- admission control -------------------------------------------------------------

    def _admit(self, start: dict, latest: dict, max_rows: int) -> dict:
        """End positions with at most ``max_rows`` rows in all, shared fairly."""
        ends = {topic: start.get(topic, EARLIEST) for topic in latest}
        open_ = [t for t in sorted(latest) if latest[t] != ends[t]]
        budget = max_rows
        while budget > 0 and open_:
            share = max(budget // len(open_), 1)
            still = []
            for topic in open_:
                if budget <= 0:
                    break
                rows, position, exhausted = self._count_ahead(
                    topic, ends[topic], latest[topic], min(share, budget)
                )
                budget -= rows
                ends[topic] = position
                if not exhausted:
                    still.append(topic)
            open_ = still
        return ends

    def _count_ahead(self, topic: str, start: str, end: str, rows: int) -> tuple[int, str, bool]:
        """Rows from ``start`` towards ``end``, at most ``rows``: (count, position after
        the last one, whether ``end`` was reached)."""
        counted = 0
        batches = _read(self.client, topic, start, end, self.options, batch_rows=min(rows, 10_000))
        try:
            for batch in batches:
                if counted + batch.num_rows >= rows:
                    last = batch.column("messageId")[rows - counted - 1].as_py()
                    exhausted = counted + batch.num_rows == rows and _is_end(last, end, topic)
                    return rows, _after(MessageId.parse(last)), exhausted
                counted += batch.num_rows
        finally:
            batches.close()  # type: ignore[attr-defined]
        return counted, end, True

    # -- planning and reading --------------------------------------------------------------

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        parts: list[InputPartition] = []
        for topic in sorted(end):
            first = start.get(topic, EARLIEST)
            if first != end[topic]:
                parts.append(PulsarStreamPartition(topic, first, end[topic]))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, PulsarStreamPartition)
        options = self.options
        with open_client(options, operation_timeout=options.poll_timeout) as client:
            _check_start(client, partition, options)
            yield from _read(client, partition.topic, partition.start, partition.end, options,
                             batch_rows=BATCH_ROWS)

    def commit(self, end: dict) -> None:
        """Move the durable ``subscriptionName`` (when given) to ``end``."""
        name = self.options.subscription_name
        if name is None:
            return
        for topic, text in end.items():
            position = StreamPosition.parse(text, topic)
            if position.kind != "after" or position.message_id is None:
                continue
            mid = position.message_id
            if mid.batch_index >= 0:  # inside an entry: only the entries before are done
                if mid.entry == 0:
                    continue
                mid = MessageId(mid.ledger, mid.entry - 1, mid.partition, -1)
            self.client.acknowledge_cumulative(topic, name, mid)


def _is_end(message_id: str, end: str, topic: str) -> bool:
    position = StreamPosition.parse(end, topic)
    return position.message_id is not None and StreamPosition.parse(
        _after(MessageId.parse(message_id)), topic).key() >= position.key()


def _bounds(start: str, end: str, topic: str) -> dict:
    first = StreamPosition.parse(start, topic)
    last = StreamPosition.parse(end, topic)
    if last.kind != "after" or last.message_id is None:
        msg = f"end position {end!r} of {topic} is not 'after:<id>'"
        raise ValueError(msg)
    if first.kind == EARLIEST:
        begin, inclusive = "earliest", True
    else:
        assert first.message_id is not None
        begin, inclusive = str(first.message_id), first.kind == "from"
    return {"start": begin, "start_inclusive": inclusive, "end": str(last.message_id),
            "end_inclusive": True}


def _read(client: PulsarClient, topic: str, start: str, end: str, options: PulsarOptions, *,
          batch_rows: int) -> Iterator[pa.RecordBatch]:
    return client.read_batches(topic, **_bounds(start, end, topic),
                               receiver_queue_size=options.receiver_queue_size,
                               batch_rows=batch_rows)


def _check_start(client: PulsarClient, part: PulsarStreamPartition,
                 options: PulsarOptions) -> None:
    """Fail (or warn, with failOnDataLoss=false) when the entry a micro-batch starts
    from is gone: retention, truncation or deletion may have taken messages after it."""
    position = StreamPosition.parse(part.start, part.topic)
    if position.message_id is None:
        return
    if client.entry_exists(part.topic, _entry(position.message_id)):
        return
    msg = (f"{part.topic}: the stream's position {part.start} is no longer available "
           "(retention, truncation or deletion): messages that followed it may be lost")
    if options.fail_on_data_loss:
        msg = f"{msg}. Set failOnDataLoss=false to go on from the first message still available."
        raise DataLossError(msg)
    log.warning("%s; reading on from the first message still available "
                "(failOnDataLoss=false)", msg)


def check_stream_options(options: PulsarOptions) -> None:
    """Options that make no sense for a stream."""
    if "endingOffsets" in options.given or options.ending_time is not None:
        option = "endingOffsets" if "endingOffsets" in options.given else "endingTime"
        raise PulsarOptionError(option, "applies to batch reads only; a stream has no end")
