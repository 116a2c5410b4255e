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

A batch job's driver also records its own course, so that a driver dying in the middle
of the job's commit does not leave the job partly visible::

    {"owner": "<job>", "batch": -1, "hold": <transactionTimeout ms>}   planning
    {"owner": "<job>", "batch": -1, "commit": ["<id>", ...]}           the decision
    {"owner": "<job>", "batch": -1, "done": "committed" | "aborted"}   the end

While it commits, the driver holds the job's subscription (a consumer kept attached:
:meth:`PulsarClient.hold_subscription`), a lock the broker frees when the driver's
connection ends. It writes the decision before it commits the first transaction, and
``done`` after the last; once decided, the job's transactions are never aborted. The
next exactly-once batch job on the namespace, as it plans, reads the registry from its
start (:meth:`Registry.recover`): a decision with no ``done`` whose subscription it can
hold is a commit whose driver died (or failed) midway, and it commits the rest while
they are open (``transactionTimeout``; a stream's own commit log does the same for its
micro-batches). A hold older than its timeout plus :data:`ABANDONED_AFTER` with neither
a decision nor ``done`` is a job whose driver died before committing (its transactions
timed out): its subscription, which would keep the registry's records from being
trimmed, is deleted.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import PulsarError, ServerError
from pulsar_spark.protocol.ids.message_id import MessageId

from .errors import PulsarWriteError

if TYPE_CHECKING:
    from pulsar_spark.client.read.subscription import SubscriptionHold

__all__ = [
    "ABANDONED_AFTER",
    "REGISTRY_NAME",
    "Recovered",
    "Registry",
    "abort_all",
    "namespace_of",
    "registry_topic",
]

log = logging.getLogger(__name__)

#: The registry's local name in its namespace.
REGISTRY_NAME = "__pulsar_spark_txns"
#: Seconds past its transaction timeout after which a batch job that holds its place
#: with neither a decision nor ``done`` is taken as dead (its transactions timed out).
ABANDONED_AFTER = 86_400.0


@dataclass
class Recovered:
    """What :meth:`Registry.recover` found and did, for one job."""

    owner: str
    #: Transactions of an interrupted commit, committed now.
    committed: list[str] = field(default_factory=list)
    #: Ended already (TransactionNotFound): committed by the job before it died.
    ended: list[str] = field(default_factory=list)
    #: Aborted (InvalidTxnStatus): they timed out before anyone finished the commit.
    lost: list[str] = field(default_factory=list)
    #: Left for a later recovery (the coordinator could not be reached).
    failed: list[str] = field(default_factory=list)
    #: A dead job's subscription deleted (no commit to finish).
    abandoned: bool = False


