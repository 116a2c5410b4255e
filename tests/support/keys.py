"""Key pairs of the encryption tests written as PEM files (:class:`KeyPair`), and a topic in
a namespace that requires encryption (:func:`encryption_required_topic`).

``KeyPair(directory, "a")`` makes a new RSA-2048 key (or takes the RSA or EC key
given) and writes ``a-priv.pem`` (PKCS#8 unless another private format is given,
such as the SEC1 "EC PRIVATE KEY" the Java client also reads) and ``a-pub.pem``
(SubjectPublicKeyInfo), with their file: URLs and the private key as a data: URL.
"""

from __future__ import annotations

import base64
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

if TYPE_CHECKING:
    from .admin import PulsarAdmin

__all__ = ["KeyPair", "encryption_required_topic"]

PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey


class KeyPair:
    """A key pair written as PEM files: ``priv``/``pub`` paths and file: URLs."""

    def __init__(
        self,
        directory: Path,
        name: str,
        key: PrivateKey | None = None,
        *,
        private_format: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8,
    ) -> None:
        if key is None:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key = key
        self.priv, self.pub = directory / f"{name}-priv.pem", directory / f"{name}-pub.pem"
        pem = key.private_bytes(
            serialization.Encoding.PEM, private_format, serialization.NoEncryption()
        )
        self.priv.write_bytes(pem)
        self.pub.write_bytes(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        self.priv_url, self.pub_url = self.priv.as_uri(), self.pub.as_uri()
        #: The private key inline, as a secret store would hand it over.
        self.priv_data = "data:application/x-pem-file;base64," + base64.b64encode(pem).decode()

    def reader(self) -> Any:
        """The official Python client's ``CryptoKeyReader`` of the two files."""
        import pulsar

        return pulsar.CryptoKeyReader(str(self.pub), str(self.priv))


def encryption_required_topic(admin: PulsarAdmin, prefix: str) -> str:
    """Topic ``t`` of a new namespace ``public/<prefix>-<random>`` made with ``admin``
    to require encryption: its broker refuses a producer
    that does not say ``encrypted`` and a message without encryption keys."""
    namespace = f"public/{prefix}-{secrets.token_hex(3)}"
    admin.create_namespace(namespace)
    admin.request("POST", f"namespaces/{namespace}/encryptionRequired", True)
    return f"persistent://{namespace}/t"
