"""Data loss during a bounded read: entries the broker no longer has between where the
read is and where it has to get to, found and reported.

Brokers remove whole ledgers (retention, truncation, a topic deleted and
created again, whose new ledgers have greater ids), and a cursor on a
position that is gone moves on to the next entry that exists, without a
word. A read notices it three ways:

* the first entry after a re-subscribe lies in a later ledger than the last
  entry processed (which the broker would deliver again): that entry's
  ledger may be gone;
* an entry past the read's end comes before the last entry the read must
  deliver: the entries between may be gone;
* the topic's last message id lies before that entry (or the topic is
  empty): it is gone.

Each suspicion is confirmed by a probe (:func:`~.session.first_entry`:
does the ledger still hold the entry?), so an entry the broker never
dispatches (a marker) is not taken for a loss. A loss is reported once per
read, to the reader's ``missing_start`` callback (which may raise to fail the
read) or else as a WARNING naming the topic and the ids.

A compacted read (the client's ``read_compacted``) skips ids by design: up to
the compaction horizon it gets only the latest message of each key (keyless
messages are dropped), and the ledgers compaction covered may be removed
since the compacted ledger stands for them. Where that horizon lies is not
told over the binary protocol (only the admin API shows it), so a skip cannot
be told from a loss by ids: the first three checks are off for such reads.
The last one stays: a topic whose last message id (the compacted view's, as
Apache Pulsar answers a compacted reader) falls before what the read must
deliver has lost it (truncated, or deleted and created again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pulsar_spark.protocol.ids.message_id import MessageId

from ..names import TopicName
from ..net.lookup import LookupService
from .session import first_entry

__all__ = ["GapWatch", "LossReport", "entry_needed"]

log = logging.getLogger(__name__)

#: Called with (the position the read holds, the first position it can go on from):
#: the entries after the first and before the second are gone. It may raise.
LossReport = Callable[[MessageId, MessageId], None]

Key = tuple[int, int]


def entry_needed(end: MessageId, inclusive: bool) -> Key | None:
    """(ledger, entry) of the last entry a read ending at ``end`` must deliver; None
    when it cannot be told (an exclusive end at the first entry of a ledger: the
    entry before lies in an earlier ledger, whose last entry id is unknown)."""
    if inclusive or end.batch_index >= 0:
        return end.ledger, end.entry
    if end.entry > 0:
        return end.ledger, end.entry - 1
    return None


class GapWatch:
    """Finds and reports entries lost while one partition is read.

    Args:
        lookup, topic, partition: where probes go.
        operation_timeout: how long a probe may take.
        report: the reader's callback (see :data:`LossReport`); None: log a warning.
    """

    def __init__(
        self,
        lookup: LookupService,
        topic: TopicName,
        partition: int,
        operation_timeout: float,
        report: LossReport | None,
    ) -> None:
        self._lookup = lookup
        self._topic = topic
        self._partition = partition
        self._timeout = operation_timeout
        self._report = report
        #: A loss was reported (once per read).
        self.reported = False
        #: A compacted read: skipped ids are compaction's (see the module docstring).
        self.compacted: bool = getattr(getattr(lookup, "config", None), "read_compacted", False)

    def lost(self, held: Key, next_: Key) -> None:
        """Report the entries after ``held`` and before ``next_`` as gone (once)."""
        if self.reported:
            return
        self.reported = True
        after = MessageId(held[0], held[1], self._partition, -1)
        resume = MessageId(next_[0], next_[1], self._partition, -1)
        if self._report is not None:
            self._report(after, resume)
            return
        log.warning(
            "%s: entries after %s and before %s are gone (retention, truncation, or the "
            "topic was deleted and created again): they are not in this read",
            self._topic,
            after,
            resume,
        )

    def first_entry(self, ledger: int, entry: int, start: MessageId, reached: Key) -> None:
        """The read's first entry, for a read from ``start``: a later ledger than the
        start's means the start's is gone. (Brokers remove whole ledgers, so an entry
        further on in the start's own ledger means the entries between were not
        dispatched, markers, not lost.)"""
        if self.compacted:
            return
        if not (start.is_earliest or start.is_latest) and ledger > start.ledger:
            self.lost(reached, (ledger, entry))

    def first_after_resubscribe(self, ledger: int, entry: int, processed: Key | None) -> None:
        """The first entry that came after a re-subscribe from ``processed``."""
        if processed is None or ledger <= processed[0] or self.reported or self.compacted:
            return
        if not self._entry_there(processed):
            self.lost(processed, (ledger, entry))

    def past_end(self, ledger: int, entry: int, reached: Key, needed: Key | None) -> None:
        """An entry past the read's end came with the read at ``reached``."""
        if needed is None or reached >= needed or self.reported or self.compacted:
            return
        if not self._entry_there(needed):
            self.lost(reached, (ledger, entry))

    def topic_short(self, last: MessageId | None, reached: Key, needed: Key | None) -> bool:
        """The broker's last message is ``last`` (None: the topic is empty), the read is
        at ``reached``: whether the entries up to ``needed`` are gone (then reported).

        Outside compacted reads the answer is confirmed by a probe: a consumer attached to
        a topic instance that an unload closed can answer a stale last id (Apache Pulsar
        4.0), and an entry the probe still finds is not lost (see :meth:`behind`)."""
        if not self.behind(last, reached, needed):
            return False
        assert needed is not None
        if not self.compacted and self._entry_there(needed):
            return False
        self.lost(reached, (needed[0], needed[1] + 1))
        return True

    @staticmethod
    def behind(last: MessageId | None, reached: Key, needed: Key | None) -> bool:
        """Whether the broker's last message ``last`` (None: the topic is empty) lies
        before ``needed``, the last entry the read must deliver, which it has not
        ``reached``."""
        if needed is None or reached >= needed:
            return False
        return last is None or (last.ledger, last.entry) < needed

    def _entry_there(self, key: Key) -> bool:
        """Whether the ledger of entry ``key`` still holds it (or an entry after it)."""
        at = MessageId(key[0], max(key[1], 0), self._partition, -1)
        found = first_entry(self._lookup, self._topic, at, operation_timeout=self._timeout)
        return found is not None and found[0].ledger == key[0]
