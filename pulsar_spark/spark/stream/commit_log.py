"""The commit log of an exactly-once stream sink: which transactions each micro-batch
committed, where a replay of that micro-batch finds them.

Spark writes a micro-batch's commit to its checkpoint only after the sink's
``commit(messages, batchId)`` returned. A driver that dies between the two runs the
micro-batch again on restart, with new tasks writing the same rows in new
transactions. Without broker deduplication nothing in the topic tells those rows
from the first run's, so the sink records, before it commits anything, one message
in a topic of the query's own (``transactionLogTopic``)::

    {"query": "<query id>", "batch": <batch id>, "txns": ["<most>:<least>", ...],
     "after": "<the transaction registry's last id read>"}

and its commit of micro-batch ``b`` goes:

1. the transactions the query's tasks registered for ``b`` (:mod:`..txn_registry`)
   since the last record's ``after`` (before the query's first record: all the
   registry holds, which the query's own subscription keeps from its first task on)
   are read: those of task attempts that died or lost are aborted (none of their rows
   ever shows, nor holds readers back).
2. the log's last record says ``b`` (or later): this is a replay. Its recorded
   transactions are committed (again: one the coordinator no longer knows was
   committed before, as a commit whose answer was lost), and this run's
   transactions are aborted: each row once.
3. otherwise the record of ``b`` is written and acknowledged by the broker, then
   each transaction committed. A driver that dies in between leaves the record: the
   replay (2) finishes the commit.

A recorded transaction that the coordinator aborted meanwhile (it timed out before
the driver came back: ``transactionTimeout`` too short) fails the query, naming the
micro-batch whose rows are lost, rather than going on silently.

The log keeps only what is needed: a durable subscription of its own holds the last
record against retention (a stock broker deletes what no subscription needs), and
each new record acknowledges the one before.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.txn import TransactionFailed
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import ServerError
from pulsar_spark.protocol.ids.message_id import MessageId

from ..errors import StreamWriteError
from ..txn_registry import Registry, abort_all, move_forward, namespace_of

__all__ = ["SUBSCRIPTION", "CommitLog", "Record", "log_topic"]

log = logging.getLogger(__name__)

#: The durable subscription that keeps a commit log's last record.
SUBSCRIPTION = "pulsar-spark-commit-log"
#: The default log topic's local name; ``{query}`` is the query's id.
DEFAULT_NAME = "__pulsar_spark_txn_log-{query}"


def log_topic(setting: str | None, target: str | None, query: str) -> str:
    """The log topic of ``query``: ``setting`` (``transactionLogTopic``, ``{query}``
    replaced), else :data:`DEFAULT_NAME` in the namespace of ``target`` (the ``topic``
    option)."""
    if setting:
        return setting.replace("{query}", query)
    if not target:
        msg = (
            "an exactly-once stream without a topic option needs transactionLogTopic "
            "(the topic its commit log goes to; {query} stands for the query's id)"
        )
        raise StreamWriteError(msg)
    return f"persistent://{namespace_of(target)}/{DEFAULT_NAME.format(query=query)}"


@dataclass(frozen=True)
class Record:
    """One micro-batch's commit: its query, batch id and transactions."""

    query: str
    batch: int
    txns: tuple[str, ...]
    #: The last transaction registry record read when it was written.
    after: str | None = None

    def encode(self) -> bytes:
        found = {"query": self.query, "batch": self.batch, "txns": self.txns, "after": self.after}
        return json.dumps(found).encode()

    @classmethod
    def decode(cls, data: bytes, where: str) -> Record:
        try:
            found = json.loads(data)
            after = found.get("after")
            return cls(
                str(found["query"]),
                int(found["batch"]),
                tuple(found["txns"]),
                None if after is None else str(after),
            )
        except (ValueError, KeyError, TypeError) as exc:
            msg = f"{where} is not a commit record of the pulsar stream sink: {data[:200]!r}"
            raise StreamWriteError(msg) from exc


