"""The transaction registry of exactly-once sinks: every transaction a task opens, so that
the driver can abort those whose commit message never reached it.

A task attempt that dies (a killed Python worker, a lost executor) or loses to another
(speculation) never hands its transaction to the driver. Left open, that transaction
would hold back every reader of the partitions it wrote, everything written after it
included, until the broker times it out (``transactionTimeout``). So each task, right
after opening its transaction and before writing anything, records it in a registry
topic of the target's namespace (``transactionLogTopic``'s namespace when that is
given)::

    persistent://<tenant>/<namespace>/__pulsar_spark_txns
    {"owner": "<job id, or query id>", "batch": <micro-batch id, or -1>, "txn": "<id>"}

The driver notes where the registry ends before the tasks start (a batch job: when
it plans the write; a stream: in each micro-batch's commit record), reads what was
registered since then when the job or micro-batch commits, and aborts every
transaction of its own that it is not committing. A durable subscription per job or
query keeps those records on a broker without retention until the driver has read
them; a batch job deletes its own at the end, a stream moves its own forward.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.ids.message_id import MessageId

from .errors import PulsarWriteError

__all__ = ["REGISTRY_NAME", "Registry", "abort_all", "namespace_of", "registry_topic"]

log = logging.getLogger(__name__)

#: The registry's local name in its namespace.
REGISTRY_NAME = "__pulsar_spark_txns"


def namespace_of(topic: str) -> str:
    """``tenant/namespace`` of a topic name (``persistent://`` or short)."""
    rest = topic.split("://", 1)[-1]
    parts = rest.split("/")
    if len(parts) < 3:
        return "public/default"  # a short name: Pulsar's default namespace
    return "/".join(parts[:2])


def registry_topic(log_topic: str | None, target: str | None) -> str:
    """The registry of a sink writing to ``target`` (the ``topic`` option), or next to
    ``log_topic`` (``transactionLogTopic``) when given.

    Raises:
        PulsarWriteError: neither is known (a sink routing rows by their topic column).
    """
    anchor = log_topic or target
    if not anchor:
        msg = (
            "deliveryGuarantee=exactly-once without a topic option needs transactionLogTopic "
            "(its namespace holds the sink's transaction records)"
        )
        raise PulsarWriteError(msg)
    return f"persistent://{namespace_of(anchor)}/{REGISTRY_NAME}"


@dataclass(frozen=True)
class Registry:
    """The registry topic of one sink (see the module docstring)."""

    topic: str

    def hold(self, client: PulsarClient, owner: str) -> MessageId | None:
        """The durable subscription of ``owner`` (made at the registry's end when it does
        not exist), and where the registry ends now."""
        client.ensure_subscription(self.topic, _subscription(owner), earliest=False)
        return client.get_last_message_id(self.topic)

    def keep(self, client: PulsarClient, owner: str) -> None:
        """The durable subscription of ``owner``, made at the registry's end unless it
        exists (a stream's task, before its first record)."""
        client.ensure_subscription(self.topic, _subscription(owner), earliest=False)

    def position(self, client: PulsarClient) -> MessageId | None:
        """Where the registry ends now (None: it is empty)."""
        return client.get_last_message_id(self.topic)

    def announce(self, client: PulsarClient, owner: str, batch: int, txn: str) -> None:
        """In a task, before its first write: ``txn`` belongs to ``owner`` (micro-batch
        ``batch``; -1 for a batch job). Returns once the broker stored it."""
        record = json.dumps({"owner": owner, "batch": batch, "txn": txn}).encode()
        with client.create_producer(self.topic, batching=False) as producer:
            producer.send(record)
            producer.flush()

    def opened(
        self, client: PulsarClient, after: MessageId | None, owner: str, batch: int
    ) -> tuple[list[str], MessageId | None]:
        """The transactions ``owner`` registered for ``batch`` (or an earlier micro-batch)
        after ``after`` (None: from the start), and the registry's last id read
        (``after`` when nothing came)."""
        found: list[str] = []
        last = after
        start = "earliest" if after is None else after
        for rows in client.read_batches(self.topic, start=start, start_inclusive=False):
            ids = rows.column("messageId").to_pylist()
            for value, message_id in zip(rows.column("value").to_pylist(), ids, strict=True):
                last = MessageId.parse(message_id)
                record = _record(value)
                # A stream's earlier micro-batches that aborted count too: their
                # transactions are as orphaned as those of a dead attempt.
                if record and record["owner"] == owner and int(record["batch"]) <= batch:
                    found.append(str(record["txn"]))
        return found, last

    def moved(self, client: PulsarClient, owner: str, upto: MessageId | None) -> None:
        """Lets retention take ``owner``'s records up to ``upto``."""
        if upto is not None:
            client.acknowledge_cumulative(self.topic, _subscription(owner), upto)

    def release(self, client: PulsarClient, owner: str) -> None:
        """Deletes ``owner``'s subscription (a batch job that ended)."""
        try:
            client.unsubscribe(self.topic, _subscription(owner))
        except PulsarError as exc:
            log.info("pulsar sink: dropping %s's registry subscription: %s", owner, exc)


def abort_all(client: PulsarClient, txns: Iterable[str]) -> int:
    """Aborts each of ``txns``; how many did. One that fails is logged and left to time
    out."""
    aborted = 0
    for txn in txns:
        try:
            client.transaction(txn).abort()
        except PulsarError as exc:  # noqa: PERF203 - abort them all; they time out anyway
            log.warning("pulsar sink: aborting transaction %s: %s", txn, exc)
        else:
            aborted += 1
    return aborted


def _subscription(owner: str) -> str:
    return f"pulsar-spark-txns-{owner}"


def _record(value: bytes | None) -> dict[str, Any] | None:
    """A registry record; None (skipped, with a WARNING) for a message that is not one."""
    try:
        found = json.loads(value or b"")
        if isinstance(found, dict) and {"owner", "batch", "txn"} <= found.keys():
            return found
    except ValueError:
        pass
    log.warning("pulsar sink: a message of the transaction registry is not a record: %r", value)
    return None
