"""Errors of the client layer, in the one hierarchy rooted at :class:`PulsarError`.

::

    PulsarError
    +-- ClientError                  misuse or configuration: fatal
    |   +-- InvalidServiceUrl
    |   +-- InvalidTopicName
    +-- ConnectError                 retriable: could not reach or handshake
    +-- ConnectionClosed             retriable: the connection went away
    +-- OperationTimeout             retriable: no answer within the deadline
    +-- ServerError (protocol.errors) an ERROR from the broker, per code

Broker errors keep the per-code classes of :mod:`pulsar_spark.protocol.errors`
(``ServiceNotReadyError`` is retriable, ``AuthenticationError`` is not, ...).
"""

from __future__ import annotations

from ..protocol.errors import PulsarError, ServerError, server_error

__all__ = [
    "ClientError",
    "ConnectError",
    "ConnectionClosed",
    "InvalidServiceUrl",
    "InvalidTopicName",
    "OperationTimeout",
    "PulsarError",
    "ServerError",
    "server_error",
]


class ClientError(PulsarError):
    """The client was asked for something it cannot do (bad option, bad name)."""


class InvalidServiceUrl(ClientError):
    """A service URL that is not ``pulsar://`` or ``pulsar+ssl://host[:port][,host...]``."""


class InvalidTopicName(ClientError):
    """A topic name that does not parse."""


class ConnectError(PulsarError):
    """A broker could not be reached, or the handshake failed for a transient reason."""

    retriable = True


class ConnectionClosed(PulsarError):
    """The connection closed while an operation was under way."""

    retriable = True


class OperationTimeout(PulsarError):
    """The broker did not answer within the operation timeout."""

    retriable = True
