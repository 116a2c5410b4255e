"""Admission control of the stream reader: the limits of a micro-batch and where it ends.

Options (Spark 4.2+, where Python sources get ``latestOffset(start, limit)``):

* ``maxRecordsPerTrigger`` (Kafka's ``maxOffsetsPerTrigger``): messages per
  micro-batch at most;
* ``maxBytesPerTrigger`` (StreamNative's and Databricks' name): bytes of payload
  (decompressed, as ``value`` holds it; on an encrypted topic the plaintext's
  size, which the metadata keeps in clear, so the driver needs no key, an
  encrypted batch counted whole) per micro-batch at most. A micro-batch
  always takes at least one message, even one larger than the whole budget:
  else a message that size would stall the stream for ever;
* ``minRecordsPerTrigger`` (Kafka's ``minOffsetsPerTrigger``) with
  ``maxTriggerDelay`` (default 15m): no micro-batch until that many messages
  are there, unless ``maxTriggerDelay`` passed since the last one.

Both maxima hold together. Budgets are shared fairly (:func:`admit`): each
partition with data gets an equal share of what is left, what one cannot use
goes to the others in the next round; the driver counts ahead with an id scan
that also gives payload sizes (:meth:`~pulsar_spark.client.PulsarClient.scan_sizes`), no
admin API.

Spark carries one limit from ``getDefaultReadLimit()`` to ``latestOffset``
(pyspark rebuilds it from a registry of single limits: no composite), so
:meth:`TriggerLimits.read_limit` is only a marker, and the reader applies
every option itself, except when Spark passes ``ReadAllAvailable``
(``Trigger.Once``: everything, as Spark's own sources do). The minimum waits
are the reader's to time (:class:`MinimumGate`), as Kafka's source does: the
first trigger of a query is not held, then a trigger is held while fewer
messages than the minimum are there and less than ``maxTriggerDelay`` passed
since the last trigger let through. ``Trigger.AvailableNow`` ignores the
minimum (Spark ends such a query at the first trigger that returns its start:
a held trigger would leave data unread).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass

from pulsar_spark.client import SizedRef
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position

from ..compat import require_spark, spark_version
from ..errors import PulsarOptionError
from ..options.parse import PulsarOptions
from .offsets import EARLIEST, Offsets, reaches

__all__ = [
    "ADMISSION_CONTROL",
    "MinimumGate",
    "ReadAllAvailable",
    "ReadLimit",
    "Scan",
    "SupportsTriggerAvailableNow",
    "TriggerLimits",
    "admit",
]

# Admission control and Trigger.AvailableNow for Python sources came with Spark 4.2.
ADMISSION_CONTROL = spark_version() >= (4, 2)
if ADMISSION_CONTROL:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxBytes,
        ReadMaxRows,
        ReadMinRows,
        SupportsTriggerAvailableNow,
    )
else:  # pragma: no cover - exercised on Spark 4.0/4.1 only
    ReadAllAvailable = ReadLimit = ReadMaxRows = ReadMaxBytes = ReadMinRows = None  # type: ignore[assignment,misc]

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in: Spark before 4.2 has no Trigger.AvailableNow for Python sources."""


#: ``scan(topic, start, end, limit)``: the messages after ``start`` up to ``end``
#: (positions), at most ``limit`` (None: all), in the order they complete.
Scan = Callable[[str, Position, Position, int | None], Generator[SizedRef, None, None]]

_LIMITS = {
    "maxRecordsPerTrigger": "max_records_per_trigger",
    "maxBytesPerTrigger": "max_bytes_per_trigger",
    "minRecordsPerTrigger": "min_records_per_trigger",
}


def _check_limits(options: PulsarOptions) -> None:
    """Checks across the admission-control options of a stream read.

    Raises:
        PulsarOptionError: ``minRecordsPerTrigger`` above ``maxRecordsPerTrigger``
            (naming both), or ``maxTriggerDelay`` without ``minRecordsPerTrigger``.
    """
    low, high = options.min_records_per_trigger, options.max_records_per_trigger
    if low is not None and high is not None and low > high:
        msg = (
            f"minRecordsPerTrigger ({low}) is above maxRecordsPerTrigger ({high}): a "
            "micro-batch could never hold its minimum; lower minRecordsPerTrigger or raise "
            "maxRecordsPerTrigger"
        )
        name = "minRecordsPerTrigger"
        raise PulsarOptionError(name, msg)
    if "maxTriggerDelay" in options.given and low is None:
        msg = (
            "applies with minRecordsPerTrigger (alias minOffsetsPerTrigger) only: it bounds "
            "how long a micro-batch waits for that minimum; set both, or remove it"
        )
        name = "maxTriggerDelay"
        raise PulsarOptionError(name, msg)


