"""Command builders: every ``BaseCommand`` the client sends, built in one place (no I/O).

Each function takes the ids the command carries (a ``request_id`` for those the
broker answers, a ``consumer_id`` or ``producer_id`` for those it routes) and
its arguments, and returns the ``BaseCommand`` ready for
:func:`~.framing.encode_command`. :data:`ANSWERS` says which command type
answers each request, so a connection can refuse any other::

    PARTITIONED_METADATA      -> PARTITIONED_METADATA_RESPONSE
    LOOKUP                    -> LOOKUP_RESPONSE
    GET_TOPICS_OF_NAMESPACE   -> GET_TOPICS_OF_NAMESPACE_RESPONSE
    GET_LAST_MESSAGE_ID       -> GET_LAST_MESSAGE_ID_RESPONSE
    GET_SCHEMA                -> GET_SCHEMA_RESPONSE
    GET_OR_CREATE_SCHEMA      -> GET_OR_CREATE_SCHEMA_RESPONSE
    PRODUCER                  -> PRODUCER_SUCCESS
    SUBSCRIBE, SEEK, UNSUBSCRIBE, CLOSE_CONSUMER, CLOSE_PRODUCER -> SUCCESS
    TC_CLIENT_CONNECT_REQUEST -> TC_CLIENT_CONNECT_RESPONSE
    NEW_TXN, ADD_PARTITION_TO_TXN, END_TXN -> their *_RESPONSE

The transaction responses carry their own ``error`` and ``message`` fields
rather than being answered with ERROR (except by a broker whose transactions are
off, which answers ERROR NotAllowedError).

ERROR may answer any request; it is not listed. PRODUCER and SUBSCRIBE carry
a schema when given one, except a NONE or BYTES schema (sent as proto None),
which is left out as the Java client does.
"""

from __future__ import annotations

from typing import TypeGuard

from . import PulsarApi_pb2 as pb
from .ids.message_id import MessageId
from .schemas.info import SchemaInfo
from .txn import TxnId

__all__ = [
    "ANSWERS",
    "CommandType",
    "ack_cumulative",
    "add_partition_to_txn",
    "auth_response",
    "close_consumer",
    "close_producer",
    "connect",
    "end_txn",
    "flow",
    "get_last_message_id",
    "get_or_create_schema",
    "get_schema",
    "new_txn",
    "lookup",
    "partitioned_metadata",
    "ping",
    "pong",
    "producer",
    "seek_to_time",
    "send",
    "subscribe",
    "tc_client_connect",
    "topics_of_namespace",
    "unsubscribe",
]

T = pb.BaseCommand
#: A ``BaseCommand.Type`` value.
CommandType = int

ANSWERS: dict[CommandType, CommandType] = {
    T.PARTITIONED_METADATA: T.PARTITIONED_METADATA_RESPONSE,
    T.LOOKUP: T.LOOKUP_RESPONSE,
    T.GET_TOPICS_OF_NAMESPACE: T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
    T.GET_LAST_MESSAGE_ID: T.GET_LAST_MESSAGE_ID_RESPONSE,
    T.GET_SCHEMA: T.GET_SCHEMA_RESPONSE,
    T.GET_OR_CREATE_SCHEMA: T.GET_OR_CREATE_SCHEMA_RESPONSE,
    T.PRODUCER: T.PRODUCER_SUCCESS,
    T.SUBSCRIBE: T.SUCCESS,
    T.SEEK: T.SUCCESS,
    T.UNSUBSCRIBE: T.SUCCESS,
    T.CLOSE_CONSUMER: T.SUCCESS,
    T.CLOSE_PRODUCER: T.SUCCESS,
    T.TC_CLIENT_CONNECT_REQUEST: T.TC_CLIENT_CONNECT_RESPONSE,
    T.NEW_TXN: T.NEW_TXN_RESPONSE,
    T.ADD_PARTITION_TO_TXN: T.ADD_PARTITION_TO_TXN_RESPONSE,
    T.END_TXN: T.END_TXN_RESPONSE,
}


