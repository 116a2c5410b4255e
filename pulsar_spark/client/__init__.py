"""Synchronous Pulsar client over the sans-IO protocol layer: connections, discovery,
readers (Arrow or ids only), producers, durable subscriptions.

:class:`PulsarClient` is the entry point; :class:`ClientConfig` is the frozen
configuration it builds once and hands to every connection.
"""

from .auth import (
    Authentication,
    BasicAuthentication,
    NoAuthentication,
    OAuth2ClientCredentials,
    TlsAuthentication,
    TokenAuthentication,
)
from .client import PulsarClient
from .config import ClientConfig, TlsOptions
from .errors import (
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
