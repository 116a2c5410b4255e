"""Filter pushdown for batch reads: a query's filters on a message's topic, partition and
publish time narrow what is read (Spark 4.1+, ``spark.sql.python.filterPushdown.enabled``).

Spark hands a Python source the conjuncts of a query's ``WHERE`` that compare a column
with literals (:meth:`PulsarFilteringReader.pushFilters`); :func:`narrowing` turns those
it understands into a :class:`Narrowing`, which planning applies:

* ``topic`` (``__topic`` in StreamNative's layout, a partition's own name) and
  ``partition``, compared with ``=``, ``<=>`` or ``IN``: partitions no row of which could
  match are not read at all. Exact: Spark does not check them again.
* ``publishTime`` (``__publishTime``), compared with ``=``, ``<``, ``<=``, ``>``, ``>=``
  or ``IN`` (its least and greatest values): each partition's range starts at the first
  message published at or after the lower bound and ends before the first one published
  at or after the upper bound, both found by the broker's seek by time
  (:meth:`PulsarClient.message_id_at_time`, one SEEK per bound and partition, on the
  driver). Publish times are stamped by producers, per entry, so the cut falls between
  entries and is exact where they increase along a partition (one producer, or producers
  whose clocks agree, as the broker's own seek by time assumes). Spark still checks
  these filters on what is read, so a message stamped out of order inside the range
  never reaches a result it does not belong to.

Everything else (other columns, ``NOT``, ``IS NULL``, string matches, values of the
wrong type) goes back to Spark untouched. A pushed filter never changes a query's
result; it changes how much is read.

Spark refuses a reader that has ``pushFilters`` when the setting is off
(``DATA_SOURCE_PUSHDOWN_DISABLED``) instead of reading without it, so the source hands
Spark a reader without the method then (:func:`pushdown_asked`).

Spark 4.1 to 4.3 keep the read a pushdown planned (its partitions and reader) on the
DataFrame's source, not on the query: a later query on the same DataFrame without
filters (or with the setting off) reads with it, narrowed to the earlier query's filters.
So by default (``pushFilters=auto``) filters are taken only where Spark keeps a pushed
plan to its own query (:func:`plans_per_query`: its releases whose ``DataSourceReader``
has ``pushLimit``, which came with that change); ``pushFilters=true`` takes them on 4.1 to
4.3 too, for users who load a DataFrame per filtered query.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.protocol.topics import base_topic

from .ranges import END_PROBES_IN_FLIGHT, PartitionRange
from .stream.offsets import order_key
from .streamnative_rows import PULSAR_SPARK, STREAMNATIVE

__all__ = ["Narrowing", "narrow_times", "narrowing", "plans_per_query", "pushdown_asked"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MICRO = dt.timedelta(microseconds=1)
_EMPTY = Position.earliest()  # as the end of a range: nothing to read

#: (topic column, partition column or None, publish time column) of each row layout.
_COLUMNS = {
    PULSAR_SPARK: ("topic", "partition", "publishTime"),
    STREAMNATIVE: ("__topic", None, "__publishTime"),
}


@dataclass(frozen=True)
class Narrowing:
    """What a batch read's pushed filters leave to read.

    ``topics``: the values the topic column may have (None: any); in StreamNative's
    layout that column names the partition itself. ``partitions``: the values of
    ``partition`` (None: any). ``from_ms``/``until_ms``: publish times at or after, and
    before, which messages are read (epoch milliseconds; None: unbounded)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    from_ms: int | None = None
    until_ms: int | None = None
    #: Whether ``topics`` holds partition names (StreamNative's ``__topic``).
    by_partition_name: bool = False

    def keeps(self, name: str) -> bool:
        """Whether partition ``name`` (or a non-partitioned topic) may hold matching rows."""
        topic, index = base_topic(name)
        if self.topics is not None and (name if self.by_partition_name else topic) not in (
            self.topics
        ):
            return False
        return self.partitions is None or index in self.partitions

    @property
    def bounds_time(self) -> bool:
        return self.from_ms is not None or self.until_ms is not None

    @property
    def no_time(self) -> bool:
        """The time bounds contradict each other: no message can match."""
        return (
            self.from_ms is not None
            and self.until_ms is not None
            and (self.from_ms >= self.until_ms)
        )

    def __str__(self) -> str:
        parts = []
        if self.topics is not None:
            parts.append(f"topic in {sorted(self.topics)}")
        if self.partitions is not None:
            parts.append(f"partition in {sorted(self.partitions)}")
        if self.from_ms is not None:
            parts.append(f"publishTime >= {self.from_ms} ms")
        if self.until_ms is not None:
            parts.append(f"publishTime < {self.until_ms} ms")
        return ", ".join(parts) or "everything"


def _attribute(flt: Any) -> str | None:
    path = getattr(flt, "attribute", None)
    return path[0] if isinstance(path, tuple) and len(path) == 1 else None


def _values(flt: Any) -> list[Any] | None:
    """The literals an ``=``, ``<=>`` or ``IN`` filter compares with; None for others."""
    name = type(flt).__name__
    if name in ("EqualTo", "EqualNullSafe"):
        return [flt.value]
    if name == "In":
        return list(flt.value)
    return None


def _micros(value: Any) -> int | None:
    """Epoch microseconds of a time-zone-aware datetime (Spark's TIMESTAMP literals)."""
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        return None
    return (value - _EPOCH) // _MICRO


