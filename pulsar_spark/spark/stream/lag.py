"""How far a stream is behind: messages (not entries) between each partition's
micro-batch end and its latest position, counted exactly and at bounded cost.

Kafka's source reports ``avgOffsetsBehindLatest``, ``maxOffsetsBehindLatest``
and ``minOffsetsBehindLatest`` between a micro-batch's end offsets and the
latest ones; Kafka offsets count messages, Pulsar ids do not (an entry holds a
batch of messages, ledgers come and go), so :class:`Backlog` counts them with
the id scan, and only once: per partition it keeps ``count`` messages after the
stream's position up to the place it has counted to. Each trigger then scans
only what arrived since (the stream moves on by the messages its micro-batch
took, which admission control counted); a new query, or one after a restart,
counts its backlog at most ``cap`` messages per trigger (shared by the
partitions, at least ``floor`` each: :meth:`Backlog.share`), and until it has
counted up to the latest position the figure is a lower bound, reported as
such (``exact`` false, the partition listed in ``atLeast``), never as exact.

Spark 4.3 gives Python sources no metrics hook (the JVM's
``PythonMicroBatchStream`` does not implement ``ReportsSourceMetrics``), so the
figures go into what ``reportLatestOffset()`` returns, which Spark only shows
as the source's ``latestOffset`` in ``StreamingQueryProgress`` (it is never
used as an offset): the latest positions per partition, as before, plus a
``lag`` entry (:func:`lag_report`); and one INFO line per micro-batch.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position

from .offsets import Offsets, order_key, reaches

__all__ = ["BACKLOG_SCAN_CAP", "Backlog", "Behind", "lag_report", "log_lag"]

log = logging.getLogger(__name__)

#: Most messages counted per trigger (all partitions) to catch up with a backlog ...
BACKLOG_SCAN_CAP = 100_000
#: ... but at least this many per partition.
BACKLOG_SCAN_FLOOR = 1_000

#: ``ids(topic, start, end, limit)``: the message ids after ``start`` up to ``end``,
#: at most ``limit``, in the order they complete.
Ids = Callable[[str, Position, Position, int], Generator[MessageId, None, None]]


@dataclass
class _Tally:
    base: Position  # the stream's position: counting starts after it
    upto: Position  # counted up to here
    count: int  # messages between the two


class Behind(NamedTuple):
    """Messages behind the latest position of one partition."""

    messages: int
    #: False: at least ``messages`` (the backlog is still being counted).
    exact: bool


class Backlog:
    """Messages between the stream's position and the latest one, per partition."""

    def __init__(
        self, ids: Ids, cap: int = BACKLOG_SCAN_CAP, floor: int = BACKLOG_SCAN_FLOOR
    ) -> None:
        self._ids, self.cap, self.floor = ids, cap, floor
        self._tallies: dict[str, _Tally] = {}

    def share(self, partitions: int) -> int:
        """Most messages to count per partition in a trigger over ``partitions``."""
        return max(self.cap // max(partitions, 1), self.floor)

    def behind(self, topic: str, base: Position, latest: Position, limit: int) -> Behind:
        """Messages after ``base`` up to ``latest``, counting what is not counted yet
        (at most ``limit`` more)."""
        if order_key(base) >= order_key(latest):  # caught up: nothing to count
            self._tallies[topic] = _Tally(base, base, 0)
            return Behind(0, True)
        tally = self._tallies.get(topic)
        if tally is None or tally.base != base or order_key(tally.upto) > order_key(latest):
            tally = self._tallies[topic] = _Tally(base, base, 0)  # moved elsewhere: anew
        if order_key(tally.upto) < order_key(latest):
            self._count(topic, tally, latest, limit)
        return Behind(tally.count, order_key(tally.upto) >= order_key(latest))

    def _count(self, topic: str, tally: _Tally, latest: Position, limit: int) -> None:
        found, last = 0, None
        with contextlib.closing(self._ids(topic, tally.upto, latest, limit)) as ids:
            for mid in ids:
                found += 1
                if last is None or (mid.ledger, mid.entry, mid.batch_index) > (
                    last.ledger,
                    last.entry,
                    last.batch_index,
                ):
                    last = mid
        tally.count += found
        if found < limit or last is None or reaches(last, latest):
            tally.upto = latest
        else:
            tally.upto = Position.after(last)

    def moved(self, topic: str, base: Position, to: Position, taken: int) -> None:
        """The stream moved from ``base`` to ``to`` over ``taken`` messages."""
        tally = self._tallies.get(topic)
        if tally is None or base == to:
            return
        if tally.base != base or order_key(to) > order_key(tally.upto) or taken > tally.count:
            del self._tallies[topic]  # not what was counted: count anew
            return
        tally.base, tally.count = to, tally.count - taken

    def forget(self, keep: Mapping[str, object]) -> None:
        """Drop the partitions not in ``keep`` (gone from the stream)."""
        for topic in [t for t in self._tallies if t not in keep]:
            del self._tallies[topic]


def lag_report(behind: Mapping[str, Behind]) -> dict[str, object]:
    """Kafka's figures over ``behind`` (per partition), plus the per-partition counts
    and whether every one is exact (``atLeast``: the partitions only bounded below)."""
    counts = {topic: b.messages for topic, b in sorted(behind.items())}
    values = list(counts.values()) or [0]
    return {
        "avgOffsetsBehindLatest": sum(values) / len(values),
        "maxOffsetsBehindLatest": max(values),
        "minOffsetsBehindLatest": min(values),
        "totalOffsetsBehindLatest": sum(values),
        "offsetsBehindLatest": counts,
        "exact": all(b.exact for b in behind.values()),
        "atLeast": sorted(topic for topic, b in behind.items() if not b.exact),
    }


def log_lag(report: Mapping[str, object], start: Offsets, end: Offsets) -> None:
    """One INFO line for a micro-batch (``start`` to ``end``)."""
    moved = sum(1 for topic, position in end.items() if start.get(topic) != position)
    log.info(
        "pulsar stream: micro-batch over %d partition(s); messages behind latest: total %s, "
        "avg %.1f, max %s, min %s%s; per partition %s",
        moved,
        report["totalOffsetsBehindLatest"],
        report["avgOffsetsBehindLatest"],
        report["maxOffsetsBehindLatest"],
        report["minOffsetsBehindLatest"],
        "" if report["exact"] else f" (at least: still counting {report['atLeast']})",
        report["offsetsBehindLatest"],
    )