# -- connection ---------------------------------------------------------------------------


def connect(
    *,
    client_version: str,
    protocol_version: int,
    auth_method_name: str | None = None,
    auth_data: bytes | None = None,
    proxy_to_broker_url: str | None = None,
) -> pb.BaseCommand:
    """CONNECT, announcing auth refresh and broker entry metadata support."""
    command = pb.CommandConnect(
        client_version=client_version,
        protocol_version=protocol_version,
        feature_flags=pb.FeatureFlags(
            supports_auth_refresh=True, supports_broker_entry_metadata=True
        ),
    )
    if auth_method_name is not None:
        command.auth_method_name = auth_method_name
    if auth_data is not None:
        command.auth_data = auth_data
    if proxy_to_broker_url:
        command.proxy_to_broker_url = proxy_to_broker_url
    return T(type=T.CONNECT, connect=command)


def auth_response(
    *, client_version: str, protocol_version: int, auth_method_name: str, auth_data: bytes
) -> pb.BaseCommand:
    """AUTH_RESPONSE to a broker's AUTH_CHALLENGE, with fresh credentials."""
    response = pb.CommandAuthResponse(
        client_version=client_version,
        protocol_version=protocol_version,
        response=pb.AuthData(auth_method_name=auth_method_name, auth_data=auth_data),
    )
    return T(type=T.AUTH_RESPONSE, authResponse=response)


def ping() -> pb.BaseCommand:
    return T(type=T.PING, ping=pb.CommandPing())


def pong() -> pb.BaseCommand:
    return T(type=T.PONG, pong=pb.CommandPong())


# -- discovery ----------------------------------------------------------------------------


def partitioned_metadata(request_id: int, topic: str) -> pb.BaseCommand:
    request = pb.CommandPartitionedTopicMetadata(topic=topic, request_id=request_id)
    return T(type=T.PARTITIONED_METADATA, partitionMetadata=request)


def lookup(
    request_id: int, topic: str, *, authoritative: bool = False, listener_name: str | None = None
) -> pb.BaseCommand:
    request = pb.CommandLookupTopic(topic=topic, request_id=request_id, authoritative=authoritative)
    if listener_name:
        request.advertised_listener_name = listener_name
    return T(type=T.LOOKUP, lookupTopic=request)


def topics_of_namespace(request_id: int, namespace: str) -> pb.BaseCommand:
    """GET_TOPICS_OF_NAMESPACE for persistent topics (no pattern: callers filter)."""
    request = pb.CommandGetTopicsOfNamespace(
        request_id=request_id,
        namespace=namespace,
        mode=pb.CommandGetTopicsOfNamespace.PERSISTENT,
    )
    return T(type=T.GET_TOPICS_OF_NAMESPACE, getTopicsOfNamespace=request)


# -- consumers ----------------------------------------------------------------------------


def subscribe(
    request_id: int,
    consumer_id: int,
    *,
    topic: str,
    subscription: str,
    durable: bool,
    earliest: bool,
    start_message_id: MessageId | None = None,
    consumer_name: str | None = None,
    schema: SchemaInfo | None = None,
    read_compacted: bool = False,
    create_topic: bool = True,
) -> pb.BaseCommand:
    """SUBSCRIBE, Exclusive; ``earliest`` picks the initial position of a new
    subscription; ``start_message_id`` (entry level) places a non-durable one;
    ``schema`` is checked by the broker against the topic's; ``read_compacted``
    reads the topic's compacted view up to its compaction horizon (Apache Pulsar
    allows it on Exclusive and Failover subscriptions of persistent topics);
    ``create_topic=False`` (``force_topic_creation``) makes the broker answer
    TopicNotFound for a topic that does not exist instead of creating it."""
    command = pb.CommandSubscribe(
        topic=topic,
        subscription=subscription,
        subType=pb.CommandSubscribe.Exclusive,
        consumer_id=consumer_id,
        request_id=request_id,
        durable=durable,
        initialPosition=(pb.CommandSubscribe.Earliest if earliest else pb.CommandSubscribe.Latest),
    )
    if start_message_id is not None:
        command.start_message_id.CopyFrom(start_message_id.to_pb(with_batch_index=False))
    if consumer_name is not None:
        command.consumer_name = consumer_name
    if read_compacted:
        command.read_compacted = True
    if not create_topic:
        command.force_topic_creation = False
    if _carries(schema):
        command.schema.CopyFrom(schema.to_pb())
    return T(type=T.SUBSCRIBE, subscribe=command)


