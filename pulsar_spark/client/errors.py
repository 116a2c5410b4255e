"""Errors of the client layer, in the one hierarchy rooted at :class:`PulsarError`.

::

    PulsarError
    +-- ClientError                  misuse or configuration: fatal
    |   +-- InvalidServiceUrl
    |   +-- InvalidTopicName
    |   +-- InvalidArgument          also a ValueError: a bad argument value or row
    |   +-- BrokerUnsupported        the broker's release lacks what the operation needs
    |   +-- TransactionsUnavailable  (txn) the broker has no transaction coordinator
    |   +-- TransactionFailed        (txn) a transaction that can only abort: write again
    |                                in a new one
    +-- ConnectError                 retriable: could not reach or handshake
    +-- ConnectionClosed             retriable: the connection went away
    +-- OperationTimeout             retriable: no answer within the deadline
    +-- ServerError (protocol.errors) an ERROR from the broker, per code
    +-- ProtocolError (protocol.errors)
        +-- UnexpectedAnswer         fatal: a request answered with another command type

Broker errors keep the per-code classes of :mod:`pulsar_spark.protocol.errors`
(``ServiceNotReadyError`` is retriable, ``AuthenticationError`` is not, ...).
"""

from __future__ import annotations

from pulsar_spark.protocol.errors import ProtocolError, PulsarError

__all__ = [
    "BrokerUnsupported",
    "ClientError",
    "ConnectError",
    "ConnectionClosed",
    "InvalidArgument",
    "InvalidServiceUrl",
    "InvalidTopicName",
    "OperationTimeout",
    "UnexpectedAnswer",
]


class ClientError(PulsarError):
    """The client was asked for something it cannot do (bad option, bad name)."""


class InvalidServiceUrl(ClientError):
    """A service URL that is not ``pulsar://`` or ``pulsar+ssl://host[:port][,host...]``."""


class InvalidTopicName(ClientError):
    """A topic name that does not parse."""


class InvalidArgument(ClientError, ValueError):
    """An argument value the client cannot use (a queue size, a row to send, ...)."""


class BrokerUnsupported(ClientError):
    """The broker's release lacks a feature or behaviour the operation needs; the
    message names the broker's version, the feature and the releases that have it."""


class UnexpectedAnswer(ProtocolError):
    """The broker answered a request with a command of another type than the
    request calls for: the peer breaks the protocol; retrying cannot help."""


class ConnectError(PulsarError):
    """A broker could not be reached, or the handshake failed for a transient reason."""

    retriable = True


class ConnectionClosed(PulsarError):
    """The connection closed while an operation was under way."""

    retriable = True


class OperationTimeout(PulsarError):
    """The broker did not answer within the operation timeout."""

    retriable = True