@dataclass
class _Course:
    """A batch job's course in the registry (its ``hold``, decision and ``done``)."""

    hold_ms: int | None = None
    timeout_ms: int = 0
    #: The decision's transactions (None: no decision recorded).
    commit: list[str] | None = None
    done: bool = False


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

    def hold(
        self, client: PulsarClient, owner: str, timeout_ms: int | None = None
    ) -> MessageId | None:
        """The durable subscription of ``owner`` (made at the registry's end when it does
        not exist), and where the registry ended before it; a batch job (``timeout_ms``,
        its transactions' timeout) records its ``hold`` too."""
        client.ensure_subscription(self.topic, _subscription(owner), earliest=False)
        last = client.get_last_message_id(self.topic)
        if timeout_ms is not None:
            self._append(client, {"owner": owner, "batch": -1, "hold": timeout_ms})
        return last

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
        self._append(client, {"owner": owner, "batch": batch, "txn": txn})

    def decide(self, client: PulsarClient, owner: str, txns: list[str]) -> None:
        """A batch job's decision to commit ``txns``, stored before the first commit."""
        self._append(client, {"owner": owner, "batch": -1, "commit": txns})

    def lock(self, client: PulsarClient, owner: str) -> SubscriptionHold:
        """Holds ``owner``'s subscription (see the module docstring).

        Raises:
            ServerError: ConsumerBusy when another driver holds it.
        """
        return client.hold_subscription(self.topic, _subscription(owner))

    def finish(
        self, client: PulsarClient, owner: str, how: str, hold: SubscriptionHold | None = None
    ) -> None:
        """A batch job ended (``how``: committed, aborted or abandoned): its ``done``
        record, then its subscription deleted (through ``hold`` when held).

        Bookkeeping only, so a broker failure is logged rather than raised: what the job
        did is done. Without its ``done`` record, a committed job's decision is committed
        again by a later job's :meth:`recover` (each transaction counting as committed
        before); the subscription is deleted whether or not the record was stored."""
        try:
            self._append(client, {"owner": owner, "batch": -1, "done": how})
        except PulsarError as exc:
            _log_bookkeeping(
                exc,
                "pulsar sink: job %s %s, but recording it in %s failed (%s)%s",
                owner,
                how,
                self.topic,
                exc,
                "; the next exactly-once batch job writing to this namespace commits its "
                "decision again and records it"
                if how == "committed"
                else "",
            )
        if hold is not None and hold.held:
            try:
                hold.delete()  # ends the hold, whatever the broker answers
                return
            except PulsarError as exc:
                log.info("pulsar sink: deleting %s's registry subscription: %s", owner, exc)
        self.release(client, owner)

    def decided(self, client: PulsarClient, owner: str, after: MessageId | None) -> bool:
        """Whether ``owner`` recorded a commit decision after ``after``."""
        return any(
            record and record["owner"] == owner and "commit" in record
            for _, _, record in self._records(client, after)
        )

    def _records(
        self, client: PulsarClient, after: MessageId | None
    ) -> Iterator[tuple[MessageId, int, dict[str, Any] | None]]:
        """(id, publish time in µs, record or None when not one) of each message after
        ``after`` (None: from the start)."""
        start = "earliest" if after is None else after
        for rows in client.read_batches(self.topic, start=start, start_inclusive=False):
            ids = rows.column("messageId").to_pylist()
            times = rows.column("publishTime").cast("int64").to_pylist()
            values = rows.column("value").to_pylist()
            for message_id, at, value in zip(ids, times, values, strict=True):
                yield MessageId.parse(message_id), at, _record(value)

    def _append(self, client: PulsarClient, record: dict[str, Any]) -> None:
        """Stores ``record``; returns once the broker has it."""
        with client.create_producer(self.topic, batching=False) as producer:
            producer.send(json.dumps(record).encode())
            producer.flush()

    def opened(
        self, client: PulsarClient, after: MessageId | None, owner: str, batch: int
    ) -> tuple[list[str], MessageId | None]:
        """The transactions ``owner`` registered for ``batch`` (or an earlier micro-batch)
        after ``after`` (None: from the start), and the registry's last id read
        (``after`` when nothing came)."""
        found: list[str] = []
        last = after
        for message_id, _, record in self._records(client, after):
            last = message_id
            # A stream's earlier micro-batches that aborted count too: their
            # transactions are as orphaned as those of a dead attempt.
            if (
                record
                and "txn" in record
                and record["owner"] == owner
                and int(record["batch"]) <= batch
            ):
                found.append(str(record["txn"]))
        return found, last

    def recover(self, client: PulsarClient, me: str) -> list[Recovered]:
        """Finishes the interrupted commits of other batch jobs, and deletes the
        subscriptions of dead ones (see the module docstring); what it did, by job."""
        courses: dict[str, _Course] = {}
        for _, at, record in self._records(client, None):
            if record is None or record["owner"] == me or int(record["batch"]) != -1:
                continue
            course = courses.setdefault(str(record["owner"]), _Course())
            if "hold" in record:
                course.hold_ms, course.timeout_ms = at // 1000, int(record["hold"])
            elif "commit" in record:
                course.commit = list(record["commit"])
            elif "done" in record:
                course.done = True
        now_ms = time.time() * 1000
        found = []
        for owner, course in courses.items():
            if course.done:
                continue
            if course.commit is not None:
                recovered = self._finish_commit(client, owner, course.commit)
            elif course.hold_ms is not None and (
                now_ms - course.hold_ms >= course.timeout_ms + ABANDONED_AFTER * 1000
            ):
                recovered = self._abandon(client, owner)
            else:
                continue
            if recovered is not None:
                found.append(recovered)
        return found

    def _held(self, client: PulsarClient, owner: str) -> SubscriptionHold | None:
        """``owner``'s subscription held, or None while its driver holds it."""
        try:
            return self.lock(client, owner)
        except ServerError as exc:
            if exc.code != pb.ConsumerBusy:
                raise
            return None

    def _finish_commit(self, client: PulsarClient, owner: str, txns: list[str]) -> Recovered | None:
        """Commits what is left of ``owner``'s decision, unless its driver is at it;
        ``done`` unless some transaction could not be reached (a later recovery tries
        again)."""
        hold = self._held(client, owner)
        if hold is None:
            return None
        with hold:
            done = Recovered(owner)
            for txn in txns:
                getattr(done, _commit_left(client, owner, txn)).append(txn)  # its outcome
            if not done.failed:
                self.finish(client, owner, "committed", hold)
        return done

    def _abandon(self, client: PulsarClient, owner: str) -> Recovered | None:
        hold = self._held(client, owner)
        if hold is None:
            return None
        with hold:
            self.finish(client, owner, "abandoned", hold)
        return Recovered(owner, abandoned=True)

    def moved(self, client: PulsarClient, owner: str, upto: MessageId | None) -> None:
        """Lets retention take ``owner``'s records up to ``upto``. Bookkeeping only: a
        failure is logged, and the next call moves the subscription further."""
        if upto is not None:
            move_forward(client, self.topic, _subscription(owner), upto)

    def release(self, client: PulsarClient, owner: str) -> None:
        """Deletes ``owner``'s subscription (a batch job that ended)."""
        try:
            client.unsubscribe(self.topic, _subscription(owner))
        except PulsarError as exc:
            _log_bookkeeping(
                exc,
                "pulsar sink: deleting %s's subscription %r of %s failed (%s); until it is "
                "deleted (pulsar-admin topics unsubscribe), it keeps the registry's records",
                owner,
                _subscription(owner),
                self.topic,
                exc,
            )


