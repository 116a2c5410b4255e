"""The batch writer: ``df.write.format("pulsar").mode("append").save()``.

Each task gets Arrow batches of its rows, sends them through one producer per
topic (partitioned topics route keys like the Java client) and returns only
once the broker has acknowledged every message; a failed send fails the task
with the broker's error. Delivery is at-least-once: a task that fails after
some receipts, or is retried, or a job that is run again, writes those rows
again (the topic cannot take them back).

With ``deliveryGuarantee=exactly-once`` each task writes in a transaction of its own
(:mod:`pulsar_spark.client.txn`), registered first in the namespace's transaction
registry (:mod:`.txn_registry`), and hands its id to the driver in its commit
message; the driver commits them all when the job commits, and aborts them when it
aborts. A task that fails aborts its own; the transaction of a task attempt whose
message never reached the driver (a killed worker, a speculative attempt that lost)
is found in the registry and aborted when the job ends. A driver that dies before it
commits leaves nothing visible (the transactions time out, ``transactionTimeout``).
The driver commits the transactions one by one, after recording its decision in the
registry: if it dies in the middle, the next exactly-once batch job on the namespace
commits the rest as it plans (:meth:`.txn_registry.Registry.recover`), so the job's
rows all show as long as that job comes before the transactions time out.

Typed values (``schemaMode=auto``, the default): a ``value`` that is not
binary is encoded with the schema :mod:`.write_schema` plans for its topic
(the topic's own when the DataFrame fits it, else one derived from the
DataFrame), which the producer registers; the topic option's plan is made on
the driver, so a DataFrame that does not fit fails before any task runs.
StreamNative's columns (``__topic``, ``__key``..., and the columns that make
up its value) are mapped to these first (:mod:`.streamnative_rows`); a DataFrame
without ``value`` has its columns packed into a record only with
``rowLayout=streamnative`` or for a topic whose record schema they fit
(:func:`.write_schema.check_packed`), else the write fails as it is planned, before
any producer connects.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    MapType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.txn import Transaction, TransactionsUnavailable
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.ids.message_id import MessageId

from .connect import open_client
from .errors import PulsarOptionError, PulsarWriteError
from .options.parse import PulsarOptions
from .options.schema import RAW
from .streamnative_rows import SinkColumns
from .txn_registry import Registry, abort_all, registry_topic
from .write_schema import RowEncoder, WritePlan, near_misses, plan_write

__all__ = [
    "ACCEPTED_COLUMNS",
    "PulsarArrowWriter",
    "PulsarCommitMessage",
    "check_columns",
    "check_transactions",
    "end_transactions",
    "txns_of",
    "plan_topic_writes",
]

log = logging.getLogger(__name__)

#: Column name -> (Spark types accepted, description).
ACCEPTED_COLUMNS = {
    "value": ((BinaryType, StringType), "binary or string, required"),
    "key": ((BinaryType, StringType), "binary or string"),
    "properties": ((MapType,), "map<string,string>"),
    "eventTime": ((TimestampType, TimestampNTZType), "timestamp"),
    "topic": ((StringType,), "string; routes each row when there is no topic option"),
}


def _accepted(typed: frozenset[str] = frozenset()) -> str:
    return ", ".join(
        f"{name} ({_TYPED[name] if name in typed else desc})"
        for name, (_, desc) in ACCEPTED_COLUMNS.items()
    )


#: The columns whose type is free in typed writes (any type a schema can hold).
_TYPED = {
    "value": "required; binary as is, any other type under a schema",
    "key": "any type, under the KEY_VALUE schema",
}


def check_columns(schema: StructType, options: PulsarOptions) -> None:
    """Raise :class:`PulsarWriteError` for a DataFrame the sink cannot write."""
    typed: frozenset[str] = frozenset()
    if options.schema_mode != RAW:
        kv = options.key_value_encoding is not None
        typed = frozenset({"value", "key"} if kv else {"value"})
    names = schema.fieldNames()
    unknown = [n for n in names if n not in ACCEPTED_COLUMNS]
    if unknown:
        hint = near_misses(unknown)
        msg = (
            f"the pulsar sink cannot write column(s) {unknown}"
            f"{f' (did you mean {hint}?)' if hint else ''}; it accepts "
            f"{_accepted(typed)}. Select or rename the columns first."
        )
        raise PulsarWriteError(msg)
    if "value" not in names:
        msg = (
            f"the pulsar sink needs a 'value' column (the DataFrame's columns: "
            f"{', '.join(names)}); it accepts {_accepted(typed)}"
        )
        raise PulsarWriteError(msg)
    for field in schema.fields:
        if field.name in typed:
            continue
        types, desc = ACCEPTED_COLUMNS[field.name]
        ok = isinstance(field.dataType, types)
        if ok and isinstance(field.dataType, MapType):
            ok = isinstance(field.dataType.keyType, StringType) and isinstance(
                field.dataType.valueType, StringType
            )
        if not ok:
            msg = (
                f"column {field.name!r} has type {field.dataType.simpleString()}; the "
                f"pulsar sink takes {desc} there"
            )
            raise PulsarWriteError(msg)
    if options.topic is None and "topic" not in names:
        msg = "writes need the topic option or a 'topic' column"
        raise PulsarOptionError(option="topic", message=msg)


def plan_topic_writes(
    options: PulsarOptions, schema: StructType, packed: tuple[str, ...] = ()
) -> dict[str, WritePlan]:
    """On the driver: the :class:`WritePlan` of the topic option's topic (none for raw
    writes, or when the broker cannot be reached now: the tasks plan then). ``packed``:
    the DataFrame's columns when it has no ``value`` and they make it up
    (:attr:`.streamnative_rows.SinkColumns.packed`).

    Raises:
        PulsarWriteError: the DataFrame does not fit the topic's schema, naming the fields;
            columns packed into ``value`` without ``rowLayout=streamnative`` or a topic's
            record schema they fit (:func:`.write_schema.check_packed`).
    """
    raw = options.schema_mode == RAW
    if options.topic is None or (raw and not packed):
        return {}
    from .spark_types import arrow_for

    arrow = arrow_for(schema)
    key = arrow.field("key").type if "key" in arrow.names else None
    value = arrow.field("value").type
    if not _asks_topic_schema(value, options, packed):
        plan = plan_write(options.topic, value, key, options, None, packed)
        return {} if raw else {options.topic: plan}  # raw: the tasks plan (no schema)
    try:
        with open_client(options) as client:
            latest = client.latest_schema(options.topic)
    except Exception:
        log.debug("pulsar sink: the topic's schema could not be read now", exc_info=True)
        return {}
    return {options.topic: plan_write(options.topic, value, key, options, latest, packed)}


def _asks_topic_schema(
    value: pa.DataType, options: PulsarOptions, packed: tuple[str, ...] = ()
) -> bool:
    """Whether the plan depends on the topic's schema: never for ``schemaMode=raw``;
    binary values without ``keyValueEncoding`` go as given whatever the topic has (no
    broker round trip), unless they are a DataFrame's packed columns
    (:func:`.write_schema.check_packed` asks)."""
    if options.schema_mode == RAW:
        return False
    binary = pa.types.is_binary(value) or pa.types.is_large_binary(value)
    return not binary or options.key_value_encoding is not None or bool(packed)


@dataclass
class PulsarCommitMessage(WriterCommitMessage):
    """What one task wrote: messages acknowledged per topic, and the transaction they
    are in (``deliveryGuarantee=exactly-once``), as ``<most>:<least>``."""

    rows: int
    topics: dict[str, int]
    txn: str | None = None
    #: The streaming query's id (a stream writer's task).
    query: str | None = None


EXACTLY_ONCE = "exactly-once"


def check_transactions(options: PulsarOptions) -> None:
    """On the driver, before anything is written: the broker has transactions, where
    ``deliveryGuarantee=exactly-once`` asks for them."""
    if options.delivery_guarantee != EXACTLY_ONCE:
        return
    with open_client(options, reuse=False) as client:
        try:
            client.check_transactions()
        except TransactionsUnavailable as exc:
            option, why = "deliveryGuarantee", f"exactly-once needs transactions, and {exc}"
            raise PulsarOptionError(option, why) from exc


def txns_of(messages: list[WriterCommitMessage | None]) -> list[str]:
    """The transactions the tasks' commit messages name."""
    return [m.txn for m in messages if isinstance(m, PulsarCommitMessage) and m.txn]