def seek_to_time(request_id: int, consumer_id: int, publish_time: int) -> pb.BaseCommand:
    """SEEK a subscription to the first message published at or after ``publish_time`` (ms)."""
    seek = pb.CommandSeek(
        consumer_id=consumer_id, request_id=request_id, message_publish_time=publish_time
    )
    return T(type=T.SEEK, seek=seek)


def flow(consumer_id: int, permits: int) -> pb.BaseCommand:
    return T(type=T.FLOW, flow=pb.CommandFlow(consumer_id=consumer_id, messagePermits=permits))


def ack_cumulative(consumer_id: int, message_id: MessageId) -> pb.BaseCommand:
    """ACK (Cumulative) of the entry of ``message_id`` (its batch index is not sent)."""
    ack = pb.CommandAck(
        consumer_id=consumer_id,
        ack_type=pb.CommandAck.Cumulative,
        message_id=[message_id.to_pb(with_batch_index=False)],
    )
    return T(type=T.ACK, ack=ack)


def get_last_message_id(request_id: int, consumer_id: int) -> pb.BaseCommand:
    request = pb.CommandGetLastMessageId(consumer_id=consumer_id, request_id=request_id)
    return T(type=T.GET_LAST_MESSAGE_ID, getLastMessageId=request)


def close_consumer(request_id: int, consumer_id: int) -> pb.BaseCommand:
    close = pb.CommandCloseConsumer(consumer_id=consumer_id, request_id=request_id)
    return T(type=T.CLOSE_CONSUMER, close_consumer=close)


def unsubscribe(request_id: int, consumer_id: int) -> pb.BaseCommand:
    request = pb.CommandUnsubscribe(consumer_id=consumer_id, request_id=request_id)
    return T(type=T.UNSUBSCRIBE, unsubscribe=request)


# -- producers ----------------------------------------------------------------------------


def producer(
    request_id: int,
    producer_id: int,
    *,
    topic: str,
    epoch: int,
    producer_name: str | None,
    user_provided_name: bool,
    schema: SchemaInfo | None = None,
    txn_enabled: bool = False,
) -> pb.BaseCommand:
    """PRODUCER; ``producer_name`` None lets the broker name it; ``schema`` is
    registered (or checked) by the broker, its version in PRODUCER_SUCCESS;
    ``txn_enabled`` makes the broker answer once the topic's transaction buffer is
    ready for transactional sends."""
    command = pb.CommandProducer(
        topic=topic,
        producer_id=producer_id,
        request_id=request_id,
        epoch=epoch,
        user_provided_producer_name=user_provided_name,
    )
    if producer_name:
        command.producer_name = producer_name
    if txn_enabled:
        command.txn_enabled = True
    if _carries(schema):
        command.schema.CopyFrom(schema.to_pb())
    return T(type=T.PRODUCER, producer=command)


def send(
    producer_id: int,
    *,
    sequence_id: int,
    num_messages: int,
    highest_sequence_id: int | None = None,
    is_chunk: bool = False,
    txn: TxnId | None = None,
) -> pb.BaseCommand:
    """SEND (the frame's metadata and payload are added when it is encoded); a
    transactional send carries ``txn`` here and in its metadata (the broker routes
    by this one, readers filter by the metadata's)."""
    command = pb.CommandSend(
        producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages
    )
    if txn is not None:
        command.txnid_most_bits, command.txnid_least_bits = txn
    if highest_sequence_id is not None:
        command.highest_sequence_id = highest_sequence_id
    if is_chunk:
        command.is_chunk = True
    return T(type=T.SEND, send=command)