class CommitLog:
    """The commit log of one query in ``topic`` (see the module docstring)."""

    def __init__(self, client: PulsarClient, topic: str) -> None:
        self.client = client
        self.topic = topic

    def last(self) -> tuple[MessageId, Record] | None:
        """The last record and its id; None when the log is empty."""
        last = self.client.get_last_message_id(self.topic)
        if last is None:
            return None
        for batch in self.client.read_batches(self.topic, start=last, end=last):
            if batch.num_rows:
                value = batch.column("value")[batch.num_rows - 1].as_py()
                return last, Record.decode(value, f"{self.topic} message {last}")
        msg = f"{self.topic}: its last message {last} could not be read"
        raise StreamWriteError(msg)

    def append(self, record: Record, previous: MessageId | None) -> None:
        """Writes ``record`` (acknowledged by the broker when this returns), then lets
        retention take the records before it. The log's subscription is made before its
        first record; after that, each acknowledgement keeps it (or makes it again). That
        acknowledgement is bookkeeping: a failure is logged (the next record's moves the
        subscription further), since the record is written and the commit must go on."""
        if previous is None:
            self.client.ensure_subscription(self.topic, SUBSCRIPTION)
        with self.client.create_producer(self.topic, batching=False) as producer:
            producer.send(record.encode())
            producer.flush()
        if previous is not None:
            move_forward(self.client, self.topic, SUBSCRIPTION, previous)


def commit_batch(
    client: PulsarClient,
    topic: str,
    record: Record,
    registry: Registry,
) -> None:
    """Commits micro-batch ``record.batch``'s transactions, once across replays (see
    the module docstring)."""
    commit_log = CommitLog(client, topic)
    found = commit_log.last()
    start = None  # the query's first commit: its subscription keeps all its records
    if found is not None and found[1].after is not None:
        start = MessageId.parse(found[1].after)
    opened, last = registry.opened(client, start, record.query, record.batch)
    mine = set(record.txns)
    orphans = tuple(txn for txn in dict.fromkeys(opened) if txn not in mine)
    if orphans:
        log.warning(
            "pulsar stream sink: micro-batch %d: aborting %d transactions of task attempts "
            "that did not finish: %s",
            record.batch,
            len(orphans),
            orphans,
        )
        abort_all(client, orphans)
    record = Record(record.query, record.batch, record.txns, None if last is None else str(last))
    if found is not None and found[1].query == record.query and found[1].batch >= record.batch:
        _, earlier = found
        if earlier.batch == record.batch:
            log.warning(
                "pulsar stream sink: micro-batch %d was committed by an earlier run (%d "
                "transactions, recorded in %s); finishing that commit and aborting this "
                "run's %d",
                record.batch,
                len(earlier.txns),
                topic,
                len(record.txns),
            )
            _commit_all(client, earlier, again=True)
        abort_all(client, record.txns)
        registry.moved(client, record.query, last)
        return
    commit_log.append(record, None if found is None else found[0])
    _commit_all(client, record, again=False)
    registry.moved(client, record.query, last)


def _commit_all(client: PulsarClient, record: Record, *, again: bool) -> None:
    for txn in record.txns:
        try:
            client.transaction(txn).commit()
        except ServerError as exc:  # noqa: PERF203 - one commit after another
            if again and exc.code == pb.TransactionNotFound:
                continue  # committed by the earlier run
            msg = (
                f"micro-batch {record.batch}: committing transaction {txn} failed ({exc}); "
                "its rows are not in the topic"
            )
            if exc.code == pb.InvalidTxnStatus:
                msg += " (it was aborted: it timed out first; raise transactionTimeout)"
            raise StreamWriteError(msg) from exc
        except TransactionFailed as exc:
            msg = f"micro-batch {record.batch}: transaction {txn}: {exc}"
            raise StreamWriteError(msg) from exc
