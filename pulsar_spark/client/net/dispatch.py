"""Where an incoming frame goes: typed routing keys and the table of frame kinds.

================================  =========================================
frames                            routed by
================================  =========================================
SUCCESS, ERROR, *_RESPONSE,       ``Key(IdKind.REQUEST, request_id)`` -> the
PRODUCER_SUCCESS                  waiting request
MESSAGE, REACHED_END_OF_TOPIC,    ``Key(IdKind.CONSUMER, consumer_id)`` -> the
CLOSE_CONSUMER, ACTIVE_CONSUMER_  consumer's handler
CHANGE
SEND_RECEIPT, SEND_ERROR,         ``Key(IdKind.PRODUCER, producer_id)`` -> the
CLOSE_PRODUCER                    producer's handler, which matches
                                  ``sequence_id`` itself
TOPIC_MIGRATED                    the consumer or producer it names
PING / AUTH_CHALLENGE             answered by the connection itself
================================  =========================================
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.framing import Frame, subcommand

__all__ = ["Handler", "Key", "IdKind", "route"]

T = pb.BaseCommand


class IdKind(enum.Enum):
    """What an id numbers; each kind counts on its own, per connection."""

    REQUEST = "request"
    CONSUMER = "consumer"
    PRODUCER = "producer"


class Key(NamedTuple):
    """One request, consumer or producer of a connection."""

    kind: IdKind
    ident: int

    def __str__(self) -> str:
        return f"{self.kind.value} {self.ident}"


class Handler(Protocol):
    """What consumers and producers register to receive their frames."""

    def frame_received(self, frame: Frame) -> None: ...

    def connection_closed(self, error: PulsarError) -> None: ...


_RESPONSES = frozenset(
    {
        T.SUCCESS,
        T.ERROR,
        T.PRODUCER_SUCCESS,
        T.PARTITIONED_METADATA_RESPONSE,
        T.LOOKUP_RESPONSE,
        T.GET_LAST_MESSAGE_ID_RESPONSE,
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
        T.GET_SCHEMA_RESPONSE,
        T.GET_OR_CREATE_SCHEMA_RESPONSE,
        T.ACK_RESPONSE,
        T.CONSUMER_STATS_RESPONSE,
        T.TC_CLIENT_CONNECT_RESPONSE,
        T.NEW_TXN_RESPONSE,
        T.ADD_PARTITION_TO_TXN_RESPONSE,
        T.END_TXN_RESPONSE,
    }
)
_FOR_CONSUMER = frozenset(
    {T.MESSAGE, T.REACHED_END_OF_TOPIC, T.CLOSE_CONSUMER, T.ACTIVE_CONSUMER_CHANGE}
)
_FOR_PRODUCER = frozenset({T.SEND_RECEIPT, T.SEND_ERROR, T.CLOSE_PRODUCER})


def route(command: pb.BaseCommand) -> Key | None:
    """The key of the request, consumer or producer ``command`` is for; None for
    frames the connection handles itself (PING, PONG, AUTH_CHALLENGE) or ignores."""
    kind = command.type
    if kind in _RESPONSES:
        return Key(IdKind.REQUEST, subcommand(command).request_id)
    if kind in _FOR_CONSUMER:
        return Key(IdKind.CONSUMER, subcommand(command).consumer_id)
    if kind in _FOR_PRODUCER:
        return Key(IdKind.PRODUCER, subcommand(command).producer_id)
    if kind == T.TOPIC_MIGRATED:
        migrated = command.topicMigrated
        owner = IdKind.PRODUCER if migrated.resource_type == migrated.Producer else IdKind.CONSUMER
        return Key(owner, migrated.resource_id)
    return None