def move_forward(client: PulsarClient, topic: str, subscription: str, upto: MessageId) -> None:
    """Acknowledges ``topic``'s messages up to ``upto`` on ``subscription``, letting
    retention take them: bookkeeping after a commit, so a broker failure is logged (the
    next move goes further), never raised into a commit whose rows are written."""
    try:
        client.acknowledge_cumulative(topic, subscription, upto)
    except PulsarError as exc:
        _log_bookkeeping(
            exc,
            "pulsar sink: moving subscription %r of %s to %s failed (%s); the next commit "
            "moves it further",
            subscription,
            topic,
            upto,
            exc,
        )


def _log_bookkeeping(exc: PulsarError, msg: str, *args: object) -> None:
    """A failed step of bookkeeping: a warning, or an error when retrying cannot help
    (an authorization failure, say)."""
    log.log(logging.WARNING if exc.retriable else logging.ERROR, msg, *args)


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


def _commit_left(client: PulsarClient, owner: str, txn: str) -> str:
    """Commits ``txn`` of ``owner``'s interrupted commit: ``committed``, ``ended``
    (TransactionNotFound: it was committed before), ``lost`` (InvalidTxnStatus: it timed
    out) or ``failed`` (logged; a later recovery tries again)."""
    try:
        client.transaction(txn).commit()
    except ServerError as exc:
        if exc.code == pb.TransactionNotFound:
            return "ended"
        if exc.code == pb.InvalidTxnStatus:
            return "lost"
        log.warning("pulsar sink: finishing %s's commit: %s: %s", owner, txn, exc)
    except PulsarError as exc:
        log.warning("pulsar sink: finishing %s's commit: %s: %s", owner, txn, exc)
    else:
        return "committed"
    return "failed"


def _subscription(owner: str) -> str:
    return f"pulsar-spark-txns-{owner}"


def _record(value: bytes | None) -> dict[str, Any] | None:
    """A registry record; None (skipped, with a WARNING) for a message that is not one."""
    try:
        found = json.loads(value or b"")
        if (
            isinstance(found, dict)
            and {"owner", "batch"} <= found.keys()
            and found.keys() & {"txn", "hold", "commit", "done"}
        ):
            return found
    except ValueError:
        pass
    log.warning("pulsar sink: a message of the transaction registry is not a record: %r", value)
    return None