def close_producer(request_id: int, producer_id: int) -> pb.BaseCommand:
    close = pb.CommandCloseProducer(producer_id=producer_id, request_id=request_id)
    return T(type=T.CLOSE_PRODUCER, close_producer=close)


# -- transactions -------------------------------------------------------------------------


def tc_client_connect(request_id: int, tc_id: int) -> pb.BaseCommand:
    """TC_CLIENT_CONNECT_REQUEST: loads coordinator ``tc_id`` on the broker that owns its
    partition of the assign topic (needed before any other request to it)."""
    request = pb.CommandTcClientConnectRequest(request_id=request_id, tc_id=tc_id)
    return T(type=T.TC_CLIENT_CONNECT_REQUEST, tcClientConnectRequest=request)


def new_txn(request_id: int, tc_id: int, timeout_ms: int) -> pb.BaseCommand:
    """NEW_TXN: a transaction that coordinator ``tc_id`` aborts after ``timeout_ms``
    unless it ended (field 2 carries milliseconds, whatever its older name says)."""
    request = pb.CommandNewTxn(request_id=request_id, tc_id=tc_id, txn_ttl_seconds=timeout_ms)
    return T(type=T.NEW_TXN, newTxn=request)


def add_partition_to_txn(request_id: int, txn: TxnId, partitions: list[str]) -> pb.BaseCommand:
    """ADD_PARTITION_TO_TXN: registers topic partitions before the transaction's first
    send to each."""
    request = pb.CommandAddPartitionToTxn(
        request_id=request_id, txnid_most_bits=txn.most, txnid_least_bits=txn.least
    )
    request.partitions.extend(partitions)
    return T(type=T.ADD_PARTITION_TO_TXN, addPartitionToTxn=request)


def end_txn(request_id: int, txn: TxnId, *, commit: bool) -> pb.BaseCommand:
    """END_TXN: commit (or abort) the transaction; answered once every partition
    registered has its marker."""
    request = pb.CommandEndTxn(
        request_id=request_id,
        txnid_most_bits=txn.most,
        txnid_least_bits=txn.least,
        txn_action=pb.COMMIT if commit else pb.ABORT,
    )
    return T(type=T.END_TXN, endTxn=request)


# -- schemas ------------------------------------------------------------------------------


def _carries(schema: SchemaInfo | None) -> TypeGuard[SchemaInfo]:
    """Whether a PRODUCER or SUBSCRIBE sends ``schema``: not None, nor one the wire
    calls None (NONE, BYTES, AUTO, AUTO_PUBLISH), which the Java client leaves out."""
    return schema is not None and schema.type.pb_value != 0


def get_schema(request_id: int, topic: str, version: bytes | None = None) -> pb.BaseCommand:
    """GET_SCHEMA of ``topic``: the latest schema, or the one of ``version`` (the
    8-byte version, see :func:`~pulsar_spark.protocol.schemas.info.version_to_bytes`)."""
    request = pb.CommandGetSchema(request_id=request_id, topic=topic)
    if version is not None:
        request.schema_version = version
    return T(type=T.GET_SCHEMA, getSchema=request)


def get_or_create_schema(request_id: int, topic: str, schema: SchemaInfo) -> pb.BaseCommand:
    """GET_OR_CREATE_SCHEMA: register ``schema`` for ``topic`` unless it has it
    already (the broker checks compatibility as for a producer)."""
    request = pb.CommandGetOrCreateSchema(request_id=request_id, topic=topic, schema=schema.to_pb())
    return T(type=T.GET_OR_CREATE_SCHEMA, getOrCreateSchema=request)
