"""Synchronous Pulsar client over the sans-IO protocol layer.

Work in progress: connection, authentication and names are in place; lookup,
reader, producer and the ``PulsarClient`` facade follow.
"""

from .auth import (
    Authentication,
    BasicAuthentication,
    NoAuthentication,
    OAuth2ClientCredentials,
    TlsAuthentication,
    TokenAuthentication,
)
from .connection import Connection, TlsOptions
from .errors import (
    ClientError,
    ConnectError,
    ConnectionClosed,
    InvalidServiceUrl,
    InvalidTopicName,
    OperationTimeout,
)
from .names import ServiceUrl, TopicName, parse_service_url, parse_topic

__all__ = [
    "Authentication", "BasicAuthentication", "NoAuthentication", "OAuth2ClientCredentials",
    "TlsAuthentication", "TokenAuthentication",
    "Connection", "TlsOptions",
    "ClientError", "ConnectError", "ConnectionClosed", "InvalidServiceUrl", "InvalidTopicName",
    "OperationTimeout",
    "ServiceUrl", "TopicName", "parse_service_url", "parse_topic",
]