@dataclass(frozen=True)
class TriggerLimits:
    """The admission-control options of one stream read."""

    max_rows: int | None = None
    max_bytes: int | None = None
    min_rows: int | None = None
    max_delay_ms: int = 15 * 60_000

    @classmethod
    def of(cls, options: PulsarOptions) -> TriggerLimits:
        """The limits ``options`` set, checked.

        Raises:
            PulsarOptionError: options that contradict each other.
            SparkVersionError: a limit on a Spark that cannot keep it (before 4.2).
        """
        _check_limits(options)
        for name, field in _LIMITS.items():
            if getattr(options, field) is not None:
                # Older Sparks never tell a Python source where a micro-batch starts
                # after a restart, so no limit can be kept: refused rather than ignored.
                require_spark(
                    f"pulsar option {name!r} (admission control for Python streaming sources)",
                    (4, 2),
                )
        return cls(
            options.max_records_per_trigger,
            options.max_bytes_per_trigger,
            options.min_records_per_trigger,
            options.max_trigger_delay_ms,
        )

    @property
    def bounded(self) -> bool:
        return self.max_rows is not None or self.max_bytes is not None

    def read_limit(self) -> ReadLimit:
        """What ``getDefaultReadLimit()`` gives Spark: a marker (see the module docstring)."""
        if self.max_rows is not None:
            return ReadMaxRows(self.max_rows)
        if self.max_bytes is not None:
            return ReadMaxBytes(self.max_bytes)
        if self.min_rows is not None:
            return ReadMinRows(self.min_rows)
        return ReadAllAvailable()


class MinimumGate:
    """``minRecordsPerTrigger`` with ``maxTriggerDelay``: whether a trigger is held."""

    def __init__(
        self, min_rows: int, max_delay_ms: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.min_rows, self.max_delay_ms, self._clock = min_rows, max_delay_ms, clock
        #: When the last trigger was let through (None: none yet, the first is not held).
        self._last: float | None = None

    def hold(self, available: int) -> bool:
        """Whether to hold this trigger, with ``available`` messages there (at least)."""
        now = self._clock()
        if self._last is None or (now - self._last) * 1000 >= self.max_delay_ms:
            self._last = now  # the delay passed: let it through, the wait starts again
            return False
        if available < self.min_rows:
            return True
        self._last = now
        return False


@dataclass
class _Share:
    """What one partition took in one round."""

    rows: int = 0
    nbytes: int = 0
    end: Position = EARLIEST
    exhausted: bool = False


def _take(
    scan: Scan,
    topic: str,
    start: Position,
    end: Position,
    rows: int | None,
    nbytes: int | None,
    force: bool,
) -> _Share:
    """The messages after ``start`` towards ``end`` within ``rows`` and ``nbytes``
    (None: no bound); ``force``: the first one even beyond ``nbytes``."""
    share = _Share(end=start)
    last: MessageId | None = None
    cut = False
    with contextlib.closing(scan(topic, start, end, rows)) as refs:
        for ref in refs:
            over = nbytes is not None and share.nbytes + ref.size > nbytes
            if over and not (force and share.rows == 0):
                cut = True
                break
            share.rows += 1
            share.nbytes += ref.size
            mid = ref.message_id
            # A chunked message comes after those stored between its chunks (its id
            # is its first chunk's): the greatest id is the position.
            if last is None or (mid.ledger, mid.entry, mid.batch_index) > (
                last.ledger,
                last.entry,
                last.batch_index,
            ):
                last = mid
    if last is None:
        share.exhausted = not cut
        share.end = start if cut else end
    elif not cut and (rows is None or share.rows < rows):
        share.end, share.exhausted = end, True
    else:
        share.end, share.exhausted = Position.after(last), reaches(last, end)
        if share.exhausted:
            share.end = end
    return share


def _least(share: int | None, left: int | None) -> int | None:
    return None if share is None or left is None else min(share, left)


def admit(
    scan: Scan,
    start: Offsets,
    latest: Offsets,
    max_rows: int | None,
    max_bytes: int | None,
) -> tuple[Offsets, dict[str, int]]:
    """End positions with at most ``max_rows`` messages and ``max_bytes`` payload
    bytes in all (None: no bound), shared fairly, and the messages each partition
    takes. At least one message when there is any, whatever its size."""
    ends = {topic: start.get(topic, EARLIEST) for topic in latest}
    taken = dict.fromkeys(latest, 0)
    open_ = [topic for topic in sorted(latest) if latest[topic] != ends[topic]]
    rows_left, bytes_left = max_rows, max_bytes
    anything = False

    def room() -> bool:
        return (rows_left is None or rows_left > 0) and (bytes_left is None or bytes_left > 0)

    def take(topic: str, rows: int | None, nbytes: int | None, force: bool) -> _Share:
        nonlocal rows_left, bytes_left, anything
        share = _take(scan, topic, ends[topic], latest[topic], rows, nbytes, force)
        ends[topic] = share.end
        taken[topic] += share.rows
        if rows_left is not None:
            rows_left -= share.rows
        if bytes_left is not None:
            bytes_left -= share.nbytes
        anything = anything or share.rows > 0
        return share

    while open_ and room():
        count = len(open_)  # this round's equal shares
        row_share = None if rows_left is None else max(rows_left // count, 1)
        byte_share = None if bytes_left is None else max(bytes_left // count, 1)
        still, blocked = [], []
        for topic in open_:
            if not room():
                still.append(topic)
                continue
            share = take(topic, _least(row_share, rows_left), _least(byte_share, bytes_left), False)
            if not share.exhausted:
                still.append(topic)
                if share.rows == 0:
                    blocked.append(topic)
        if blocked and len(blocked) == len(still) and room():
            # No partition could take a message within its share: the whole budget left
            # goes to each in turn; with nothing taken yet, the first takes one anyway.
            for topic in blocked:
                share = take(topic, rows_left, bytes_left, not anything)
                if share.rows:
                    break
            else:
                break
        open_ = [topic for topic in still if ends[topic] != latest[topic]]
    return ends, taken
