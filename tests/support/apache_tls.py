"""Tokens and certificates of the secure Apache Pulsar test broker: HS256 JWTs, a CA, TLS keys.

:func:`make_token` signs an HS256 JWT for a role; :func:`generate_secure_settings` writes
a CA, a server certificate for ``localhost`` (DNS name only: ``127.0.0.1`` is the "wrong
host" for hostname verification), a client certificate (CN ``client-tls``, for mTLS), a
second, unrelated CA, an HS256 secret key and tokens for roles ``client`` and ``admin``,
and returns them as :class:`SecureSettings`.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SecureSettings", "generate_secure_settings", "make_token"]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_token(secret: bytes, subject: str, expires_in: float | None = None) -> str:
    """An HS256 JWT with ``sub`` = ``subject`` (the role) and, if given, ``exp``."""
    header = {"alg": "HS256", "typ": "JWT"}
    claims: dict[str, Any] = {"sub": subject}
    if expires_in is not None:
        claims["exp"] = int(time.time() + expires_in)
    signing_input = (
        _b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64url(json.dumps(claims, separators=(",", ":")).encode())
    )
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


@dataclass(frozen=True)
class SecureSettings:
    """Files and credentials of a TLS + token instance (all paths are strings)."""

    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    #: A second CA that signed nothing of this broker's ("wrong CA").
    other_ca_cert: str
    secret_key_file: str
    secret: bytes
    #: Role ``client``: produce and consume on ``public/default``.
    token: str
    #: Role ``admin``: a superuser.
    superuser_token: str
    client_role: str = "client"
    superuser_role: str = "admin"
    #: The subject of the client certificate (its role with mTLS).
    tls_client_role: str = "client-tls"
    #: Basic authentication: the ``htpasswd`` file the broker checks passwords against
    #: (``basicAuthConf``), with one user, whose id is its role (produce and consume on
    #: ``public/default``), and that user's password.
    htpasswd_file: str = ""
    basic_user: str = "spark-jobs"
    basic_password: str = ""

    def make_token(self, subject: str | None = None, expires_in: float | None = None) -> str:
        """A token signed with this broker's key (role ``client`` by default)."""
        return make_token(self.secret, subject or self.client_role, expires_in)


def _write_private(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


def generate_secure_settings(directory: Path) -> SecureSettings:
    """A CA, a server certificate for ``localhost``, a client certificate, a second CA,
    an HS256 secret key and two tokens, written into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def pem_key(k: ec.EllipticCurvePrivateKey) -> bytes:
        # PKCS#8: what the broker's Netty SslContext reads.
        return k.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        k = key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(name(cn))
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(k.public_key()), False)
            .sign(k, hashes.SHA256())
        )
        return cert, k

    def leaf(
        cn: str,
        issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
        usage: x509.ObjectIdentifier,
        dns: list[str],
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        k = key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(issuer[0].subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
                critical=False,
            )
        )
        if dns:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
            )
        return builder.sign(issuer[1], hashes.SHA256()), k

    def pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    root = ca("pulsar-spark test CA")
    other = ca("pulsar-spark unrelated CA")
    # DNS name only, on purpose: connecting to 127.0.0.1 is the hostname mismatch.
    server = leaf("localhost", root, ExtendedKeyUsageOID.SERVER_AUTH, ["localhost"])
    client = leaf("client-tls", root, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    d = directory
    (d / "ca.cert.pem").write_bytes(pem(root[0]))
    (d / "other-ca.cert.pem").write_bytes(pem(other[0]))
    (d / "server.cert.pem").write_bytes(pem(server[0]))
    (d / "client.cert.pem").write_bytes(pem(client[0]))
    secret = os.urandom(32)
    basic_password = secrets.token_urlsafe(18)
    htpasswd = d / "htpasswd"
    _write_private(htpasswd, f"spark-jobs:{_apr1(basic_password)}\n".encode())
    return SecureSettings(
        ca_cert=str(d / "ca.cert.pem"),
        ca_key=_write_private(d / "ca.key.pem", pem_key(root[1])),
        server_cert=str(d / "server.cert.pem"),
        server_key=_write_private(d / "server.key.pem", pem_key(server[1])),
        client_cert=str(d / "client.cert.pem"),
        client_key=_write_private(d / "client.key.pem", pem_key(client[1])),
        other_ca_cert=str(d / "other-ca.cert.pem"),
        secret_key_file=_write_private(d / "token-secret.key", secret),
        secret=secret,
        token=make_token(secret, "client"),
        superuser_token=make_token(secret, "admin"),
        htpasswd_file=str(htpasswd),
        basic_password=basic_password,
    )


def _apr1(password: str) -> str:
    """``password`` as an Apache MD5 (``$apr1$``) ``htpasswd`` entry, by ``openssl passwd``
    (the password goes in on standard input, not the command line)."""
    salt = secrets.token_hex(4)
    done = subprocess.run(
        ["openssl", "passwd", "-apr1", "-salt", salt, "-stdin"],
        input=password.encode(),
        capture_output=True,
        check=True,
        timeout=30,
    )
    return done.stdout.decode().strip()