def _ceil_ms(micros: int) -> int:
    return -(-micros // 1000)


def _time_bounds(flt: Any) -> tuple[int | None, int | None] | None:
    """(from_ms, until_ms) a publish-time filter allows (millisecond publish times
    compared with a microsecond literal); None when it is not one this understands."""
    name = type(flt).__name__
    if name == "In":
        micros = [_micros(v) for v in flt.value]
        if not micros or any(m is None for m in micros):
            return None
        known = [m for m in micros if m is not None]
        return _ceil_ms(min(known)), max(known) // 1000 + 1
    at = _micros(getattr(flt, "value", None))
    if at is None:
        return None
    if name in ("EqualTo", "EqualNullSafe"):
        return _ceil_ms(at), at // 1000 + 1
    if name == "GreaterThan":
        return at // 1000 + 1, None
    if name == "GreaterThanOrEqual":
        return _ceil_ms(at), None
    if name == "LessThan":
        return None, _ceil_ms(at)
    if name == "LessThanOrEqual":
        return None, at // 1000 + 1
    return None


def narrowing(filters: Sequence[Any], layout: str) -> tuple[Narrowing, list[Any]]:
    """The :class:`Narrowing` ``filters`` (Spark's pushed conjuncts) make for a read laid
    out as ``layout``, and the filters Spark must still check (the very objects given)."""
    topic_column, partition_column, time_column = _COLUMNS.get(layout, _COLUMNS[PULSAR_SPARK])
    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    from_ms: int | None = None
    until_ms: int | None = None
    rest: list[Any] = []
    for flt in filters:
        column, values = _attribute(flt), _values(flt)
        if column == topic_column and values and all(isinstance(v, str) for v in values):
            topics = frozenset(values) if topics is None else topics & frozenset(values)
            continue
        if (
            partition_column is not None
            and column == partition_column
            and values
            and all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        ):
            wanted = frozenset(values)
            partitions = wanted if partitions is None else partitions & wanted
            continue
        rest.append(flt)  # publish times too: Spark checks them again (see the module)
        bounds = _time_bounds(flt) if column == time_column else None
        if bounds is not None:
            low, high = bounds
            if low is not None:
                from_ms = low if from_ms is None else max(from_ms, low)
            if high is not None:
                until_ms = high if until_ms is None else min(until_ms, high)
    found = Narrowing(topics, partitions, from_ms, until_ms, layout == STREAMNATIVE)
    return found, rest


def plans_per_query() -> bool:
    """Whether this Spark keeps the read a filter pushdown planned to the query it was
    planned for (see the module docstring)."""
    from pyspark.sql.datasource import DataSourceReader

    return hasattr(DataSourceReader, "pushLimit")


def pushdown_asked(setting: str = "auto") -> bool:
    """Whether the batch reader made now takes filters: never with ``setting`` (the
    ``pushFilters`` option) ``false``, with ``auto`` only where :func:`plans_per_query`,
    and then only when the Spark worker asking for it pushes filters.

    Spark 4.1+ plans a Python source's read in one of two workers: with
    ``spark.sql.python.filterPushdown.enabled`` on, one that calls ``pushFilters``
    (``data_source_pushdown_filters.py``); otherwise, or when the query has no filters,
    ``plan_data_source_read.py``, which fails a reader that has ``pushFilters`` if the
    setting is off. The caller's frames tell which (the latter keeps the setting in its
    local ``enable_pushdown``). Anywhere else (Spark 4.0, a reader built by hand): no."""
    if setting == "false" or (setting == "auto" and not plans_per_query()):
        return False
    frame = inspect.currentframe()
    try:
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename.endswith("data_source_pushdown_filters.py"):
                return True
            if filename.endswith("plan_data_source_read.py"):
                return bool(frame.f_locals.get("enable_pushdown", False))
            frame = frame.f_back
        return False
    finally:
        del frame


# -- applying the time bounds -------------------------------------------------------------


def _entry(mid: MessageId) -> Position:
    """From entry ``mid`` on (a batch's messages share their entry's publish time)."""
    return Position.at(MessageId(mid.ledger, mid.entry, mid.partition, -1))


def _narrowed(client: PulsarClient, part: PartitionRange, narrow: Narrowing) -> PartitionRange:
    """``part`` (its end fixed, see :func:`.ranges.fix_ends`) cut to the publish times."""
    if part.end.kind == "earliest":
        return part  # empty already
    if narrow.no_time:
        return replace(part, end=_EMPTY, end_inclusive=None)
    start, end = part.start, part.end
    if narrow.until_ms is not None and end.is_id:
        found = client.message_id_at_time(part.topic, narrow.until_ms)
        if found is not None and order_key(_entry(found)) < order_key(end):
            end = _entry(found)
    if narrow.from_ms is not None:
        if start.kind == "time":
            assert start.time_ms is not None
            start = Position.at_time(max(start.time_ms, narrow.from_ms))
        elif start.kind == "earliest" or start.is_id:
            found = client.message_id_at_time(part.topic, narrow.from_ms)
            if found is None:  # every message is older
                return replace(part, end=_EMPTY, end_inclusive=None)
            if start.kind == "earliest" or order_key(_entry(found)) > order_key(start):
                start = _entry(found)
    if start.is_id and end.is_id and order_key(start) >= order_key(end):
        return replace(part, end=_EMPTY, end_inclusive=None)
    return replace(part, start=start, end=end, end_inclusive=None)


def narrow_times(
    client: PulsarClient, ranges: Iterable[PartitionRange], narrow: Narrowing
) -> list[PartitionRange]:
    """``ranges`` (ends fixed) cut to ``narrow``'s publish times, the partitions asked in
    parallel (a SEEK by time per bound); a range left with nothing ends at ``earliest``."""
    todo = list(ranges)
    if not todo or not narrow.bounds_time:
        return todo
    workers = min(END_PROBES_IN_FLIGHT, len(todo))
    with ThreadPoolExecutor(workers, thread_name_prefix="pulsar-pushdown") as pool:
        return list(pool.map(lambda part: _narrowed(client, part, narrow), todo))
