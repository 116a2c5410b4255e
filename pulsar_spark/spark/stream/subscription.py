"""The durable subscription that keeps a stream's data on the broker.

A broker without retention (Pulsar's default) keeps a message only while a
durable subscription has not acknowledged it: closed ledgers nobody needs are
deleted at the next retention check, and topics without subscriptions are
deleted when inactive. A stream that read through non-durable readers alone
would lose what was written while it was stopped, or one trigger behind a
ledger roll. So a stream holds its data as a durable Pulsar consumer does:

* **one durable subscription per query**, on every partition it reads: named
  by ``subscriptionName``, else ``pulsar-spark-stream-<12 hex>`` (after
  ``<subscriptionPrefix>-`` when that is given), fixed when the query first
  plans; the name travels in the checkpoint's offsets
  (:data:`~.offsets.SUBSCRIPTION_KEY`), so a restarted query finds it again;
* **created when the query first plans**, at each partition's earliest message,
  then moved to the stream's start position before anything is read; a
  partition or pattern topic found later gets it when discovered (it is read
  from its earliest message); a checkpoint that names no subscription (an older
  version's) gets one at its positions;
* **moved to each committed micro-batch's end** by cumulative ack of the last
  whole entry consumed, so its backlog is the query's lag and the broker may
  delete what the sink has: at the next trigger (Spark asks for the latest
  offsets from the end of the last micro-batch only once its commit log holds
  it) and at Spark's ``commit`` (which Spark makes only when it plans the
  micro-batch after);
* **checked at every trigger**: its mark-delete position (what the broker may
  delete up to) at or before the stream's position means every message after
  that position is still kept (:func:`holds`): a topic emptied by retention
  after the stream read everything, or a start ledger removed once read, is no
  loss. Past the position (a message TTL, the subscription expired or deleted
  and made again, another consumer acknowledging on it) the partition gets the
  ordinary data-loss checks.

The consumers are attached once and kept between triggers (they ask for no
messages); stopping the query closes them and leaves the subscription, which
keeps the unread messages until the query comes back, or until it is dropped
(:func:`drop_subscription`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping

from pulsar_spark.client import LastIds, PartitionEnd, PulsarClient, parse_topic
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position

from ..connect import open_client
from ..options.parse import PulsarOptions, parse_options
from ..ranges import resolve_topics
from .offsets import Offsets

__all__ = [
    "StreamSubscription",
    "ack_point",
    "drop_subscription",
    "holds",
    "new_name",
]

log = logging.getLogger(__name__)

#: What generated names say before their random part.
NAME_PREFIX = "pulsar-spark-stream"


def new_name(prefix: str | None = None) -> str:
    """A new query's subscription name: ``pulsar-spark-stream-<12 hex>``, after
    ``<prefix>-`` when given (a namespace with ``subscriptionAuthMode=Prefix``)."""
    name = f"{NAME_PREFIX}-{uuid.uuid4().hex[:12]}"
    return name if prefix is None else f"{prefix}-{name}"


def ack_point(position: Position) -> MessageId | None:
    """The last whole entry before ``position`` (what a cumulative ack may cover);
    None when there is none to tell (``earliest``, or the first entry of a ledger,
    whose predecessor lies in an earlier ledger of unknown length)."""
    mid = position.message_id
    if mid is None or position.kind not in ("after", "from"):
        return None
    if position.kind == "after" and mid.batch_index < 0:
        return mid.with_batch_index(-1)
    if mid.entry <= 0:  # inside (or from) the first entry of a ledger
        return None
    return MessageId(mid.ledger, mid.entry - 1, mid.partition, -1)


def holds(mark_delete: MessageId | None, position: Position) -> bool:
    """Whether a subscription acknowledged up to ``mark_delete`` keeps everything
    from ``position`` on: it is at or before the first entry the stream still needs,
    or at the start of a later ledger (``L:-1``): Apache Pulsar moves a subscription
    acknowledged up to the last entry of a ledger there when it opens the next one
    (a broker restart, an unload), and a subscription made anew where it was
    expected (see :class:`~..client.last_ids.LastIds`) sits at the last message
    instead, unless the topic was empty then."""
    if mark_delete is None:
        return False
    mid = position.message_id
    if mid is None or position.kind not in ("after", "from"):
        return mark_delete.entry < 0  # nothing acknowledged in its ledger
    whole = position.kind == "after" and mid.batch_index < 0
    needed = (mid.ledger, mid.entry + 1 if whole else mid.entry)
    if mark_delete.entry < 0 and mark_delete.ledger > mid.ledger and whole:
        return True
    return (mark_delete.ledger, mark_delete.entry) < needed


class StreamSubscription:
    """The stream's durable subscription on the partitions it reads: their ends
    and mark-delete positions (:meth:`ends`), and its moves (:meth:`move`).
    Close it (the subscription stays on the broker)."""

    def __init__(self, client: PulsarClient, name: str) -> None:
        self.name = name
        self._ids: LastIds = client.last_ids(subscription=name)
        #: The entry each partition was last acknowledged up to (not sent again).
        self._acked: dict[str, MessageId] = {}

    @property
    def attached(self) -> int:
        """Consumers attached so far (the first trigger's, and those after failures)."""
        return self._ids.attached

    def ends(self, topics: list[str]) -> dict[str, PartitionEnd]:
        """Each partition's last message and the subscription's mark-delete position,
        asked all at once; the subscription is made on partitions that lack it."""
        names = [parse_topic(topic) for topic in topics]
        found = self._ids.ends(names)
        return {topic: found[name] for topic, name in zip(topics, names, strict=True)}

    def expect(self, positions: Offsets) -> None:
        """A checkpoint says the stream read these partitions up to ``positions``: their
        subscription should exist (a missing one is found out, not made silently at
        the earliest message)."""
        self._ids.expect([parse_topic(t) for t, p in positions.items() if p.message_id])

    def end(self, topic: str) -> PartitionEnd:
        """One partition's :meth:`ends`, keeping the other partitions' consumers."""
        name = parse_topic(topic)
        return self._ids.ends([name], close_others=False)[name]

    def move(self, positions: Offsets) -> None:
        """Acknowledge every partition up to the last whole entry before its position
        (see :func:`ack_point`); partitions with nothing to acknowledge are left."""
        acks = {}
        for topic, position in positions.items():
            point = ack_point(position)
            if point is not None and self._acked.get(topic) != point:
                acks[topic] = point
        if acks:
            self._ids.acknowledge({parse_topic(topic): point for topic, point in acks.items()})
            self._acked.update(acks)

    def close(self) -> None:
        self._ids.close()


def drop_subscription(options: Mapping[str, str], subscription: str) -> list[str]:
    """Delete a stream's durable subscription from every partition of the topics
    ``options`` name (the stream's own options: ``service.url``, ``topic`` /
    ``topics`` / ``topicsPattern``, authentication), releasing the messages it
    keeps. Stop the query first: a running query holds the subscription (its
    consumers are Exclusive: this waits for them up to the operation timeout, then
    fails with ConsumerBusy). Returns the partitions it was deleted from; partitions
    that no longer exist are not created for this.

    The name is in the query's progress (``sources[].latestOffset.subscription``),
    its log, and every offset file of its checkpoint.
    """
    parsed: PulsarOptions = parse_options(options)
    dropped = []
    with open_client(parsed, reuse=False) as client:
        for topic in resolve_topics(client, parsed):
            dropped.extend(client.unsubscribe(topic, subscription))
    log.info("dropped subscription %r from %d partitions", subscription, len(dropped))
    return dropped
