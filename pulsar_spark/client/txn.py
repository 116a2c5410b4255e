"""Transactions: the client's side of Pulsar's transaction coordinators, and
:class:`Transaction`, one transaction as a writer holds it.

A coordinator is a partition of ``persistent://pulsar/system/transaction_coordinator_assign``:
coordinator N lives on the broker that owns partition N. :class:`Coordinators` finds
how many there are (a broker without transactions has none: pulsar-lite, or Apache
Pulsar with ``transactionCoordinatorEnabled=false``, which raises
:class:`TransactionsUnavailable`), connects to one on first use and loads it there
with TC_CLIENT_CONNECT, then sends NEW_TXN (round-robin over the coordinators),
ADD_PARTITION_TO_TXN and END_TXN to the coordinator a transaction's id names::

    new_transaction(timeout)    NEW_TXN (timeout in ms)          -> Transaction (OPEN)
    Transaction.register(p)     ADD_PARTITION_TO_TXN, once per partition, before its
                                first send
    Transaction.commit()        END_TXN COMMIT; answered once every partition has its
                                commit marker: then the messages become visible at once
    Transaction.abort()         END_TXN ABORT; the messages are never delivered

A request that meets TransactionCoordinatorNotFound (the coordinator moved, or its
broker restarted and has not loaded it yet), a closed connection or a timeout is sent
again, through a new lookup, until the operation timeout. Coordinators forget a
transaction once it ended, so an END_TXN sent again after its first answer was lost
may get TransactionNotFound: a commit takes that as done (the first one went through,
as Flink's committer does), an abort too. Any other error fails the operation.

A writer that cannot know whether a send inside a transaction was stored (its
receipt never came: the connection dropped, the broker restarted) never sends it
again in that transaction (without broker deduplication it could be stored twice):
it marks the transaction failed (:meth:`Transaction.fail`), and :meth:`commit` then
aborts it and raises :class:`TransactionFailed`. What it held is written again in a
new transaction.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import PulsarError, ServerError, server_error
from pulsar_spark.protocol.txn import TxnId

from .errors import ClientError
from .names import TopicName, parse_topic
from .net.connection import Connection
from .net.dispatch import IdKind
from .net.lookup import LookupService
from .retry import Action, Backoff, classify, retried

__all__ = [
    "ASSIGN_TOPIC",
    "Coordinators",
    "Transaction",
    "TransactionFailed",
    "TransactionState",
    "TransactionsUnavailable",
]

log = logging.getLogger(__name__)

#: The partitioned topic whose partitions place the transaction coordinators.
ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
#: Protocol versions from which a coordinator is loaded by TC_CLIENT_CONNECT (PIP-98).
_TC_CONNECT_FROM = 19
#: Seconds one attempt of a coordinator request waits for its answer at most.
_ATTEMPT_TIMEOUT = 10.0


class TransactionsUnavailable(ClientError):
    """The broker has no transaction coordinator (transactions are off, or it is
    pulsar-lite): nothing transactional can be written there."""


class TransactionFailed(ClientError):
    """A transaction that cannot commit: a send in it failed or its receipt is in
    doubt, or the coordinator ended it (timed out). It was aborted (or will be, at its
    timeout); write its messages again in a new transaction (retrying in this one
    cannot succeed)."""


class TransactionState(enum.Enum):
    """Where a transaction is, as this client knows it."""

    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"
    FAILED = "failed"  # an operation in it failed: it can only abort


class Coordinators:
    """The transaction coordinators of a cluster, reached through ``lookup``."""

    def __init__(self, lookup: LookupService, *, operation_timeout: float) -> None:
        self.lookup = lookup
        self.operation_timeout = operation_timeout
        self._lock = threading.Lock()
        self._count: int | None = None
        self._connections: dict[int, Connection] = {}
        self._next = itertools.count()

    # -- requests ------------------------------------------------------------------

    def count(self) -> int:
        """How many coordinators there are (the assign topic's partitions).

        Raises:
            TransactionsUnavailable: none (transactions are off on the broker).
        """
        with self._lock:
            if self._count is None:
                found = self._assign_partitions()
                if found <= 0:
                    why = "it has no transaction coordinator assign topic"
                    raise self._unavailable(why)
                self._count = found
            return self._count

    def _assign_partitions(self) -> int:
        """The assign topic's partition count, asked again while the failure allows
        (a broker restarting), until the operation timeout."""
        assign = parse_topic(ASSIGN_TOPIC)
        try:
            return retried(
                lambda: self.lookup.partitions(assign),
                self.operation_timeout,
                "coordinator lookup",
                maximum=2.0,
            )
        except ServerError as exc:
            if exc.code != pb.TopicNotFound:
                raise
            raise self._unavailable(str(exc)) from exc

    def new_transaction(self, timeout: float) -> Transaction:
        """A new transaction, aborted by its coordinator ``timeout`` seconds from now
        unless it ended first.

        Raises:
            TransactionsUnavailable: transactions are off on the broker.
            PulsarError: the coordinator's error, or no answer within the operation
                timeout.
        """
        timeout_ms = int(timeout * 1000)
        if timeout_ms < 1000:
            msg = f"transaction timeout {timeout!r} s: at least 1 s"
            raise ClientError(msg)
        tc_id = next(self._next) % self.count()
        response = self._request(
            tc_id,
            lambda rid: commands.new_txn(rid, tc_id, timeout_ms),
            "NEW_TXN",
            lambda frame: frame.command.newTxnResponse,
        )
        txn = TxnId(int(response.txnid_most_bits), int(response.txnid_least_bits))
        log.debug("transaction %s opened (timeout %.0f s)", txn, timeout)
        return Transaction(self, txn, timeout=timeout)

    def transaction(self, txn: TxnId) -> Transaction:
        """A transaction opened elsewhere (by a task), to commit or abort it here."""
        return Transaction(self, txn, timeout=None)

    def add_partitions(self, txn: TxnId, partitions: list[str]) -> None:
        """Registers ``partitions`` in ``txn`` (before its first send to each)."""
        self._request(
            txn.most,
            lambda rid: commands.add_partition_to_txn(rid, txn, partitions),
            f"ADD_PARTITION_TO_TXN of {txn}",
            lambda frame: frame.command.addPartitionToTxnResponse,
        )

    def end(self, txn: TxnId, *, commit: bool) -> bool:
        """Ends ``txn``. Returns False when the coordinator no longer knew it after a
        first attempt whose answer was lost (it ended then)."""
        attempts = [0]
        action = "commit" if commit else "abort"

        def build(request_id: int) -> pb.BaseCommand:
            attempts[0] += 1
            return commands.end_txn(request_id, txn, commit=commit)

        try:
            self._request(
                txn.most, build, f"END_TXN ({action}) of {txn}", lambda f: f.command.endTxnResponse
            )
        except ServerError as exc:
            if exc.code == pb.TransactionNotFound and attempts[0] > 1:
                log.warning(
                    "transaction %s: the coordinator no longer knows it after a %s whose "
                    "answer was lost; taken as done by that %s",
                    txn,
                    action,
                    action,
                )
                return False
            raise
        return True

    def close(self) -> None:
        """Forgets the coordinator connections (the pool owns and closes them)."""
        with self._lock:
            self._connections.clear()

    # -- plumbing -----------------------------------------------------------------

    def _unavailable(self, why: str) -> TransactionsUnavailable:
        msg = (
            f"transactions are not available on {self.lookup.pool.service_url}: {why}. They "
            "need Apache Pulsar with transactionCoordinatorEnabled=true (and "
            "systemTopicEnabled=true); pulsar-lite has none"
        )
        return TransactionsUnavailable(msg)

    def _request(
        self,
        tc_id: int,
        build: Callable[[int], pb.BaseCommand],
        what: str,
        response_of: Callable[[Any], Any],
    ) -> Any:
        """Sends ``build(request_id)`` to coordinator ``tc_id`` and returns its response,
        sent again through a new lookup while the failure allows, until the operation
        timeout."""
        deadline = time.monotonic() + self.operation_timeout
        backoff = Backoff(maximum=2.0)
        while True:
            try:
                conn = self._connection(tc_id)
                # Each attempt gets a share of the deadline: a coordinator still recovering
                # after a broker restart may leave a request unanswered, which the next
                # attempt, on a new connection, gets past.
                wait = max(1.0, min(deadline - time.monotonic(), _ATTEMPT_TIMEOUT))
                frame = conn.request(build(conn.new_id(IdKind.REQUEST)), timeout=wait)
                response = response_of(frame)
                if response.HasField("error"):
                    context = f"{what} (coordinator {tc_id})"
                    raise server_error(response.error, response.message, context=context)
                return response
            except PulsarError as exc:  # noqa: PERF203 (a retry loop)
                if _transactions_off(exc):
                    raise self._unavailable(str(exc)) from exc
                delay = backoff.next()
                if classify(exc) is Action.FATAL or time.monotonic() + delay > deadline:
                    raise
                log.info("%s: %s; again in %.1f s", what, exc, delay)
                with self._lock:
                    self._connections.pop(tc_id, None)
                time.sleep(delay)

    def _connection(self, tc_id: int) -> Connection:
        with self._lock:
            conn = self._connections.get(tc_id)
        if conn is not None and not conn.closed:
            return conn
        if tc_id >= self.count():
            msg = f"transaction coordinator {tc_id} does not exist (there are {self.count()})"
            raise ClientError(msg)
        topic: TopicName = parse_topic(ASSIGN_TOPIC).partition_name(tc_id)
        conn = self.lookup.connection_for(topic)
        if conn.protocol_version >= _TC_CONNECT_FROM:
            request = commands.tc_client_connect(conn.new_id(IdKind.REQUEST), tc_id)
            frame = conn.request(request, timeout=_ATTEMPT_TIMEOUT)
            response = frame.command.tcClientConnectResponse
            if response.HasField("error"):
                raise server_error(
                    response.error, response.message, context=f"coordinator {tc_id} connect"
                )
        with self._lock:
            self._connections[tc_id] = conn
        return conn


def _transactions_off(exc: PulsarError) -> bool:
    """Whether a broker answered that transactions are not enabled."""
    return (
        isinstance(exc, ServerError)
        and exc.code == pb.NotAllowedError
        and "not enabled" in exc.broker_message.lower()
    )


class Transaction:
    """One transaction: its id, the partitions registered in it, and its end.

    Thread-safe: the producers of a writer register their partitions from their own
    threads. A transaction whose operation failed can only abort.
    """

    def __init__(self, coordinators: Coordinators, txn: TxnId, *, timeout: float | None) -> None:
        self.coordinators = coordinators
        self.id = txn
        self.timeout = timeout
        self.state = TransactionState.OPEN
        self.failure: str | None = None
        self._partitions: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Transaction({self.id}, {self.state.value})"

    def register(self, partition: str) -> None:
        """Registers ``partition`` (a partition or non-partitioned topic) before the
        transaction's first send to it; once per partition.

        Raises:
            TransactionFailed: the transaction is no longer open.
        """
        with self._lock:
            self._check_open(f"write to {partition}")
            if partition in self._partitions:
                return
            self.coordinators.add_partitions(self.id, [partition])
            self._partitions.add(partition)

    @property
    def partitions(self) -> frozenset[str]:
        """The partitions registered so far."""
        with self._lock:
            return frozenset(self._partitions)

    def fail(self, why: str) -> None:
        """Marks the transaction failed: ``why`` (a send that failed, or whose receipt is
        in doubt). It can then only abort."""
        with self._lock:
            if self.state is TransactionState.OPEN:
                self.state, self.failure = TransactionState.FAILED, why
                log.warning("transaction %s failed: %s", self.id, why)

    def commit(self) -> None:
        """Commits: its messages become visible, all at once.

        Raises:
            TransactionFailed: an operation in it failed (it is aborted now), or it is
                no longer open.
            PulsarError: the coordinator's error (InvalidTxnStatus: it timed out and was
                aborted; TransactionNotFound: it never existed or ended long ago).
        """
        with self._lock:
            if self.state is TransactionState.FAILED:
                why = self.failure
                self._abort_locked()
                msg = f"transaction {self.id} was aborted, not committed: {why}"
                raise TransactionFailed(msg)
            self._check_open("commit")
            self.coordinators.end(self.id, commit=True)
            self.state = TransactionState.COMMITTED

    def abort(self) -> None:
        """Aborts: none of its messages is ever delivered. Aborting one that ended
        (timed out, or aborted before) is not an error."""
        with self._lock:
            if self.state in (TransactionState.ABORTED, TransactionState.COMMITTED):
                if self.state is TransactionState.COMMITTED:
                    msg = f"transaction {self.id} is committed: it cannot abort"
                    raise TransactionFailed(msg)
                return
            self._abort_locked()

    def _abort_locked(self) -> None:
        try:
            self.coordinators.end(self.id, commit=False)
        except ServerError as exc:
            if exc.code not in (pb.TransactionNotFound, pb.InvalidTxnStatus):
                raise
            log.info("transaction %s: abort found it ended already (%s)", self.id, exc)
        self.state = TransactionState.ABORTED

    def _check_open(self, what: str) -> None:
        if self.state is not TransactionState.OPEN:
            msg = f"transaction {self.id} is {self.state.value}: cannot {what}"
            if self.failure:
                msg += f" ({self.failure})"
            raise TransactionFailed(msg)
