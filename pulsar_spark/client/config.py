"""The client's configuration: one frozen object, built once, read by every connection.

:class:`ClientConfig` holds the parsed service URL, authentication, TLS,
timeouts, keep-alive and listener name. :class:`~.client.PulsarClient` builds
it from its keyword arguments (parsing the service URL once; the timeouts are
checked here) and passes it to the connection pool, the lookup service and each
:class:`~pulsar_spark.client.net.connection.Connection`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .auth import Authentication, NoAuthentication
from .errors import ClientError
from .names import ServiceUrl, parse_service_url
from .read.chunk_limits import ChunkLimits
from .read.sub_names import check_prefix

if TYPE_CHECKING:
    import ssl

__all__ = ["DEFAULT_READ_BUFFER_BYTES", "ClientConfig", "TlsOptions"]

#: Bytes a read holds at most by default: room for it, the batch it hands out and the
#: interpreter in a 1 GiB Python worker (a Spark executor's).
DEFAULT_READ_BUFFER_BYTES = 256 << 20


@dataclass(frozen=True, slots=True)
class TlsOptions:
    """TLS settings for ``pulsar+ssl://``.

    Args:
        trust_certs_file: CA bundle to verify the broker with (system roots when None).
        validate_hostname: check the certificate against the host name.
        allow_insecure: accept any certificate (testing only).
    """

    trust_certs_file: str | None = None
    validate_hostname: bool = True
    allow_insecure: bool = False

    def context(self, auth: Authentication) -> ssl.SSLContext:
        import ssl  # TLS only: a plain connection never loads it

        ctx = ssl.create_default_context(cafile=self.trust_certs_file)
        if self.allow_insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = self.validate_hostname
        if auth.tls_cert_file:
            ctx.load_cert_chain(auth.tls_cert_file, auth.tls_key_file)
        return ctx


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Everything a connection needs to know, fixed for the client's life; use
    :func:`dataclasses.replace` for a variant.

    Attributes:
        service_url: where discovery starts (parsed once, by the client).
        auth: authentication provider.
        tls: TLS settings; None exactly when the service URL is plain ``pulsar://``
            (defaults when it is ``pulsar+ssl://`` and none are given).
        connect_timeout: seconds for TCP connect, TLS and handshake.
        operation_timeout: default seconds a request waits for its answer.
        keepalive_interval: seconds of silence after which a PING goes out;
            after two intervals without any data a connection is dead.
        listener_name: advertised listener to look topics up for.
        read_buffer_bytes: bytes a partition read holds at most (in flight, queued,
            chunked messages being put together, rows being built): see
            :class:`~pulsar_spark.client.read.reader.PartitionReader`.
        subscription_prefix: the start of every subscription name the client makes
            for itself (``<prefix>-reader-<hex>``; ``reader-<hex>`` when None), for
            namespaces with prefix subscription authorization
            (:mod:`pulsar_spark.client.read.sub_names`).
        read_compacted: readers subscribe with ``read_compacted``: up to the
            compaction horizon they get the latest message per key only.
        chunk_limits: how many incomplete chunked messages a read keeps, for how
            long, and whether it drops them beyond that
            (:mod:`pulsar_spark.client.read.chunk_limits`).
    """

    service_url: ServiceUrl
    auth: Authentication = field(default_factory=NoAuthentication)
    tls: TlsOptions | None = None
    connect_timeout: float = 10.0
    operation_timeout: float = 30.0
    keepalive_interval: float = 30.0
    listener_name: str | None = None
    read_buffer_bytes: int = DEFAULT_READ_BUFFER_BYTES
    subscription_prefix: str | None = None
    read_compacted: bool = False
    chunk_limits: ChunkLimits = field(default_factory=ChunkLimits)

    def __post_init__(self) -> None:
        """Check the timeouts; TLS settings apply to ``pulsar+ssl://`` only.

        Raises:
            ClientError: a timeout or interval that is not a positive number, or
                a subscription prefix :func:`~pulsar_spark.client.read.sub_names.check_prefix`
                refuses.
        """
        for name in ("connect_timeout", "operation_timeout", "keepalive_interval"):
            value = getattr(self, name)
            if not value > 0:
                msg = f"{name} must be a positive number of seconds, not {value!r}"
                raise ClientError(msg)
        if self.subscription_prefix is not None:
            check_prefix(self.subscription_prefix)
        if not self.service_url.tls:
            object.__setattr__(self, "tls", None)
        elif self.tls is None:
            object.__setattr__(self, "tls", TlsOptions())

    @classmethod
    def for_url(cls, url: str) -> ClientConfig:
        """Default settings for the service URL ``url``.

        Raises:
            InvalidServiceUrl: the URL does not parse.
        """
        return cls(parse_service_url(url))
