"""``PulsarClient``: the public entry point of the synchronous client."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterator

import pyarrow as pa

from ..protocol import PulsarApi_pb2 as pb
from ..protocol.message_id import EARLIEST, LATEST, MessageId
from ..protocol.topics import base_topic
from .auth import Authentication
from .connection import TlsOptions
from .errors import ClientError
from .lookup import ConnectionPool, LookupService
from .names import TopicName, parse_service_url, parse_topic
from .producer import Producer
from .reader import PartitionReader, first_entry, last_message_id, message_id_at_time
from .routing import PartitionedProducer
from .subscription import acknowledge_cumulative, unsubscribe

__all__ = ["PulsarClient", "parse_position", "publish_time_ms"]


def publish_time_ms(value: dt.datetime, what: str) -> int:
    """A datetime as epoch milliseconds; a naive one is taken as UTC."""
    if not isinstance(value, dt.datetime):
        msg = f"{what}={value!r}: expected a datetime"
        raise ClientError(msg)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return int(value.timestamp() * 1000)

T = pb.BaseCommand


def parse_position(value: str | MessageId, what: str) -> MessageId:
    """``"earliest"``, ``"latest"``, a :class:`MessageId` or ``"ledger:entry[:partition[:batch]]"``.

    Raises:
        ClientError: naming ``what`` (e.g. ``start``) and the bad value.
    """
    if isinstance(value, MessageId):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "earliest":
            return EARLIEST
        if text == "latest":
            return LATEST
        try:
            return MessageId.parse(text)
        except ValueError as exc:
            msg = (
                f"{what}={value!r}: expected 'earliest', 'latest' or "
                "ledger:entry[:partition[:batch]]"
            )
            raise ClientError(msg) from exc
    msg = f"{what}={value!r}: expected 'earliest', 'latest', a MessageId or an id string"
    raise ClientError(msg)


class PulsarClient:
    """A synchronous Pulsar client; a context manager.

    Args:
        service_url: ``pulsar://host:6650`` or ``pulsar+ssl://host:6651`` (comma
            separated hosts allowed).
        auth: an :class:`Authentication` (token, basic, TLS, OAuth2).
        tls_trust_certs_file, tls_validate_hostname, tls_allow_insecure: TLS settings.
        connect_timeout, operation_timeout: seconds (10 and 30 by default).
        keepalive_interval: seconds of silence before a PING.
        listener_name: advertised listener to look topics up for.
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
    ) -> None:
        for name, value in (("connect_timeout", connect_timeout),
                            ("operation_timeout", operation_timeout),
                            ("keepalive_interval", keepalive_interval)):
            if not value > 0:
                msg = f"{name} must be a positive number of seconds, not {value!r}"
                raise ClientError(msg)
        self.service_url = parse_service_url(service_url)
        tls = TlsOptions(tls_trust_certs_file, tls_validate_hostname, tls_allow_insecure)
        self.operation_timeout = operation_timeout
        self._pool = ConnectionPool(
            self.service_url,
            auth=auth,
            tls=tls,
            connect_timeout=connect_timeout,
            operation_timeout=operation_timeout,
            keepalive_interval=keepalive_interval,
        )
        self._lookup = LookupService(self._pool, listener_name=listener_name)

    def __enter__(self) -> PulsarClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()

    # -- discovery ---------------------------------------------------------------

    def get_partitions(self, topic: str) -> list[str]:
        """The partition topics of ``topic``, or ``[topic]`` if it is not partitioned."""
        name = parse_topic(topic)
        if name.partition >= 0:
            return [str(name)]
        count = self._lookup.partitions(name)
        if count == 0:
            return [str(name)]
        return [str(name.partition_name(i)) for i in range(count)]

    def list_topics(self, namespace: str, pattern: str | None = None) -> list[str]:
        """The persistent topics of ``tenant/namespace``, sorted; a partitioned topic
        is listed once, by its base name. With ``pattern`` (a regex), only names it
        matches in full, written either as ``persistent://tenant/ns/name`` or as
        ``tenant/ns/name``.

        Raises:
            ClientError: a malformed namespace or pattern.
            OperationTimeout: the broker does not answer (pulsar-lite cannot list).
        """
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
            names = {
                t for t in names
                if regex.fullmatch(t) or regex.fullmatch(t.split("://", 1)[-1])
            }
        return sorted(names)

    def message_id_at_time(self, topic: str, publish_time: int | dt.datetime) -> MessageId | None:
        """The id of the first message of ``topic`` (a non-partitioned topic or one
        partition) published at or after ``publish_time`` (epoch ms or a datetime),
        found with a SEEK; None when every message is older."""
        name = self._one_partition(topic, "ask for the time of")
        if isinstance(publish_time, dt.datetime):
            publish_time = publish_time_ms(publish_time, "publish_time")
        return message_id_at_time(self._lookup, name, publish_time,
                                  operation_timeout=self.operation_timeout)

    def entry_exists(self, topic: str, message_id: str | MessageId) -> bool:
        """Whether the entry of ``message_id`` is still stored in ``topic`` (a
        non-partitioned topic or one partition). Retention, truncation and deletion
        remove whole ledgers, so the entry is there when its ledger still holds an
        entry at or after it (a marker is never dispatched, the entry after it is).
        Nothing is decoded: a chunk of a message counts."""
        name = self._one_partition(topic, "look for entries of")
        at = parse_position(message_id, "message_id")
        at = MessageId(at.ledger, at.entry, at.partition, -1)
        found = first_entry(self._lookup, name, at, operation_timeout=self.operation_timeout)
        return found is not None and found[0].ledger == at.ledger

    def acknowledge_cumulative(
        self, topic: str, subscription: str, message_id: str | MessageId
    ) -> None:
        """Move the durable ``subscription`` of ``topic`` (a non-partitioned topic or
        one partition) past entry ``message_id``, creating the subscription if needed:
        the broker's backlog for it then counts what follows."""
        name = self._one_partition(topic, "acknowledge on")
        acknowledge_cumulative(self._lookup, name, subscription,
                               parse_position(message_id, "message_id"),
                               operation_timeout=self.operation_timeout)

    def unsubscribe(self, topic: str, subscription: str) -> None:
        """Delete the durable ``subscription`` of ``topic`` (every partition)."""
        for partition in self._partitions_of(parse_topic(topic)):
            unsubscribe(self._lookup, partition, subscription,
                        operation_timeout=self.operation_timeout)

    def _one_partition(self, topic: str, what: str) -> TopicName:
        name = parse_topic(topic)
        if name.partition < 0 and self._lookup.partitions(name) > 0:
            msg = f"{name} is partitioned: {what} one partition at a time"
            raise ClientError(msg)
        return name

    def get_last_message_id(self, topic: str) -> MessageId | None:
        """The id of the last message of a (partition) topic; None when it is empty."""
        return last_message_id(self._lookup, parse_topic(topic),
                               operation_timeout=self.operation_timeout)

    # -- writing -----------------------------------------------------------------

    def create_producer(
        self,
        topic: str,
        compression: str | None = None,
        batching: bool = True,
        **options: object,
    ) -> Producer | PartitionedProducer:
        """A producer for ``topic``; for a partitioned topic, one per partition
        behind the same interface (keys routed as the Java client does).

        ``options``: ``producer_name``, ``batch_max_messages``, ``batch_max_bytes``,
        ``batch_max_delay`` (s), ``max_pending_messages``, ``send_timeout`` (s).
        """
        name = parse_topic(topic)
        count = 0 if name.partition >= 0 else self._lookup.partitions(name)
        if count == 0:
            return Producer(self._lookup, name, compression=compression, batching=batching,
                            **options)  # type: ignore[arg-type]
        base_name = options.pop("producer_name", None)
        producers: list[Producer] = []
        try:
            for i in range(count):
                if base_name is not None:
                    options["producer_name"] = f"{base_name}-{i}"
                producers.append(Producer(
                    self._lookup, name.partition_name(i), compression=compression,
                    batching=batching, **options,  # type: ignore[arg-type]
                ))
        except BaseException:
            for producer in producers:
                producer.close()
            raise
        return PartitionedProducer(
            producers, switch_every=int(options.get("batch_max_messages", 1000))  # type: ignore[call-overload]
        )

    # -- reading -----------------------------------------------------------------

    def read_batches(
        self,
        topic: str,
        start: str | MessageId | dt.datetime = "earliest",
        end: str | MessageId | dt.datetime = "latest",
        *,
        start_inclusive: bool = True,
        end_inclusive: bool = True,
        receiver_queue_size: int = 1000,
        batch_rows: int = 10_000,
        missing_start: Callable[[MessageId, MessageId], None] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Read ``topic`` from ``start`` to ``end`` (fixed when each partition's read
        starts) as RecordBatches with the row schema.

        ``start`` and ``end`` are ``"earliest"``, ``"latest"``, a :class:`MessageId`
        (or its ``ledger:entry[:partition[:batch]]`` text) or a publish time as a
        ``datetime``. A start time reads from the first message published at or
        after it (a seek); an end time stops before that message, so consecutive
        time ranges split a topic without gaps or overlaps.

        A partitioned topic is read partition by partition; a name ending in
        ``-partition-N`` reads that partition only.

        ``missing_start(start, first)`` is called when ``start`` is a message id
        whose entry is gone (the broker began at ``first``, a later entry); it
        may raise to end the read.
        """
        start_time = publish_time_ms(start, "start") if isinstance(start, dt.datetime) else None
        end_time = publish_time_ms(end, "end") if isinstance(end, dt.datetime) else None
        first = EARLIEST if start_time is not None else parse_position(start, "start")  # type: ignore[arg-type]
        last = LATEST if end_time is not None else parse_position(end, "end")  # type: ignore[arg-type]
        for partition in self._partitions_of(parse_topic(topic)):
            stop, stop_inclusive = last, end_inclusive
            if end_time is not None:
                found = message_id_at_time(self._lookup, partition, end_time,
                                           operation_timeout=self.operation_timeout)
                if found is not None:
                    stop, stop_inclusive = found, False
            reader = PartitionReader(
                self._lookup, partition, start=first, start_inclusive=start_inclusive,
                start_time=start_time, end=stop, end_inclusive=stop_inclusive,
                receiver_queue_size=receiver_queue_size, batch_rows=batch_rows,
                operation_timeout=self.operation_timeout, missing_start=missing_start,
            )
            yield from reader

    def _partitions_of(self, name: TopicName) -> list[TopicName]:
        if name.partition >= 0:
            return [name]
        count = self._lookup.partitions(name)
        return [name] if count == 0 else [name.partition_name(i) for i in range(count)]
