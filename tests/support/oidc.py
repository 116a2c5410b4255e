"""An OpenID Connect issuer for the tests: what Apache Pulsar's ``AuthenticationProviderOpenID``
checks tokens against, and what the connector's OAuth2 client-credentials flow asks for them.

:class:`OidcIssuer` serves, over HTTP on a free loopback port:

``/.well-known/openid-configuration``
    the discovery document: ``issuer``, ``jwks_uri``, ``token_endpoint``;
``/jwks``
    the public keys tokens are signed with (RSA, ``RS256``), each with its ``kid``;
    :meth:`OidcIssuer.rotate` adds a new key and signs with it from then on, the old one
    staying published as a real issuer does while its tokens live;
``/token``
    the client-credentials grant (form-encoded ``grant_type``, ``client_id``,
    ``client_secret``, ``audience``, ``scope``): a signed JWT whose ``sub`` is the client
    id, with the audience asked for (or :attr:`OidcIssuer.audience`), ``iat`` and ``nbf``
    (now: Pulsar's provider requires both), ``exp`` (``ttl`` seconds later) and ``iss``. A
    wrong secret or an unknown client is HTTP 401 ``invalid_client``.

Every token issued is counted per client (:attr:`OidcIssuer.issued`), so a test can tell
how many times the driver and the executors fetched one.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["OidcIssuer", "SigningKey"]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


@dataclass
class SigningKey:
    """An RSA key of the issuer, with its key id."""

    kid: str
    private: Any = field(repr=False)

    @classmethod
    def generate(cls) -> SigningKey:
        from cryptography.hazmat.primitives.asymmetric import rsa

        return cls(secrets.token_hex(6), rsa.generate_private_key(65537, 2048))

    def jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        return {
            "kty": "RSA",
            "use": "sig",
            "alg": "RS256",
            "kid": self.kid,
            "n": _b64url(_int_bytes(numbers.n)),
            "e": _b64url(_int_bytes(numbers.e)),
        }

    def sign(self, claims: dict[str, Any]) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        header = {"alg": "RS256", "typ": "JWT", "kid": self.kid}
        signing_input = (
            _b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        signature = self.private.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"


class OidcIssuer:
    """The issuer, serving from :meth:`start` to :meth:`close` (a context manager too).

    Args:
        clients: client id -> client secret.
        audience: the audience of tokens whose request names none.
        ttl: seconds a token lives.
    """

    def __init__(
        self, clients: dict[str, str], *, audience: str = "pulsar", ttl: float = 3600
    ) -> None:
        self.clients = dict(clients)
        self.audience = audience
        self.ttl = ttl
        self.keys = [SigningKey.generate()]
        #: Tokens issued, by client id.
        self.issued: Counter[str] = Counter()
        #: Token requests refused, by client id.
        self.refused: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------

    def start(self) -> OidcIssuer:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: the tests' output is for the tests

            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    self._json(200, issuer.discovery())
                elif self.path == "/jwks":
                    self._json(200, issuer.jwks())
                else:
                    self._json(404, {"error": "not_found"})

            def do_POST(self) -> None:
                if self.path != "/token":
                    self._json(404, {"error": "not_found"})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                form = urllib.parse.parse_qs(self.rfile.read(length).decode())
                status, body = issuer.token_reply({k: v[0] for k, v in form.items()})
                self._json(status, body)

            def _json(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="oidc-issuer", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> OidcIssuer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what it serves -----------------------------------------------------------------

    @property
    def url(self) -> str:
        """The issuer URL (``iss`` of its tokens, ``issuerUrl`` of the client options)."""
        assert self._server is not None, "the issuer is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "jwks_uri": f"{self.url}/jwks",
            "token_endpoint": f"{self.url}/token",
            "grant_types_supported": ["client_credentials"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "response_types_supported": ["token"],
            "subject_types_supported": ["public"],
        }

    def jwks(self) -> dict[str, Any]:
        with self._lock:
            return {"keys": [key.jwk() for key in self.keys]}

    def rotate(self) -> None:
        """Sign with a new key from now on; the old ones stay in the JWKS."""
        with self._lock:
            self.keys.append(SigningKey.generate())

    def token_for(self, subject: str, *, audience: str | None = None, ttl: float | None = None,
                  key: SigningKey | None = None) -> str:  # fmt: skip
        """A token as the token endpoint issues it (``ttl`` may be negative: expired)."""
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": subject,
            "aud": audience or self.audience,
            "iat": now,
            "nbf": now,
            "exp": now + int(self.ttl if ttl is None else ttl),
        }
        with self._lock:
            signer = key or self.keys[-1]
        return signer.sign(claims)

    def token_reply(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The token endpoint's status and body for a form."""
        client = form.get("client_id", "")
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        if self.clients.get(client) is None or not secrets.compare_digest(
            self.clients[client], form.get("client_secret", "")
        ):
            with self._lock:
                self.refused[client] += 1
            return 401, {"error": "invalid_client", "error_description": "bad client credentials"}
        token = self.token_for(client, audience=form.get("audience") or None)
        with self._lock:
            self.issued[client] += 1
        reply: dict[str, Any] = {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(self.ttl),
        }
        if form.get("scope"):
            reply["scope"] = form["scope"]
        return 200, reply
