"""``PulsarClient``: the public entry point of the synchronous client."""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .auth import NoAuthentication
from .config import DEFAULT_READ_BUFFER_BYTES, ClientConfig, TlsOptions
from .errors import ClientError
from .names import TopicName, parse_service_url, parse_topic
from .read.chunk_limits import ChunkLimits

if TYPE_CHECKING:  # the rest loads where it is used: a write imports no read path, and back
    import pyarrow as pa

    from pulsar_spark.protocol.ids.message_id import MessageId
    from pulsar_spark.protocol.ids.position import Position
    from pulsar_spark.protocol.schemas.info import SchemaInfo
    from pulsar_spark.protocol.txn import TxnId

    from .auth import Authentication
    from .crypto_keys import CryptoStats
    from .read.bounds import BoundLike
    from .read.chunk_bounds import ChunkLossReport
    from .read.last_ids import LastIds
    from .read.reader import PartitionReader
    from .read.sinks import MessageRef
    from .read.sized_scan import SizedRef
    from .read.subscription import SubscriptionHold
    from .schemas import VersionedSchema
    from .txn import Coordinators, Transaction
    from .write.producer import Producer
    from .write.routing import PartitionedProducer

__all__ = [
    "PulsarClient",
]


class PulsarClient:
    """A synchronous Pulsar client; a context manager.

    Args:
        service_url: ``pulsar://host:6650`` or ``pulsar+ssl://host:6651`` (hosts comma-separated).
        auth: an :class:`Authentication` (token, basic, TLS, OAuth2).
        tls_trust_certs_file: a CA bundle (PEM) for ``pulsar+ssl://``.
        tls_validate_hostname: check the broker certificate's host name.
        tls_allow_insecure: accept any broker certificate.
        connect_timeout: seconds for a TCP connect and handshake (10).
        operation_timeout: seconds for a lookup, subscribe or producer creation (30).
        keepalive_interval: seconds of silence before a PING (30).
        listener_name: advertised listener to look topics up for.
        read_buffer_bytes: see :class:`ClientConfig`.
        subscription_prefix: see :class:`ClientConfig`.
        read_compacted: see :class:`ClientConfig`.
        chunk_limits: see :class:`ClientConfig`.
    """

    def __init__(
        self,
        service_url: str,
        *,
        auth: Authentication | None = None,
        tls_trust_certs_file: str | None = None,
        tls_validate_hostname: bool = True,
        tls_allow_insecure: bool = False,
        connect_timeout: float = 10.0,
        operation_timeout: float = 30.0,
        keepalive_interval: float = 30.0,
        listener_name: str | None = None,
        read_buffer_bytes: int = DEFAULT_READ_BUFFER_BYTES,
        subscription_prefix: str | None = None,
        read_compacted: bool = False,
        chunk_limits: ChunkLimits | None = None,
    ) -> None:
        from .net.lookup import ConnectionPool, LookupService
        from .schemas import SchemaRegistry

        #: The configuration every connection of this client uses (built once).
        self.config = ClientConfig(
            parse_service_url(service_url),
            auth or NoAuthentication(),
            TlsOptions(tls_trust_certs_file, tls_validate_hostname, tls_allow_insecure),
            connect_timeout,
            operation_timeout,
            keepalive_interval,
            listener_name,
            read_buffer_bytes,
            subscription_prefix,
            read_compacted,
            chunk_limits=chunk_limits or ChunkLimits(),
        )
        self.service_url = self.config.service_url
        self.operation_timeout = operation_timeout
        self._pool = ConnectionPool(self.config)
        self._lookup = LookupService(self._pool)
        self._schemas = SchemaRegistry(self._lookup, operation_timeout=operation_timeout)
        self._coordinators: Coordinators | None = None

    def __enter__(self) -> PulsarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()

    # -- connections and caches, for whoever keeps clients for reuse ---------------

    def holds_nothing(self) -> bool:
        """Whether no consumer or producer is registered on this client's open
        connections: nothing its last user opened is left on it."""
        return self._pool.holds_nothing()

    def settle(self, wait: float) -> None:
        """Let the reader threads of this client's connections take what has already
        arrived (the close of a connection a broker restart ended) before it is used
        again, for ``wait`` seconds at most."""
        self._pool.settle(wait)

    def forget_schemas(self) -> None:
        """Empty the schema cache (a topic deleted and created again numbers its
        schema versions anew)."""
        self._schemas.clear()

    # -- transactions --------------------------------------------------------------

    def new_transaction(self, timeout: float = 60.0) -> Transaction:
        """A new transaction (:mod:`.txn`): give it to :meth:`create_producer`
        (``transaction=``), then commit or abort it. Its coordinator aborts it
        ``timeout`` seconds from now unless it ended first.

        Raises:
            TransactionsUnavailable: the broker has no transactions (pulsar-lite, or
                ``transactionCoordinatorEnabled=false``).
        """
        return self._transactions().new_transaction(timeout)

    def check_transactions(self) -> None:
        """Raises :class:`~.txn.TransactionsUnavailable` unless the broker has
        transactions (asked once; nothing is written)."""
        self._transactions().count()

    def transaction(self, txn: TxnId | str) -> Transaction:
        """A transaction opened elsewhere (a task's), by its id, to commit or abort."""
        from pulsar_spark.protocol.txn import TxnId

        return self._transactions().transaction(txn if isinstance(txn, TxnId) else TxnId.parse(txn))

    def _transactions(self) -> Coordinators:
        from .txn import Coordinators

        if self._coordinators is None:
            self._coordinators = Coordinators(
                self._lookup, operation_timeout=self.operation_timeout
            )
        return self._coordinators

    # -- discovery ---------------------------------------------------------------

    def get_partitions(self, topic: str) -> list[str]:
        """The partition topics of ``topic``, or ``[topic]`` if it is not partitioned."""
        name = parse_topic(topic)
        count = 0 if name.partition >= 0 else self._partitions_retried(name)
        return [str(name.partition_name(i)) for i in range(count)] if count else [str(name)]

    def list_topics(self, namespace: str, pattern: str | None = None) -> list[str]:
        """The persistent topics of ``tenant/namespace``, sorted; a partitioned topic
        is listed once, by its base name. With ``pattern`` (a regex), only names it
        matches in full, written either as ``persistent://tenant/ns/name`` or as
        ``tenant/ns/name``.

        Raises:
            ClientError: a malformed namespace or pattern.
            OperationTimeout: the broker does not answer (pulsar-lite cannot list).
        """
        from pulsar_spark.protocol.topics import base_topic

        parts = namespace.strip().strip("/").split("/")
        if len(parts) != 2 or not all(parts):
            msg = f"namespace={namespace!r}: expected 'tenant/namespace'"
            raise ClientError(msg)
        regex = None
        if pattern is not None:
            try:
                regex = re.compile(pattern)
            except re.error as exc:
                msg = f"pattern={pattern!r} is not a valid regular expression: {exc}"
                raise ClientError(msg) from exc
        names = {base_topic(t)[0] for t in self._lookup.topics_of_namespace("/".join(parts))}
        if regex is not None:
            names = {t for t in names if regex.fullmatch(t) or regex.fullmatch(t.split("://")[-1])}
        return sorted(names)

    def message_id_at_time(
        self, topic: str, publish_time: int | dt.datetime | Position
    ) -> MessageId | None:
        """The id of the first message of ``topic`` (a non-partitioned topic or one
        partition) published at or after ``publish_time`` (epoch ms, a datetime or a
        ``time:`` position), found with a SEEK and an id-level scan; None when every
        message is older. A chunked message is given by its first chunk."""
        from pulsar_spark.protocol.ids.position import Position

        from .read.bounds import publish_time_ms
        from .read.reader import PartitionReader

        name = self._one_partition(topic, "ask for the time of")
        if isinstance(publish_time, dt.datetime):
            publish_time = publish_time_ms(publish_time, "publish_time")
        elif isinstance(publish_time, Position):
            if publish_time.time_ms is None:
                msg = f"publish_time={publish_time}: expected a time, not a message position"
                raise ClientError(msg)
            publish_time = publish_time.time_ms
        return PartitionReader.message_id_at_time(
            self._lookup, name, publish_time, operation_timeout=self.operation_timeout
        )

    def entry_exists(self, topic: str, message_id: str | MessageId) -> bool:
        """Whether the entry of ``message_id`` is still stored in ``topic`` (a
        non-partitioned topic or one partition). Retention, truncation and deletion
        remove whole ledgers, so the entry is there when its ledger still holds an
        entry at or after it (a marker is never dispatched, the entry after it is).
        Nothing is decoded: a chunk of a message counts."""
        from .read.bounds import parse_position
        from .read.session import first_entry

        name = self._one_partition(topic, "look for entries of")
        at = parse_position(message_id, "message_id").with_batch_index(-1)
        found = first_entry(self._lookup, name, at, operation_timeout=self.operation_timeout)
        # A compacted view (read_compacted) skips ids by design: any entry after ``at`` will do.
        return found is not None and (self.config.read_compacted or found[0].ledger == at.ledger)

    def first_entry_at(self, topic: str, message_id: str | MessageId) -> MessageId | None:
        """The id (batch index -1) of the first entry still stored in ``topic`` (a
        non-partitioned topic or one partition) at or after the entry of
        ``message_id``; None when there is none. Nothing is decoded."""
        from .read.bounds import parse_position
        from .read.session import first_entry

        name = self._one_partition(topic, "look for entries of")
        at = parse_position(message_id, "message_id").with_batch_index(-1)
        found = first_entry(self._lookup, name, at, operation_timeout=self.operation_timeout)
        return None if found is None else found[0]

    def last_ids(self, subscription: str | None = None) -> LastIds:
        """A :class:`~pulsar_spark.client.read.last_ids.LastIds` on this client's connections: the
        last ids of many partitions at once, with consumers kept between calls; on the durable
        ``subscription`` when given (created where missing, moved by its
        ``acknowledge``). Close it before the client."""
        from .read.last_ids import LastIds

        return LastIds(
            self._lookup, operation_timeout=self.operation_timeout, subscription=subscription
        )

    def acknowledge_cumulative(
        self, topic: str, subscription: str, message_id: str | MessageId
    ) -> None:
        """Move the durable ``subscription`` of ``topic`` (a non-partitioned topic or
        one partition) past entry ``message_id``, creating the subscription if needed:
        the broker's backlog for it then counts what follows."""
        from .read.bounds import parse_position
        from .read.subscription import acknowledge_cumulative

        name = self._one_partition(topic, "acknowledge on")
        acknowledge_cumulative(
            self._lookup,
            name,
            subscription,
            parse_position(message_id, "message_id"),
            operation_timeout=self.operation_timeout,
        )

    def ensure_subscription(self, topic: str, subscription: str, *, earliest: bool = True) -> None:
        """Make the durable ``subscription`` of ``topic`` (a non-partitioned topic or one
        partition) at its earliest message (or, not ``earliest``, after its last) unless
        it exists: the broker then keeps every message it has not acknowledged
        (:meth:`acknowledge_cumulative`)."""
        from .read.subscription import ensure_subscription

        name = self._one_partition(topic, "subscribe to")
        ensure_subscription(
            self._lookup,
            name,
            subscription,
            earliest=earliest,
            operation_timeout=self.operation_timeout,
        )

    def unsubscribe(self, topic: str, subscription: str) -> list[str]:
        """Delete the durable ``subscription`` of ``topic`` (every partition); the
        partitions it was deleted from (a partition that does not exist is left out,
        and not created)."""
        from .read.subscription import unsubscribe

        return [
            str(partition)
            for partition in self._partitions_of(parse_topic(topic))
            if unsubscribe(
                self._lookup, partition, subscription, operation_timeout=self.operation_timeout
            )
        ]

    def hold_subscription(self, topic: str, subscription: str) -> SubscriptionHold:
        """Attach to the durable ``subscription`` of ``topic`` (a non-partitioned topic or
        one partition), made at its end unless it exists, and stay attached until the
        hold is released (a context manager): a lock on the name that the broker frees
        when this client's connection ends.

        Raises:
            ServerError: ConsumerBusy, at once, when another client holds it (pulsar-lite
                closes the connection instead: ConnectionClosed after the operation
                timeout's retries).
        """
        from .read.subscription import hold_subscription

        name = self._one_partition(topic, "hold a subscription of")
        return hold_subscription(
            self._lookup, name, subscription, operation_timeout=self.operation_timeout
        )

    def _one_partition(self, topic: str, what: str) -> TopicName:
        name = parse_topic(topic)
        if name.partition < 0 and self._lookup.partitions(name) > 0:
            msg = f"{name} is partitioned: {what} one partition at a time"
            raise ClientError(msg)
        return name

    def get_last_message_id(self, topic: str) -> MessageId | None:
        """The id of the last message of a (partition) topic; None when it is empty."""
        from .read.session import last_message_id

        return last_message_id(
            self._lookup, parse_topic(topic), operation_timeout=self.operation_timeout
        )

    # -- schemas -----------------------------------------------------------------

    def get_schema(self, topic: str, version: int | None = None) -> SchemaInfo | None:
        """The schema of ``topic``: the latest, or that of ``version``; None when the
        topic has no schema (or not that version) and on a broker without a schema
        registry (pulsar-lite: answered at once, no request). Versions are cached.

        Raises:
            ServerError: any other broker error, naming the topic.
        """
        found = self._schemas.get(parse_topic(topic), version)
        return None if found is None else found.info

    def latest_schema(self, topic: str) -> VersionedSchema | None:
        """The latest schema of ``topic`` with its version (as :meth:`get_schema`)."""
        return self._schemas.get(parse_topic(topic))

    def get_or_create_schema(self, topic: str, schema: SchemaInfo) -> int | None:
        """Register ``schema`` for the existing ``topic`` unless it has it; its version.
        None for NONE or BYTES (no schema) and on pulsar-lite (no registry).

        Raises:
            IncompatibleSchemaError: refused by the broker, naming topic and type.
            TopicNotFoundError: no such topic.
        """
        return self._schemas.get_or_create(parse_topic(topic), schema)

    # -- writing -----------------------------------------------------------------

    def _partitions_retried(self, name: TopicName) -> int:
        """Partition count of ``name``, retried as :func:`.retry.classify` allows."""
        from .retry import retried

        timeout = self._lookup.config.operation_timeout
        return retried(lambda: self._lookup.partitions(name), timeout, f"partitions of {name}")

    def create_producer(
        self,
        topic: str,
        compression: str | None = None,
        batching: bool = True,
        **options: Any,
    ) -> Producer | PartitionedProducer:
        """A producer for ``topic``; for a partitioned topic, one per partition
        behind the same interface (keys routed as the Java client does).

        ``options``: ``producer_name``, ``batch_max_messages``, ``batch_max_bytes``,
        ``batch_max_delay`` (s), ``max_pending_messages``, ``send_timeout`` (s),
        ``transaction`` (a :meth:`new_transaction`: every message goes into it),
        ``encryption_keys`` and ``public_key`` (end-to-end encryption, see :class:`Producer`),
        ``schema`` (a :class:`SchemaInfo` the broker registers or checks as for the official
        clients, not sent for NONE or BYTES; the producer's ``schema_version`` says which
        version it got, and its messages carry it; values are sent as given; an
        incompatible one raises ``IncompatibleSchemaError`` naming topic and schema type).
        """
        from .write.producer import Producer
        from .write.routing import PartitionedProducer

        name = parse_topic(topic)
        count = 0 if name.partition >= 0 else self._partitions_retried(name)
        if count == 0:
            return Producer(
                self._lookup, name, compression=compression, batching=batching, **options
            )
        base_name = options.pop("producer_name", None)
        producers: list[Producer] = []
        try:
            for i in range(count):
                if base_name is not None:
                    options["producer_name"] = f"{base_name}-{i}"
                producers.append(
                    Producer(
                        self._lookup,
                        name.partition_name(i),
                        compression=compression,
                        batching=batching,
                        **options,
                    )
                )
        except BaseException:
            for producer in producers:
                producer.close()
            raise
        return PartitionedProducer(producers)  # keyless rows switch partition per batch

    # -- reading -----------------------------------------------------------------

    def read_batches(
        self,
        topic: str,
        start: BoundLike = "earliest",
        end: BoundLike = "latest",
        *,
        start_inclusive: bool = True,
        end_inclusive: bool = True,
        receiver_queue_size: int = 1000,
        batch_rows: int = 10_000,
        missing_start: Callable[[MessageId, MessageId], None] | None = None,
        schema: SchemaInfo | None = None,
        private_key: str | Mapping[str, str] | None = None,
        crypto_failure_action: str = "fail",
        crypto_stats: CryptoStats | None = None,
        chunk_loss: ChunkLossReport | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Read ``topic`` from ``start`` to ``end`` (fixed when each partition's read
        starts) as RecordBatches with the row schema.

        ``start`` and ``end`` are a :class:`Position`, ``"earliest"``, ``"latest"``,
        a :class:`MessageId` (or its ``ledger:entry[:partition[:batch]]`` text) or a
        publish time as a ``datetime``. ``start_inclusive`` and ``end_inclusive``
        apply to ids; a position says itself what it includes (as an end,
        ``after:X`` includes X and ``from:X`` stops before it). A start time reads
        from the first message published at or after it (a seek); an end time stops
        before that message, so consecutive time ranges split a topic without gaps
        or overlaps. A partitioned topic is read partition by partition; a name
        ending in ``-partition-N`` reads that partition only.

        ``missing_start(start, first)`` is called when ``start`` is a message id
        whose entry is gone (the broker began at ``first``, a later entry); it
        may raise to end the read; ``chunk_loss(lost)``, for a chunked message begun in
        the range that never completes (:mod:`pulsar_spark.client.read.chunk_bounds`), likewise, or
        the read fails with ``ChunkError`` naming it. ``schema`` goes in each SUBSCRIBE for the
        broker to check against the topic's (values stay bytes). ``private_key`` (a PEM
        URL, or name -> URL as JSON or a mapping) decrypts encrypted messages; any that do
        not fail the read unless ``crypto_failure_action`` is ``discard`` or ``consume``;
        discarded ones are logged, counted per partition in ``crypto_stats`` if given.

        Raises:
            ClientError: a malformed start or end, naming it.
            ChunkError: a chunked message that cannot be read whole, naming it.
        """
        from .crypto_keys import counting_discards, make_decryptor
        from .read.bounds import end_bound, start_bound
        from .read.reader import PartitionReader

        first, last = start_bound(start, start_inclusive), end_bound(end, end_inclusive)
        for partition in self._partitions_of(parse_topic(topic)):
            decrypt = make_decryptor(str(partition), private_key, crypto_failure_action)
            yield from counting_discards(PartitionReader(
                self._lookup, partition, start=first, end=last, decrypt=decrypt,
                receiver_queue_size=receiver_queue_size, batch_rows=batch_rows,
                operation_timeout=self.operation_timeout, missing_start=missing_start,
                schema=schema, chunk_loss=chunk_loss,
            ), decrypt, crypto_stats)  # fmt: skip

    # -- id-level probes (no Arrow is built) ----------------------------------------

    def scan_ids(
        self,
        topic: str,
        start: BoundLike = "earliest",
        end: BoundLike = "latest",
        limit: int | None = None,
        receiver_queue_size: int | None = None,
    ) -> Generator[MessageRef, None, None]:
        """The :class:`MessageRef` (message id, publish time in epoch ms) of each
        message :meth:`read_batches` would return between ``start`` and ``end``,
        at most ``limit`` of them (all when None), in the order the Arrow path
        gives them: the order messages complete. That is the order of their ids,
        but for a chunked message, which comes when its last chunk is read, after
        the messages stored between its chunks, while its id is its first chunk's
        entry: the greatest id is not always the last one.

        ``topic`` is a non-partitioned topic or one partition; bounds as
        :meth:`read_batches` takes them (ids inclusive). The messages are the same
        as the Arrow path's (bounds inside batches, acknowledged and compacted-out
        items, markers and chunked messages alike), but no Arrow is built and only
        batches are decompressed. A chunked message is given by its first chunk's
        entry (batch index -1): a range that starts after it, or ends at it
        exclusively, leaves the message whole to one side; one never completed is
        skipped, with a WARNING. Leaving the iterator early (``close()``, or a
        ``with contextlib.closing(...)``) ends the read.
        ``receiver_queue_size`` is the consumer's window (by default ``limit``, at
        most 1000).

        Raises:
            ClientError: a partitioned topic, or a malformed bound.
        """
        return self._scan_reader(topic, start, end, limit, receiver_queue_size).ids(limit)

    def scan_sizes(
        self,
        topic: str,
        start: BoundLike = "earliest",
        end: BoundLike = "latest",
        limit: int | None = None,
        receiver_queue_size: int | None = None,
    ) -> Generator[SizedRef, None, None]:
        """:meth:`scan_ids`, each message with the size in bytes of its payload as the
        ``value`` column holds it, decompressed (:mod:`~.read.sized_scan`): what a byte
        budget (the stream reader's ``maxBytesPerTrigger``) counts. No Arrow is built.

        Raises:
            ClientError: a partitioned topic, or a malformed bound.
        """
        return self._scan_reader(topic, start, end, limit, receiver_queue_size).sizes(limit)

    def _scan_reader(
        self,
        topic: str,
        start: BoundLike,
        end: BoundLike,
        limit: int | None,
        receiver_queue_size: int | None,
    ) -> PartitionReader:
        """The reader of an id scan, sized or not: ``topic`` one partition, the consumer's
        window ``receiver_queue_size`` (by default ``limit``, at most 1000). A chunked
        message begun in the range and never completed is skipped with a WARNING
        (:func:`~.read.chunk_bounds.skip_incomplete`): a scan plans reads, the read
        reports it."""
        from .read.bounds import end_bound, start_bound
        from .read.chunk_bounds import skip_incomplete
        from .read.reader import PartitionReader

        name = self._one_partition(topic, "scan")
        if receiver_queue_size is None:
            receiver_queue_size = 1000 if limit is None else min(max(limit, 1), 1000)
        return PartitionReader(
            self._lookup,
            name,
            start=start_bound(start),
            end=end_bound(end),
            receiver_queue_size=receiver_queue_size,
            operation_timeout=self.operation_timeout,
            chunk_loss=skip_incomplete,
        )

    def first_message(
        self, topic: str, start: BoundLike = "earliest", end: BoundLike = "latest"
    ) -> tuple[MessageId, int] | None:
        """The id and publish time (epoch ms) of the first message between ``start``
        and ``end`` (see :meth:`scan_ids`); None when there is none."""
        with contextlib.closing(self.scan_ids(topic, start, end, limit=1)) as refs:
            found = next(refs, None)
        return None if found is None else (found.message_id, found.publish_time)

    def _partitions_of(self, name: TopicName) -> list[TopicName]:
        count = 0 if name.partition >= 0 else self._lookup.partitions(name)
        return [name] if count == 0 else [name.partition_name(i) for i in range(count)]
