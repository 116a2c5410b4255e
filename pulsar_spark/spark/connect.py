"""Clients for Spark tasks and planning, from parsed options.

Authentication objects hold locks and cached tokens, so options carry only
an :class:`~pulsar_spark.spark.option_auth.AuthSpec`; each process builds its own
provider here.
"""

from __future__ import annotations

from ..client import (
    Authentication,
    BasicAuthentication,
    OAuth2ClientCredentials,
    PulsarClient,
    TlsAuthentication,
    TokenAuthentication,
)
from ..client.errors import ClientError
from .errors import PulsarOptionError
from .options import AuthSpec, PulsarOptions

__all__ = ["authentication", "open_client"]

_PARAMS = "pulsar.client.authParams"


def authentication(spec: AuthSpec | None) -> Authentication | None:
    """The client's provider for ``spec``.

    Raises:
        PulsarOptionError: naming ``pulsar.client.authParams`` (a missing token
            file, certificate or key file, ...).
    """
    if spec is None:
        return None
    params = dict(spec.params)
    try:
        if spec.kind == "token":
            if "file" in params:
                return TokenAuthentication(token_file=params["file"])
            return TokenAuthentication(params["token"])
        if spec.kind == "basic":
            return BasicAuthentication(params["userId"], params["password"])
        if spec.kind == "tls":
            return TlsAuthentication(params["tlsCertFile"], params["tlsKeyFile"])
        return OAuth2ClientCredentials(
            params["issuerUrl"],
            client_id=params.get("clientId"),
            client_secret=params.get("clientSecret"),
            private_key=params.get("privateKey"),
            audience=params.get("audience"),
            scope=params.get("scope"),
        )
    except ClientError as exc:
        raise PulsarOptionError(_PARAMS, str(exc)) from None


def open_client(options: PulsarOptions, *, operation_timeout: float | None = None) -> PulsarClient:
    """A :class:`PulsarClient` configured by ``options`` (close it, or use ``with``)."""
    return PulsarClient(
        options.service_url,
        auth=authentication(options.auth),
        tls_trust_certs_file=options.tls_trust_certs_file,
        tls_validate_hostname=options.tls_validate_hostname,
        tls_allow_insecure=options.tls_allow_insecure,
        connect_timeout=options.connect_timeout,
        operation_timeout=operation_timeout or options.operation_timeout,
        read_buffer_bytes=options.read_buffer_bytes,
    )
