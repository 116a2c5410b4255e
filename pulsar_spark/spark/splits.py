"""``minPartitions``: partition ranges split into pieces with exactly the rows of the whole.

:func:`split_ranges` cuts a range at message ids:

* when its first and last messages lie in the same ledger, at evenly spaced
  entry ids (entries of a ledger are numbered without gaps);
* otherwise at the first message published at or after evenly spaced publish
  times (:meth:`PulsarClient.message_id_at_time`), since ledger ids are not
  contiguous. Publish times are per entry, so these boundaries fall between
  entries too.

Each boundary ends one piece (exclusive) and starts the next (inclusive).
Each range is probed first: its first message (id and publish time, from the
client's id-level :meth:`~PulsarClient.first_message`, which builds no rows)
and the message it stops at.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position

from .ranges import PartitionRange

__all__ = ["split_ranges"]


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


def _probe(client: PulsarClient, part: PartitionRange) -> _Probe | None:
    if part.end.kind == "earliest":  # planned empty
        return None
    first = client.first_message(part.topic, part.start, part.end)
    if first is None:
        return None
    stop: MessageId | None = None
    inclusive = True
    if part.end.message_id is not None:
        stop, inclusive = part.end.message_id, part.end.kind == "after"
    elif part.end.time_ms is not None:
        stop = client.message_id_at_time(part.topic, part.end.time_ms)
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
    return [
        MessageId(first.ledger, e, first.partition, -1)
        for e in cuts
        if first.entry < e <= stop.entry
    ]


def _time_boundaries(
    client: PulsarClient, part: PartitionRange, probe: _Probe, pieces: int
) -> list[MessageId]:
    stop_entry = MessageId(probe.stop.ledger, probe.stop.entry, probe.first.partition, -1)
    # The publish time of the last entry: its first message (ids only, no rows built).
    last = client.first_message(part.topic, Position.at(stop_entry), Position.after(stop_entry))
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
        if (
            key <= first_key
            or key > stop_key
            or (found and key <= (found[-1].ledger, found[-1].entry))
        ):
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
    client: PulsarClient,
    ranges: list[PartitionRange],
    min_partitions: int,
    *,
    by_time: bool = False,
) -> list[PartitionRange]:
    """At least ``min_partitions`` ranges (when the data allows) with exactly the
    rows of ``ranges``; empty ranges are dropped. ``by_time`` splits by publish
    time even within one ledger (for tests)."""
    if min_partitions <= len(ranges):
        return ranges
    probed = [(part, _probe(client, part)) for part in ranges]
    found = [(part, probe) for part, probe in probed if probe is not None]
    if not found:
        return []
    known = [p.entries for _, p in found if p.same_ledger]
    typical = max(known) if known else 1
    weights = [p.entries if p.same_ledger else typical for _, p in found]
    out: list[PartitionRange] = []
    for (part, probe), pieces in zip(found, _shares(weights, min_partitions), strict=True):
        if pieces <= 1:
            out.append(part)
            continue
        if probe.same_ledger and not by_time:
            cuts = _entry_boundaries(probe, pieces)
        else:
            cuts = _time_boundaries(client, part, probe, pieces)
        starts = [part.start] + [Position.at(c) for c in cuts]
        ends = [Position.at(c) for c in cuts] + [part.end]
        out.extend(PartitionRange(part.topic, s, e) for s, e in zip(starts, ends, strict=True))
    return out
