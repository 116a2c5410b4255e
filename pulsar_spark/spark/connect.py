"""Clients for Spark tasks and planning, from parsed options.

In a Spark task, clients are the Python worker's, lent and given back
(:mod:`.worker_clients`). Authentication objects hold locks and cached tokens, so
options carry only an :class:`~pulsar_spark.spark.options.auth.AuthSpec`; each process
builds its own provider here. Java key stores (``useKeyStoreTls``, the ``AuthenticationKeyStoreTls``
plugin) are read here too, in each process: Python's ``ssl`` takes CA certificates
and a client certificate from files, so the PEM text goes into a private directory
(0700, files 0600) that closing the client removes (:class:`KeyStoreClient`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pulsar_spark.client import (
    Authentication,
    BasicAuthentication,
    ClientError,
    NoAuthentication,
    OAuth2ClientCredentials,
    PulsarClient,
    SaslAuthentication,
    TlsAuthentication,
    TokenAuthentication,
)

from .errors import PulsarOptionError
from .worker_clients import in_task, lend

if TYPE_CHECKING:  # key stores load for the options that name one
    from pulsar_spark.client.net.keystores import TlsFiles

    from .options.auth import AuthSpec
    from .options.parse import PulsarOptions

__all__ = ["KeyStoreClient", "authentication", "open_client"]

_PARAMS = "pulsar.client.authParams"


def authentication(spec: AuthSpec | None, files: TlsFiles | None = None) -> Authentication | None:
    """The client's provider for ``spec`` (``files``: where a key store's certificate
    and key are written, for ``AuthenticationKeyStoreTls``).

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
        if spec.kind == "keystoretls":
            if files is None:
                raise PulsarOptionError(_PARAMS, "AuthenticationKeyStoreTls needs a client")
            cert, key = _client_certificate(
                files,
                params["keyStorePath"],
                params.get("keyStoreType", "JKS"),
                params.get("keyStorePassword"),
                _PARAMS,
            )
            return TlsAuthentication(cert, key)
        if spec.kind == "sasl":
            return SaslAuthentication(
                principal=params.get("principal"),
                keytab=params.get("keyTab"),
                ticket_cache=params.get("ticketCache"),
                jaas_file=params.get("jaasConfFile"),
                jaas_section=params.get("saslJaasClientSectionName", "PulsarClient"),
                server_type=params.get("serverType", "broker"),
                krb5_conf=params.get("krb5Conf"),
            )
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


class KeyStoreClient(PulsarClient):
    """A :class:`PulsarClient` whose TLS material came from key stores: closing it
    also removes the PEM files written for Python's ``ssl``."""

    def __init__(self, service_url: str, *, tls_files: TlsFiles, **kwargs: Any) -> None:
        self.tls_files = tls_files
        super().__init__(service_url, **kwargs)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.tls_files.close()


def _client_certificate(
    files: TlsFiles, path: str, kind: str, password: str | None, option: str
) -> tuple[str, str]:
    """The key store's certificate chain and key, written to ``files``."""
    from pulsar_spark.client.net.keystores import KeyStoreError, load_store

    try:
        found = load_store(path, kind, password)
    except KeyStoreError as exc:
        raise PulsarOptionError(option, str(exc)) from None
    if not found.key_pem:
        msg = f"key store {path!r} holds no private key entry (a client certificate needs one)"
        raise PulsarOptionError(option, msg)
    return files.write("client.cert.pem", found.chain_pem), files.write(
        "client.key.pem", found.key_pem
    )


def _trust_file(options: PulsarOptions, files: TlsFiles) -> str | None:
    """The trust store's CA certificates as a PEM file (None: the system's CAs)."""
    from pulsar_spark.client.net.keystores import KeyStoreError, load_store

    if options.trust_store_path is None:
        return None
    option = "pulsar.client.tlsTrustStorePath"
    try:
        found = load_store(
            options.trust_store_path, options.trust_store_type, options.trust_store_password
        )
    except KeyStoreError as exc:
        raise PulsarOptionError(option, str(exc)) from None
    if not found.trusted_pem:
        msg = f"trust store {options.trust_store_path!r} holds no certificate"
        raise PulsarOptionError(option, msg)
    return files.write("trusted.pem", found.trusted_pem)


def open_client(
    options: PulsarOptions, *, operation_timeout: float | None = None, reuse: bool | None = None
) -> PulsarClient:
    """A :class:`PulsarClient` configured by ``options`` (close it, or use ``with``).

    ``reuse`` (by default: whether a Spark task runs here, not planning): lend one of
    the Python worker's pooled clients for these settings; closing it gives it back
    for the worker's next task (:mod:`.worker_clients`).
    """
    if reuse is None:
        reuse = in_task()
    if reuse:
        return lend(options, operation_timeout, _new_client)
    return _new_client(options, operation_timeout)


def _new_client(options: PulsarOptions, operation_timeout: float | None) -> PulsarClient:
    stores = options.use_key_store_tls or (options.auth and options.auth.kind == "keystoretls")
    if not stores:
        return PulsarClient(options.service_url, **_settings(options, operation_timeout))
    from pulsar_spark.client.net.keystores import TlsFiles

    files = TlsFiles()
    try:
        settings = _settings(options, operation_timeout, files)
        if options.use_key_store_tls:
            settings["tls_trust_certs_file"] = _trust_file(options, files)
            if options.key_store_path is not None:
                cert, key = _client_certificate(
                    files,
                    options.key_store_path,
                    options.key_store_type,
                    options.key_store_password,
                    "pulsar.client.tlsKeyStorePath",
                )
                # The certificate goes with whatever authentication is used (as in Java):
                # the TLS context reads it from the provider.
                auth = settings["auth"] or NoAuthentication()
                auth.tls_cert_file, auth.tls_key_file = cert, key
                settings["auth"] = auth
        return KeyStoreClient(options.service_url, tls_files=files, **settings)
    except BaseException:
        files.close()
        raise


def _settings(
    options: PulsarOptions, operation_timeout: float | None, files: TlsFiles | None = None
) -> dict[str, Any]:
    return {
        "auth": authentication(options.auth, files),
        "tls_trust_certs_file": options.tls_trust_certs_file,
        "tls_validate_hostname": options.tls_validate_hostname,
        "tls_allow_insecure": options.tls_allow_insecure,
        "connect_timeout": options.connect_timeout,
        "operation_timeout": operation_timeout or options.operation_timeout,
        "keepalive_interval": float(options.keepalive_interval),
        "listener_name": options.listener_name,
        "read_buffer_bytes": options.read_buffer_bytes,
        "subscription_prefix": options.subscription_prefix,
        "read_compacted": options.read_compacted,
        "chunk_limits": options.chunk_limits,
    }
