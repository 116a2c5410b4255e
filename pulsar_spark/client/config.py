"""The client's configuration: one frozen object, built once, read by every connection.

:class:`ClientConfig` holds the parsed service URL, authentication, TLS,
timeouts, keep-alive and listener name. :class:`~.client.PulsarClient` builds
it from its keyword arguments (:meth:`ClientConfig.build` checks them and
parses the service URL, once) and passes it to the connection pool, the
lookup service and each :class:`~.connection.Connection`.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from .auth import Authentication, NoAuthentication
from .errors import ClientError
from .names import ServiceUrl, parse_service_url

__all__ = ["ClientConfig", "TlsOptions"]


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
    """Everything a connection needs to know, fixed for the client's life.

    Attributes:
        service_url: where discovery starts (parsed).
        auth: authentication provider.
        tls: TLS settings; None exactly when the service URL is plain ``pulsar://``.
        connect_timeout: seconds for TCP connect, TLS and handshake.
        operation_timeout: default seconds a request waits for its answer.
        keepalive_interval: seconds of silence after which a PING goes out;
            after two intervals without any data a connection is dead.
        listener_name: advertised listener to look topics up for.
    """

    service_url: ServiceUrl
    auth: Authentication = field(default_factory=NoAuthentication)
    tls: TlsOptions | None = None
    connect_timeout: float = 10.0
    operation_timeout: float = 30.0
    keepalive_interval: float = 30.0
    listener_name: str | None = None

    @classmethod
    def build(
        cls,
        service_url: str | ServiceUrl,
        *,
        auth: Authentication | None = None,
        tls_trust_certs_file: str | None = None,
        tls_validate_hostname: bool = True,
        tls_allow_insecure: bool = False,
        connect_timeout: float = 10.0,
        operation_timeout: float = 30.0,
        keepalive_interval: float = 30.0,
        listener_name: str | None = None,
    ) -> ClientConfig:
        """Check the settings and parse the service URL.

        Raises:
            InvalidServiceUrl: the URL does not parse.
            ClientError: a timeout or interval that is not a positive number.
        """
        for name, value in (
            ("connect_timeout", connect_timeout),
            ("operation_timeout", operation_timeout),
            ("keepalive_interval", keepalive_interval),
        ):
            if not value > 0:
                msg = f"{name} must be a positive number of seconds, not {value!r}"
                raise ClientError(msg)
        url = service_url if isinstance(service_url, ServiceUrl) else parse_service_url(
            service_url
        )
        tls = (
            TlsOptions(tls_trust_certs_file, tls_validate_hostname, tls_allow_insecure)
            if url.tls
            else None
        )
        return cls(
            url,
            auth or NoAuthentication(),
            tls,
            connect_timeout,
            operation_timeout,
            keepalive_interval,
            listener_name,
        )