def end_transactions(client: PulsarClient, txns: list[str], *, commit: bool) -> int:
    """Commits (or aborts) the tasks' transactions ``txns``, on the driver; how many. A
    commit that fails raises, naming the transactions committed before it and those
    left."""
    if not commit:
        return abort_all(client, txns)
    for i, txn in enumerate(txns):
        try:
            client.transaction(txn).commit()
        except PulsarError as exc:  # noqa: PERF203 - one commit after another
            msg = (
                f"committing transaction {txn} failed: {exc}. Committed before it: "
                f"{txns[:i] or 'none'}; not committed yet: {txns[i:]}"
            )
            raise PulsarWriteError(msg) from exc
    return len(txns)


def _event_time_ms(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """A timestamp column (with or without a zone: UTC) as epoch ms, int64."""
    import pyarrow.compute as pc  # only where a write has an eventTime

    micros = pc.cast(column, pa.timestamp("us", tz=column.type.tz))
    return pc.divide(pc.cast(micros, pa.int64()), 1000)


class PulsarArrowWriter(DataSourceArrowWriter):
    """Writes each task's Arrow batches; see the module docstring."""

    def __init__(
        self,
        options: PulsarOptions,
        columns: tuple[str, ...],
        plans: dict[str, WritePlan] | None = None,
        sink: SinkColumns | None = None,
    ) -> None:
        self.options = options
        self.columns = columns
        #: How the DataFrame's own columns become ``columns`` (StreamNative's, mapped).
        self.sink = sink
        #: Write plans made on the driver, by topic (others are made in the task).
        self.plans = dict(plans or {})
        #: Exactly-once: the job's id in the transaction registry, and where the registry
        #: ended before its tasks started (set on the driver by :meth:`prepare`).
        self.owner: str | None = None
        self.registry_from: MessageId | None = None

    def prepare(self) -> None:
        """On the driver, before any task: an exactly-once job holds its place in the
        transaction registry."""
        if self.options.delivery_guarantee != EXACTLY_ONCE:
            return
        self.owner = uuid.uuid4().hex
        registry = self._registry()
        with open_client(self.options, reuse=False) as client:
            self.registry_from = registry.hold(
                client, self.owner, self.options.transaction_timeout_ms
            )
            try:
                found = registry.recover(client, self.owner)
            except PulsarError as exc:  # this job's own commit does not depend on it
                log.warning("pulsar sink: reading %s to recover other jobs: %s", registry, exc)
                found = []
        for job in found:
            if job.abandoned:
                log.info("pulsar sink: job %s died before its commit; registry released", job.owner)
                continue
            log.warning(
                "pulsar sink: finished the commit of job %s, whose driver stopped midway: "
                "committed %s; committed before: %s; timed out (rows lost): %s; left: %s",
                job.owner, job.committed, job.ended, job.lost, job.failed,
            )  # fmt: skip

    def _registry(self) -> Registry:
        return Registry(registry_topic(self.options.transaction_log_topic, self.options.topic))

    def _announce(self, client: PulsarClient, txn: Transaction) -> None:
        """Registers a task's transaction before it writes (see :mod:`.txn_registry`)."""
        assert self.owner is not None
        self._registry().announce(client, self.owner, -1, str(txn.id))

    def _producer_name(self) -> str | None:
        prefix = self.options.producer_name_prefix
        if prefix is None:
            return None
        from pyspark import TaskContext

        context = TaskContext.get()
        if context is None:
            return f"{prefix}-{uuid.uuid4().hex[:8]}"
        return f"{prefix}-{context.stageId()}-{context.partitionId()}-{context.attemptNumber()}"

    def _plan(self, client: PulsarClient, topic: str, table: pa.Table) -> WritePlan:
        plan = self.plans.get(topic)
        if plan is None:
            packed = () if self.sink is None else self.sink.packed
            key = table.column("key").type if "key" in table.column_names else None
            value = table.column("value").type
            asks = _asks_topic_schema(value, self.options, packed)
            latest = client.latest_schema(topic) if asks else None
            plan = plan_write(topic, value, key, self.options, latest, packed)
            self.plans[topic] = plan
        return plan

    def _open(
        self,
        client: PulsarClient,
        topic: str,
        name: str | None,
        plan: WritePlan | None = None,
        txn: Transaction | None = None,
    ) -> object:
        o = self.options
        options: dict[str, object] = {
            "batch_max_messages": o.batch_max_messages,
            "batch_max_bytes": o.batch_max_bytes,
            "batch_max_delay": o.batch_max_delay,
            "max_pending_messages": o.max_pending_messages,
            "max_pending_bytes": o.max_pending_bytes,
            "send_timeout": o.send_timeout,
        }
        if name is not None:
            options["producer_name"] = name
        if o.encryption_keys is not None or o.public_key is not None:
            options["encryption_keys"] = o.encryption_keys
            options["public_key"] = None if o.public_key is None else o.public_key.spec
        if plan is not None and plan.schema is not None:
            options["schema"] = plan.schema
        if txn is not None:
            options["transaction"] = txn
        return client.create_producer(
            topic, compression=o.compression, batching=o.batching, **options
        )

    def _end_orphans(self, client: PulsarClient, owner: str, txns: list[str]) -> None:
        """Aborts the job's registered transactions that are not ``txns`` (those of task
        attempts that died or lost)."""
        opened, _ = self._registry().opened(client, self.registry_from, owner, -1)
        kept = set(txns)
        orphans = [txn for txn in opened if txn not in kept]
        abort_all(client, orphans)
        if orphans:
            log.warning(
                "pulsar sink: aborted %d transactions of task attempts that did not finish: %s",
                len(orphans),
                orphans,
            )

    def _commit_decided(self, client: PulsarClient, owner: str, txns: list[str]) -> int:
        """Commits the tasks' transactions holding the job's registry subscription,
        after recording the decision (see :mod:`.txn_registry`); how many."""
        registry = self._registry()
        with registry.lock(client, owner) as hold:
            registry.decide(client, owner, txns)
            try:
                count = end_transactions(client, txns, commit=True)
            except PulsarWriteError as exc:
                msg = (
                    f"{exc}. The commit of job {owner} is recorded in {registry.topic}: the "
                    "next exactly-once batch job writing to its namespace commits the "
                    "transactions left, if it comes before they time out (transactionTimeout)"
                )
                raise PulsarWriteError(msg) from exc
            registry.finish(client, owner, "committed", hold)
        return count

    def _routed(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pa.Table]]:
        """(topic, rows to send there), the rows as send_batch takes them."""
        if self.sink is not None:
            batch = self.sink.apply(batch)
        columns: dict[str, pa.Array] = {
            name: batch.column(name)
            for name in ("value", "key", "properties")
            if name in self.columns
        }
        if "eventTime" in self.columns:
            columns["eventTime"] = _event_time_ms(batch.column("eventTime"))
        table = pa.table(columns)
        if self.options.topic is not None:
            yield self.options.topic, table
            return
        topics = batch.column("topic")
        if topics.null_count:
            msg = "a row has a null 'topic' and there is no topic option to fall back on"
            raise PulsarWriteError(msg)
        import pyarrow.compute as pc  # only where rows name their topics

        for topic in pc.unique(topics).to_pylist():
            yield topic, table.filter(pc.equal(topics, topic))

    def _send(self, producer: object, table: pa.Table) -> int:
        """Hand ``table`` to ``producer`` (the stream writer adds sequence ids)."""
        return int(producer.send_batch(table))  # type: ignore[attr-defined]

    def write(self, iterator: Iterator[pa.RecordBatch]) -> PulsarCommitMessage:
        producers: dict[str, object] = {}
        encoders: dict[str, RowEncoder] = {}
        counts: dict[str, int] = {}
        name = self._producer_name()
        client = open_client(self.options)
        failed = True
        txn: Transaction | None = None
        try:
            if self.options.delivery_guarantee == EXACTLY_ONCE:
                txn = client.new_transaction(self.options.transaction_timeout_ms / 1000)
                self._announce(client, txn)
            for batch in iterator:
                for topic, rows in self._routed(batch):
                    producer = producers.get(topic)
                    if producer is None:
                        plan = self._plan(client, topic, rows)
                        encoders[topic] = RowEncoder(plan)
                        suffix = f"-{len(producers)}" if name and producers else ""
                        producer = self._open(client, topic, name and name + suffix, plan, txn)
                        producers[topic] = producer
                    table = encoders[topic].encode(rows)
                    self._send(producer, table)
                    counts[topic] = counts.get(topic, 0) + table.num_rows
            for producer in producers.values():
                producer.flush()  # type: ignore[attr-defined]  # every receipt, or raise
            failed = False
        finally:
            # close() flushes what is still in flight (bounded by sendTimeoutMs) and stops
            # the producer's threads; after a failure its own error must not hide the first.
            for producer in producers.values():
                try:
                    producer.close()  # type: ignore[attr-defined]
                except Exception:  # noqa: PERF203 - close them all
                    if not failed:
                        raise
                    log.debug("closing a producer after a failed write", exc_info=True)
            if failed and txn is not None:
                try:  # nothing of a failed task may ever show
                    txn.abort()
                except PulsarError as exc:
                    log.warning("pulsar sink: aborting transaction %s: %s", txn.id, exc)
            client.close()
        return PulsarCommitMessage(
            sum(counts.values()), counts, None if txn is None else str(txn.id)
        )

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PulsarCommitMessage))
        if self.options.delivery_guarantee == EXACTLY_ONCE:
            txns = txns_of(messages)
            with open_client(self.options, reuse=False) as client:
                if self.owner is None:  # a writer that prepare() never saw: no registry
                    count = end_transactions(client, txns, commit=True)
                else:
                    self._end_orphans(client, self.owner, txns)
                    count = self._commit_decided(client, self.owner, txns)
            log.info("pulsar sink: %d messages committed in %d transactions", rows, count)
            return
        log.info("pulsar sink: %d messages acknowledged", rows)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sum(m.rows for m in messages if isinstance(m, PulsarCommitMessage))
        if self.options.delivery_guarantee == EXACTLY_ONCE:
            txns = txns_of(messages)
            registry = self._registry()
            with open_client(self.options, reuse=False) as client:
                if self.owner is None:
                    count = end_transactions(client, txns, commit=False)
                elif registry.decided(client, self.owner, self.registry_from):
                    log.error(
                        "pulsar sink: job aborted after its commit was decided: its "
                        "transactions are not aborted; the next exactly-once batch job "
                        "writing to %s commits those left (see the commit's error)",
                        registry.topic,
                    )
                    return
                else:
                    self._end_orphans(client, self.owner, txns)
                    count = end_transactions(client, txns, commit=False)
                    registry.finish(client, self.owner, "aborted")
            log.warning(
                "pulsar sink: job aborted; %d transactions of finished tasks aborted (%d "
                "messages never visible)",
                count,
                rows,
            )
            return
        log.warning(
            "pulsar sink: job aborted; %d messages of finished tasks stay written (at-least-once)",
            rows,
        )
