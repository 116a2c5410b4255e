"""Synchronous Pulsar client over the sans-IO protocol layer.

Work in progress: connection, authentication, discovery and the reader are in
place; the producer follows.
"""

from .auth import (
    Authentication,
    BasicAuthentication,
    NoAuthentication,
    OAuth2ClientCredentials,
    TlsAuthentication,
    TokenAuthentication,
)
from .client import PulsarClient, parse_position
from .connection import Connection, TlsOptions
from .errors import (
    ClientError,
    ConnectError,
    ConnectionClosed,
    InvalidServiceUrl,
    InvalidTopicName,
    OperationTimeout,
)
from .lookup import BrokerAddress, ConnectionPool, LookupService
from .names import ServiceUrl, TopicName, parse_service_url, parse_topic
from .reader import PartitionReader

__all__ = [
    "Authentication", "BasicAuthentication", "NoAuthentication", "OAuth2ClientCredentials",
    "TlsAuthentication", "TokenAuthentication",
    "PulsarClient", "parse_position", "PartitionReader",
    "BrokerAddress", "ConnectionPool", "LookupService",
    "Connection", "TlsOptions",
    "ClientError", "ConnectError", "ConnectionClosed", "InvalidServiceUrl", "InvalidTopicName",
    "OperationTimeout",
    "ServiceUrl", "TopicName", "parse_service_url", "parse_topic",
]
