"""The client's side of the schema registry: GET_SCHEMA and GET_OR_CREATE_SCHEMA, a
per-client cache of schemas by version, and schema errors that name the topic.

The registry keys schemas by the base topic: every partition of a
partitioned topic shares one schema history. What the broker answers::

    GET_SCHEMA (latest or a version)   schema + its version
                                       TopicNotFound: the topic has no schema
                                       (or not that version): None here
    GET_OR_CREATE_SCHEMA               the version of the schema, registered if new;
                                       IncompatibleSchema when the broker's
                                       compatibility check refuses it

pulsar-lite has no registry and never answers GET_SCHEMA (a client would wait
for its operation timeout): on such a broker (see :mod:`pulsar_spark.client.net.capabilities`)
:meth:`SchemaRegistry.get` answers None at once, and
:meth:`SchemaRegistry.get_or_create` None (no version is kept).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol import commands
from pulsar_spark.protocol.errors import ServerError, server_error
from pulsar_spark.protocol.schemas.info import SchemaInfo, version_from_bytes, version_to_bytes

from .errors import ClientError
from .names import TopicName
from .net.dispatch import IdKind
from .net.lookup import LookupService

__all__ = ["SchemaRegistry", "VersionedSchema", "schema_context", "with_schema_context"]


class VersionedSchema(NamedTuple):
    """A schema of a topic and its version in the topic's history (None when the
    broker gave none)."""

    info: SchemaInfo
    version: int | None


def schema_context(what: str, topic: TopicName | str, schema: SchemaInfo | None) -> str:
    """Error context naming the topic and the schema type:
    ``producer on persistent://t/n/x with schema AVRO``."""
    if schema is None or schema.type.pb_value == 0:
        return f"{what} {topic} without a schema"
    return f"{what} {topic} with schema {schema.describe()}"


def with_schema_context(
    exc: ServerError, what: str, topic: TopicName | str, schema: SchemaInfo | None
) -> ServerError:
    """``exc`` again (same class and code) with a context naming the topic and the
    schema type, for schema errors (IncompatibleSchema); other errors unchanged."""
    if exc.code != pb.IncompatibleSchema:
        return exc
    return server_error(exc.code, exc.broker_message, context=schema_context(what, topic, schema))


class SchemaRegistry:
    """Schemas of topics as the brokers of one client hold them, cached by version.

    A given version of a topic's schema never changes, so each is asked once;
    "the latest" is asked every time (a new version may have come), and its
    answer cached under its version.

    Args:
        lookup: discovery and connections.
        operation_timeout: seconds a request waits for its answer.
    """

    def __init__(self, lookup: LookupService, *, operation_timeout: float = 30.0) -> None:
        self._lookup = lookup
        self._timeout = operation_timeout
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, int], SchemaInfo] = {}

    def clear(self) -> None:
        """Forget every cached schema (a topic deleted and created again numbers its
        versions anew)."""
        with self._lock:
            self._cache.clear()

    def get(self, topic: TopicName, version: int | None = None) -> VersionedSchema | None:
        """The schema of ``topic`` (a partition stands for its topic): the latest, or
        that of ``version``; None when the topic has no schema (or not that version),
        or the broker keeps none (pulsar-lite, answered without a request).

        Raises:
            InvalidSchema: a version outside int64.
            ServerError: any other broker error (InvalidTopicName, ...), naming the topic.
        """
        key = str(topic.base)
        if version is not None:
            with self._lock:
                cached = self._cache.get((key, version))
            if cached is not None:
                return VersionedSchema(cached, version)
        conn = self._lookup.pool.service()
        if not conn.capabilities.schema_registry:
            return None
        request = commands.get_schema(
            conn.new_id(IdKind.REQUEST),
            str(topic),
            None if version is None else version_to_bytes(version),
        )
        what = f"schema of {topic}" if version is None else f"schema version {version} of {topic}"
        try:
            frame = conn.request(request, timeout=self._timeout)
        except ServerError as exc:
            if exc.code == pb.TopicNotFound:
                return None
            raise server_error(exc.code, exc.broker_message, context=what) from exc
        response = frame.command.getSchemaResponse
        if response.HasField("error_code"):
            if response.error_code == pb.TopicNotFound:
                return None
            raise server_error(response.error_code, response.error_message, context=what)
        info = SchemaInfo.from_pb(response.schema)
        got = version_from_bytes(response.schema_version)
        if got is None:
            got = version
        if got is not None:
            with self._lock:
                self._cache[(key, got)] = info
        return VersionedSchema(info, got)

    def get_or_create(self, topic: TopicName, schema: SchemaInfo) -> int | None:
        """Register ``schema`` for ``topic`` unless it has it already; its version.

        None, without a request, for a schema the wire calls None (NONE, BYTES:
        no schema) and on a broker without a registry (pulsar-lite). The topic
        must exist; for a partitioned topic its first partition is asked.

        Raises:
            IncompatibleSchemaError: the broker's compatibility check refused it,
                naming the topic and the schema type.
            TopicNotFoundError: the topic does not exist.
            ClientError: a broker too old for GET_OR_CREATE_SCHEMA.
        """
        if schema.type.pb_value == 0:
            return None
        target = topic
        if topic.partition < 0 and self._lookup.partitions(topic) > 0:
            target = topic.partition_name(0)
        conn = self._lookup.connection_for(target)
        caps = conn.capabilities
        if not caps.schema_registry:
            return None
        if not caps.get_or_create_schema:
            msg = (
                f"registering a schema for {topic}: the broker ({caps.server_version}, "
                f"protocol {caps.protocol_version}) has no GET_OR_CREATE_SCHEMA"
            )
            raise ClientError(msg)
        request = commands.get_or_create_schema(conn.new_id(IdKind.REQUEST), str(target), schema)
        context = schema_context("registering a schema for", topic, schema)
        try:
            frame = conn.request(request, timeout=self._timeout)
        except ServerError as exc:
            raise server_error(exc.code, exc.broker_message, context=context) from exc
        response = frame.command.getOrCreateSchemaResponse
        if response.HasField("error_code"):
            raise server_error(response.error_code, response.error_message, context=context)
        # Not cached: the broker may hold an equal schema under other properties.
        return version_from_bytes(response.schema_version)
