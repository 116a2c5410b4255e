"""Synchronous Pulsar client over the sans-IO protocol layer: connections, discovery,
readers (Arrow or ids only), producers, durable subscriptions.

:class:`PulsarClient` is the entry point; :class:`ClientConfig` is the frozen
configuration it builds once and hands to every connection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pulsar_spark.lazy import lazy_exports

if TYPE_CHECKING:
    from .auth import (
        Authentication,
        BasicAuthentication,
        NoAuthentication,
        OAuth2ClientCredentials,
        SaslAuthentication,
        TlsAuthentication,
        TokenAuthentication,
    )
    from .client import PulsarClient
    from .config import ClientConfig, TlsOptions
    from .errors import (
        BrokerUnsupported,
        ClientError,
        ConnectError,
        ConnectionClosed,
        InvalidArgument,
        InvalidServiceUrl,
        InvalidTopicName,
        OperationTimeout,
    )
    from .names import ServiceUrl, TopicName, parse_service_url, parse_topic
    from .net.connection import Connection
    from .net.lookup import BrokerAddress, ConnectionPool, LookupService
    from .net.transport import CertificateRefused, TlsMismatch
    from .read.bounds import parse_position
    from .read.chunk_limits import ChunkLimits
    from .read.last_ids import LastIds, PartitionEnd
    from .read.reader import PartitionReader
    from .read.sinks import MessageRef
    from .read.sized_scan import SizedRef
    from .retry import Action, Backoff, classify
    from .schemas import VersionedSchema
    from .txn import Transaction, TransactionFailed, TransactionState, TransactionsUnavailable

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Authentication": "auth",
        "BasicAuthentication": "auth",
        "NoAuthentication": "auth",
        "OAuth2ClientCredentials": "auth",
        "SaslAuthentication": "auth",
        "TlsAuthentication": "auth",
        "TokenAuthentication": "auth",
        "PulsarClient": "client",
        "ClientConfig": "config",
        "TlsOptions": "config",
        "ClientError": "errors",
        "ConnectError": "errors",
        "ConnectionClosed": "errors",
        "BrokerUnsupported": "errors",
        "InvalidArgument": "errors",
        "InvalidServiceUrl": "errors",
        "InvalidTopicName": "errors",
        "OperationTimeout": "errors",
        "ServiceUrl": "names",
        "TopicName": "names",
        "parse_service_url": "names",
        "parse_topic": "names",
        "Connection": "net.connection",
        "BrokerAddress": "net.lookup",
        "ConnectionPool": "net.lookup",
        "LookupService": "net.lookup",
        "CertificateRefused": "net.transport",
        "TlsMismatch": "net.transport",
        "parse_position": "read.bounds",
        "ChunkLimits": "read.chunk_limits",
        "LastIds": "read.last_ids",
        "PartitionEnd": "read.last_ids",
        "PartitionReader": "read.reader",
        "MessageRef": "read.sinks",
        "SizedRef": "read.sized_scan",
        "Action": "retry",
        "Backoff": "retry",
        "classify": "retry",
        "VersionedSchema": "schemas",
        "Transaction": "txn",
        "TransactionFailed": "txn",
        "TransactionState": "txn",
        "TransactionsUnavailable": "txn",
    },
)

__all__ = [
    "Transaction",
    "TransactionFailed",
    "TransactionState",
    "TransactionsUnavailable",
    "ChunkLimits",
    "Authentication",
    "BasicAuthentication",
    "NoAuthentication",
    "OAuth2ClientCredentials",
    "SaslAuthentication",
    "TlsAuthentication",
    "TokenAuthentication",
    "PulsarClient",
    "parse_position",
    "PartitionReader",
    "MessageRef",
    "SizedRef",
    "LastIds",
    "PartitionEnd",
    "VersionedSchema",
    "BrokerAddress",
    "ConnectionPool",
    "LookupService",
    "ClientConfig",
    "Connection",
    "TlsOptions",
    "Action",
    "Backoff",
    "classify",
    "ClientError",
    "ConnectError",
    "ConnectionClosed",
    "BrokerUnsupported",
    "InvalidArgument",
    "InvalidServiceUrl",
    "InvalidTopicName",
    "OperationTimeout",
    "TlsMismatch",
    "CertificateRefused",
    "ServiceUrl",
    "TopicName",
    "parse_service_url",
    "parse_topic",
]
