"""The stream writer: ``df.writeStream.format("pulsar")``, effectively once through
broker deduplication.

Every task of every micro-batch writes under a producer name fixed by the
query and the task's partition::

    <producerNamePrefix or "pulsar-spark">-<query id>-<partition id>

and gives row ``i`` of micro-batch ``b`` the sequence id ``b * 2**32 + i``.
The query id survives restarts from the checkpoint, so a retried task, or a
micro-batch replayed after a crash, sends the same rows under the same name
with the same sequence ids, and a broker with deduplication enabled drops
what it already has (the producer even skips, before sending, rows at or
below the broker's last sequence id for its name). Sequence ids grow with
the batch id, so nothing new is ever mistaken for a replay.

This needs deduplication enabled on the namespace or topic
(``pulsar-admin namespaces set-deduplication --enable``) and a deterministic
input (the rows of a micro-batch partition in the same order on a re-run, as
a Pulsar or Kafka source gives). Without broker deduplication the sink is
at-least-once: a retried task writes its rows again.

With ``deliveryGuarantee=exactly-once`` it needs neither: each task writes in a
transaction of its own (under broker-chosen names and sequence ids, so that a
deduplicating broker cannot take a retry's rows for the aborted attempt's), and
the driver's ``commit(messages, batchId)`` commits them through the query's
commit log (:mod:`.commit_log`), which makes a micro-batch replayed after a crash
commit nothing twice. ``abort`` aborts them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.txn import Transaction

from ..compat import require_spark
from ..connect import open_client
from ..errors import StreamWriteError
from ..writer import (
    EXACTLY_ONCE,
    PulsarArrowWriter,
    PulsarCommitMessage,
    end_transactions,
    txns_of,
)
from .commit_log import Record, commit_batch, log_topic

require_spark("streaming writes to Pulsar (DataSourceStreamArrowWriter)", (4, 1))

from pyspark.sql.datasource import (  # noqa: E402
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

__all__ = ["PulsarStreamWriter", "sequence_base"]

log = logging.getLogger(__name__)

#: Rows one task may write in one micro-batch (the low half of a sequence id).
ROWS_PER_BATCH = 1 << 32
_BATCH_ID = "streaming.sql.batchId"
_QUERY_ID = "sql.streaming.queryId"


def sequence_base(batch_id: int) -> int:
    """The sequence id of row 0 of micro-batch ``batch_id``."""
    if not 0 <= batch_id < (1 << 31):
        msg = f"micro-batch id {batch_id} is outside what sequence ids can encode"
        raise StreamWriteError(msg)
    return batch_id * ROWS_PER_BATCH


class PulsarStreamWriter(PulsarArrowWriter, DataSourceStreamArrowWriter):
    """Writes each micro-batch's tasks with deterministic names and sequence ids."""

    #: The sequence id of the task's row 0 in its micro-batch, and of its next row
    #: (set by :meth:`write`).
    _base = 0
    _next_row = 0

    def _task(self) -> tuple[str, int, int]:
        """(query id, partition id, batch id) of the running task."""
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty(_BATCH_ID) if context else None
        query = context.getLocalProperty(_QUERY_ID) if context else None
        if context is None or batch is None or query is None:
            msg = (
                "the pulsar stream writer runs in a streaming query's task, which names "
                "its query and micro-batch; none found"
            )
            raise StreamWriteError(msg)
        return query, context.partitionId(), int(batch)

    @property
    def _transactional(self) -> bool:
        return self.options.delivery_guarantee == EXACTLY_ONCE

    def check(self) -> None:
        """On the driver, as the query starts and at each micro-batch's commit (Spark
        makes the writer again for it): an exactly-once stream knows where its commit
        log goes."""
        if self._transactional:
            log_topic(self.options.transaction_log_topic, self.options.topic, "query")

    def _announce(self, client: PulsarClient, txn: Transaction) -> None:
        query, _, batch = self._task()
        registry = self._registry()
        registry.keep(client, query)
        registry.announce(client, query, batch, str(txn.id))

    def _producer_name(self) -> str | None:
        if self._transactional:
            return super()._producer_name()
        query, partition, _ = self._task()
        prefix = self.options.producer_name_prefix or "pulsar-spark"
        return f"{prefix}-{query}-{partition}"

    def _send(self, producer: object, table: pa.Table) -> int:
        if self._transactional:
            return super()._send(producer, table)
        first, self._next_row = self._next_row, self._next_row + table.num_rows
        if self._next_row - self._base > ROWS_PER_BATCH:
            msg = f"a task wrote more than {ROWS_PER_BATCH} rows in one micro-batch"
            raise StreamWriteError(msg)
        sent = producer.send_batch(table, first_sequence_id=first)  # type: ignore[attr-defined]
        return int(sent)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        query, _, batch = self._task()
        self._base = self._next_row = sequence_base(batch)
        message = super().write(iterator)
        message.query = query
        return message

    def commit(  # type: ignore[override]  # a stream writer's commit names its batch
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PulsarCommitMessage))
        if self._transactional:
            done = [m for m in messages if isinstance(m, PulsarCommitMessage) and m.query]
            if not done:
                return  # no task ran: nothing written
            query = done[0].query
            assert query is not None
            txns = tuple(m.txn for m in done if m.txn)
            topic = log_topic(self.options.transaction_log_topic, self.options.topic, query)
            with open_client(self.options, reuse=False) as client:
                record = Record(query, batchId, txns)
                commit_batch(client, topic, record, self._registry())
            log.info(
                "pulsar stream sink: micro-batch %d, %d messages committed in %d transactions",
                batchId,
                rows,
                len(txns),
            )
            return
        log.info("pulsar stream sink: micro-batch %d, %d messages acknowledged", batchId, rows)

    def abort(  # type: ignore[override]
        self, messages: list[WriterCommitMessage | None], batchId: int
    ) -> None:
        if self._transactional:
            with open_client(self.options, reuse=False) as client:
                count = end_transactions(client, txns_of(messages), commit=False)
            log.warning(
                "pulsar stream sink: micro-batch %d aborted; %d transactions aborted",
                batchId,
                count,
            )
            return
        log.warning(
            "pulsar stream sink: micro-batch %d aborted; a re-run sends its rows again "
            "(dropped by the broker when deduplication is on)",
            batchId,
        )
