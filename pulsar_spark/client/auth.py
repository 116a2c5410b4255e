"""Authentication providers: what goes into CONNECT and AUTH_RESPONSE.

=============  ==================  ============================================
provider       auth_method_name    auth_data
=============  ==================  ============================================
none           (not sent)
token          ``token``           the token (literal, from a file, or a callable)
basic          ``basic``           ``user:password``
tls            ``tls``             none: the client certificate of the TLS
                                   handshake is the identity
oauth2         ``token``           an access token from the issuer's token
                                   endpoint (client credentials), cached until
                                   shortly before it expires
sasl           ``sasl``            Kerberos: SASL GSSAPI tokens, several steps
                                   (the broker's challenges are evaluated)
=============  ==================  ============================================

:meth:`Authentication.auth_data` is called for every CONNECT and every
AUTH_CHALLENGE, so it always returns a fresh credential: a token file is
read again, an expired OAuth2 token is fetched again.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ClientError, ConnectError
from .gssapi import KerberosCredentials, SaslGssapiClient
from .jaas import kerberos_login

__all__ = [
    "REFRESH_CHALLENGE",
    "AuthExchange",
    "Authentication",
    "NoAuthentication",
    "TokenAuthentication",
    "BasicAuthentication",
    "TlsAuthentication",
    "OAuth2ClientCredentials",
    "SaslAuthentication",
]


#: The challenge a broker sends a connected client whose credentials expired
#: (``authenticationRefreshCheckSeconds``): authenticate again from the start.
REFRESH_CHALLENGE = b"PulsarAuthRefresh"


class Authentication:
    """Base class: a method name and fresh credential bytes."""

    method_name: str = "none"
    #: Client certificate and key files to present in the TLS handshake.
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    def auth_data(self) -> bytes:
        """A fresh credential for CONNECT or AUTH_RESPONSE."""
        return b""

    @property
    def sends_credentials(self) -> bool:
        return self.method_name != "none"

    def exchange(self, host: str) -> AuthExchange:
        """One connection's side of the authentication, to the broker (or proxy) at
        ``host``."""
        return AuthExchange(self)


class AuthExchange:
    """One connection's side of the authentication: the credential in CONNECT, then an
    answer to each AUTH_CHALLENGE.

    This one is for single-step methods (token, basic, OAuth2): every answer is the
    provider's current credential, whatever the challenge says. A multi-step method
    (SASL) overrides :meth:`answer` to evaluate the broker's challenge bytes.
    """

    def __init__(self, auth: Authentication) -> None:
        self.auth = auth

    def first(self) -> bytes:
        """The credential for CONNECT."""
        return self.auth.auth_data()

    def answer(self, challenge: bytes) -> bytes:
        """The credential for the AUTH_RESPONSE to ``challenge``."""
        return self.auth.auth_data()


class NoAuthentication(Authentication):
    """No authentication (the broker's default)."""


class TokenAuthentication(Authentication):
    """JWT token authentication.

    Args:
        token: the token itself, or a callable returning it.
        token_file: a file holding the token (read again on every use, so
            that a rotated file is picked up).
    """

    method_name = "token"

    def __init__(
        self, token: str | Callable[[], str] | None = None, *, token_file: str | None = None
    ) -> None:
        if (token is None) == (token_file is None):
            msg = "token authentication needs exactly one of token or token_file"
            raise ClientError(msg)
        self._token = token
        self._file = token_file
        if token_file is not None:
            self._read_file()  # fail early on a missing file

    def _read_file(self) -> str:
        path = self._file or ""
        if path.startswith("file://"):
            path = urllib.parse.urlsplit(path).path
        try:
            return Path(path).read_text().strip()
        except OSError as exc:
            msg = f"cannot read token file {self._file!r}: {exc.strerror or exc}"
            raise ClientError(msg) from exc

    def auth_data(self) -> bytes:
        if self._file is not None:
            return self._read_file().encode()
        token = self._token() if callable(self._token) else self._token
        return (token or "").encode()


class BasicAuthentication(Authentication):
    """Basic authentication: ``user:password`` as auth data."""

    method_name = "basic"

    def __init__(self, user_id: str, password: str) -> None:
        if not user_id or ":" in user_id:
            msg = "basic authentication needs a user id without ':'"
            raise ClientError(msg)
        self._data = f"{user_id}:{password}".encode()

    def auth_data(self) -> bytes:
        return self._data


class TlsAuthentication(Authentication):
    """Mutual TLS: the client certificate is the identity."""

    method_name = "tls"

    def __init__(self, cert_file: str, key_file: str) -> None:
        for what, path in (("certificate", cert_file), ("key", key_file)):
            if not Path(path).is_file():
                msg = f"TLS client {what} file {path!r} does not exist"
                raise ClientError(msg)
        self.tls_cert_file = cert_file
        self.tls_key_file = key_file


class OAuth2ClientCredentials(Authentication):
    """OAuth2 client-credentials flow; sent to the broker as a token.

    Args:
        issuer_url: the issuer; its token endpoint is discovered from
            ``<issuer_url>/.well-known/openid-configuration``.
        client_id: the client's id (or ``private_key``, a JSON key file with
            ``client_id`` and ``client_secret``).
        client_secret: the client's secret.
        private_key: a JSON key file (a path, a ``file://`` or ``data:`` URL) holding
            ``client_id`` and ``client_secret``, instead of giving them.
        audience: passed to the token endpoint when given.
        scope: passed to the token endpoint when given.
        timeout: seconds for each HTTP request.
    """

    method_name = "token"
    #: Fetch a new token this many seconds before the cached one expires, or after four
    #: fifths of its lifetime when that comes first (a token living 30 s is used for 24 s,
    #: not fetched again for every connection).
    EXPIRY_MARGIN = 30.0

    def __init__(
        self,
        issuer_url: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        private_key: str | None = None,
        audience: str | None = None,
        scope: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        if private_key is not None:
            key = _read_key_file(private_key)
            client_id = client_id or key.get("client_id")
            client_secret = client_secret or key.get("client_secret")
        if not client_id or not client_secret:
            msg = "OAuth2 needs client_id and client_secret (or a private_key file with both)"
            raise ClientError(msg)
        self._issuer = issuer_url.rstrip("/")
        self._form = {
            "grant_type": "client_credentials",
            "client_id": client_id,
            "client_secret": client_secret,
        }
        if audience:
            self._form["audience"] = audience
        if scope:
            self._form["scope"] = scope
        self._timeout = timeout
        self._lock = threading.Lock()
        self._endpoint: str | None = None
        self._token: str | None = None
        self._expires_at = 0.0

    def auth_data(self) -> bytes:
        with self._lock:
            if self._token is None or time.monotonic() >= self._expires_at:
                self._fetch()
            assert self._token is not None
            return self._token.encode()

    def _fetch(self) -> None:
        if self._endpoint is None:
            config = self._get_json(f"{self._issuer}/.well-known/openid-configuration", None)
            endpoint = config.get("token_endpoint")
            if not isinstance(endpoint, str):
                msg = f"OAuth2 issuer {self._issuer} names no token_endpoint"
                raise ConnectError(msg)
            self._endpoint = endpoint
        reply = self._get_json(self._endpoint, urllib.parse.urlencode(self._form).encode())
        token = reply.get("access_token")
        if not isinstance(token, str):
            msg = f"OAuth2 token endpoint {self._endpoint} returned no access_token"
            raise ConnectError(msg)
        lifetime = float(reply.get("expires_in") or 3600)
        self._token = token
        margin = min(self.EXPIRY_MARGIN, lifetime / 5)
        self._expires_at = time.monotonic() + max(lifetime - margin, 0.0)

    def _get_json(self, url: str, form: bytes | None) -> dict[str, Any]:
        import urllib.error  # (with http.client and ssl: OAuth2 only)
        import urllib.request

        headers = {"Accept": "application/json"}
        if form is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        request = urllib.request.Request(url, data=form, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                reply: dict[str, Any] = json.loads(response.read())
                return reply
        except urllib.error.HTTPError as exc:
            body = exc.read()[:200].decode("utf-8", "replace")
            msg = f"OAuth2 request to {url} failed: HTTP {exc.code} {body}"
            if form is not None and exc.code in (400, 401):
                msg = (
                    f"OAuth2 token endpoint {url} refused the credentials of client "
                    f"{self._form['client_id']!r} (HTTP {exc.code} {body}): check the client "
                    "id and secret (clientId and clientSecret, or the privateKey file), and "
                    "the audience and scope"
                )
            raise ClientError(msg) from exc
        except (OSError, ValueError) as exc:
            msg = f"OAuth2 request to {url} failed: {exc}"
            raise ConnectError(msg) from exc


class SaslAuthentication(Authentication):
    """Kerberos through SASL ``GSSAPI``, as the Java client's ``AuthenticationSasl``.

    The login is a keytab and principal, a ticket cache, or the section
    ``jaas_section`` of a JAAS file (its ``Krb5LoginModule`` options); with none of
    these, the default credentials (``$KRB5CCNAME``, as after ``kinit``). Each connection
    authenticates to ``<server_type>/<host>`` (``broker/broker-1.example.com``: the host
    the connection goes to, as the broker's service principal names it); tickets from a
    keytab are obtained again once they expire.

    Args:
        principal: the client principal (``spark@EXAMPLE.COM``).
        keytab: a keytab file holding the principal's keys.
        ticket_cache: a ticket cache (``FILE:/tmp/krb5cc_1000``) instead of a keytab.
        jaas_file: a JAAS login configuration file.
        jaas_section: its section (the Java client's ``saslJaasClientSectionName``).
        server_type: ``broker``, or ``proxy`` when connecting through a Pulsar proxy.
        krb5_conf: the Kerberos configuration file (``krb5.conf``: realms, KDCs) when not
            the system's; it becomes ``$KRB5_CONFIG`` of the process, which Kerberos reads
            once per process: a process using two different files is refused.

    Raises:
        KerberosError: a keytab that does not exist.
        JaasError: a JAAS file that cannot be read, or without a Kerberos login.
    """

    method_name = "sasl"

    def __init__(
        self,
        *,
        principal: str | None = None,
        keytab: str | None = None,
        ticket_cache: str | None = None,
        jaas_file: str | None = None,
        jaas_section: str = "PulsarClient",
        server_type: str = "broker",
        krb5_conf: str | None = None,
    ) -> None:
        if krb5_conf is not None:
            _use_krb5_conf(krb5_conf)
        if jaas_file is not None:
            login = kerberos_login(jaas_file, jaas_section)
            principal = principal or login.principal
            keytab = keytab or login.keytab
            if keytab is None:  # with a keytab, a JAAS ticketCache is not written to
                ticket_cache = ticket_cache or login.ticket_cache
        if not server_type or "/" in server_type or "@" in server_type:
            msg = f"SASL serverType {server_type!r} must be a service name such as broker"
            raise ClientError(msg)
        self.credentials = _shared_credentials(principal, keytab, ticket_cache)
        self.server_type = server_type.lower()

    def exchange(self, host: str) -> AuthExchange:
        return _SaslExchange(self, host)


def _use_krb5_conf(path: str) -> None:
    if not Path(path).is_file():
        msg = f"Kerberos configuration file {path} (krb5Conf) does not exist"
        raise ClientError(msg)
    current = os.environ.get("KRB5_CONFIG")
    if current and current != path:
        msg = (
            f"Kerberos configuration file {path} (krb5Conf) is not the one this process "
            f"already uses (KRB5_CONFIG={current}): Kerberos reads one per process"
        )
        raise ClientError(msg)
    if current != path:
        os.environ["KRB5_CONFIG"] = path


#: One credentials object per login in a process: each holds tickets (a ``MEMORY:`` cache
#: for a keytab, which lives as long as the process) and logs in to the KDC once, however
#: many clients the process makes with the same options.
_CREDENTIALS: dict[tuple[str | None, str | None, str | None], KerberosCredentials] = {}
_CREDENTIALS_LOCK = threading.Lock()


def _shared_credentials(
    principal: str | None, keytab: str | None, ticket_cache: str | None
) -> KerberosCredentials:
    key = (principal, keytab, ticket_cache)
    with _CREDENTIALS_LOCK:
        found = _CREDENTIALS.get(key)
        if found is None:
            found = _CREDENTIALS[key] = KerberosCredentials(principal, keytab, ticket_cache)
        return found


class _SaslExchange(AuthExchange):
    """One connection's SASL GSSAPI conversation; a refresh starts a new one."""

    def __init__(self, auth: SaslAuthentication, host: str) -> None:
        super().__init__(auth)
        self._sasl = auth
        self._host = host
        self._client: SaslGssapiClient | None = None
        self._lock = threading.Lock()  # a SASL client is used by one thread at a time

    def first(self) -> bytes:
        with self._lock:
            return self._start()

    def _start(self) -> bytes:
        if self._client is not None:
            self._client.close()
        self._client = SaslGssapiClient(self._sasl.credentials, self._sasl.server_type, self._host)
        return self._client.initial_response()

    def answer(self, challenge: bytes) -> bytes:
        with self._lock:
            if challenge == REFRESH_CHALLENGE or self._client is None or self._client.complete:
                return self._start()
            return self._client.evaluate_challenge(challenge)


def _read_key_file(path: str) -> dict[str, Any]:
    """An OAuth2 key file's JSON: a path, a ``file://`` URL or a ``data:`` URL (the
    Java client's inline form). A ``data:`` URL holds the secret: errors never show it."""
    shown = "given as a data: URL (not shown)" if path.startswith("data:") else repr(path)
    try:
        if path.startswith("data:"):
            header, _, body = path.partition(",")
            raw = (
                base64.b64decode(body, validate=True)
                if header.endswith(";base64")
                else (urllib.parse.unquote_to_bytes(body))
            )
            data = json.loads(raw)
        else:
            if path.startswith("file://"):
                path = urllib.parse.urlsplit(path).path
            data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        detail = "not base64 or percent-encoded JSON" if path.startswith("data:") else str(exc)
        msg = f"cannot read the OAuth2 key file {shown}: {detail}"
        raise ClientError(msg) from None
    if not isinstance(data, dict):
        msg = f"the OAuth2 key file {shown} is not a JSON object"
        raise ClientError(msg)
    return data
