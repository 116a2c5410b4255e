"""Java key stores (PKCS12 and JKS) read into PEM, in memory, for Python's ``ssl``.

The Java client's ``useKeyStoreTls`` takes a trust store (CA certificates)
and a key store (the client's private key and certificate chain) as PKCS12 or
JKS files with a password. :func:`load_store` reads either into a
:class:`StoreContents`: trusted certificates as PEM text (what
``SSLContext.load_verify_locations(cadata=...)`` takes) and, when the store
holds one, a private key (unencrypted PKCS#8 PEM) with its chain. PKCS12 is read
with ``cryptography``; JKS is parsed here (the format: magic ``FEEDFEED``,
version 2, then entries, then a SHA-1 over the password, the words "Mighty
Aphrodite" and everything before; private keys are protected by Sun's
``KeyProtector``, a SHA-1 key stream with a salt and a check digest). Python's
``ssl`` loads a client certificate from files only: :class:`TlsFiles` writes
them 0600 into a private directory that :meth:`TlsFiles.close` removes. No
error or repr shows a password or key material.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cryptography is loaded where a store is (a client without one never does)
    from cryptography import x509

from ..errors import ClientError

__all__ = ["KeyStoreError", "StoreContents", "TlsFiles", "load_store"]

STORE_TYPES = ("PKCS12", "JKS")
_JKS_MAGIC = 0xFEEDFEED
_JCEKS_MAGIC = 0xCECECECE
_SUN_KEY_PROTECTOR = "1.3.6.1.4.1.42.2.17.1.1"


class KeyStoreError(ClientError):
    """A key store that cannot be read: missing, of another type, a wrong password,
    corrupt, or without what it is used for. Never retriable."""


@dataclass(frozen=True)
class StoreContents:
    """What a store holds, as PEM text: trusted certificates (every certificate of a
    trust store), and the first private key with its certificate chain (key stores)."""

    trusted_pem: str = ""
    key_pem: str = field(default="", repr=False)
    chain_pem: str = ""

    def __repr__(self) -> str:
        key = "a private key" if self.key_pem else "no private key"
        return f"StoreContents({self.trusted_pem.count('BEGIN CERTIFICATE')} certificates, {key})"


def load_store(path: str, store_type: str, password: str | None) -> StoreContents:
    """Read the ``store_type`` (PKCS12 or JKS, any case) store at ``path``.

    Raises:
        KeyStoreError: naming the path and what is wrong (never the password).
    """
    kind = store_type.strip().upper()
    if kind not in STORE_TYPES:
        msg = f"key store type {store_type!r} is not supported: use PKCS12 or JKS"
        raise KeyStoreError(msg)
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        msg = f"key store {path!r} cannot be read: {exc.strerror or exc}"
        raise KeyStoreError(msg) from None
    secret = (password or "").encode("utf-8")
    if kind == "PKCS12":
        return _pkcs12(path, data, secret)
    return _jks(path, data, password or "")


def _pem(cert: x509.Certificate) -> str:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def _pkcs12(path: str, data: bytes, password: bytes) -> StoreContents:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    if data[:4] == struct.pack(">I", _JKS_MAGIC):
        msg = f"key store {path!r} is a JKS store, not PKCS12: set its type to JKS"
        raise KeyStoreError(msg)
    loaded = None
    for candidate in (password, None) if not password else (password,):
        try:
            loaded = pkcs12.load_pkcs12(data, candidate)
            break
        except ValueError:
            continue
    if loaded is None:
        msg = f"key store {path!r}: not a PKCS12 store, or the password is wrong"
        raise KeyStoreError(msg)
    certs = [c.certificate for c in loaded.additional_certs]
    key_pem, chain = "", ""
    if loaded.key is not None and loaded.cert is not None:
        key_pem = loaded.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode("ascii")
        chain = _pem(loaded.cert.certificate) + "".join(_pem(c) for c in certs)
    trusted = [loaded.cert.certificate] if loaded.cert is not None else []
    return StoreContents("".join(_pem(c) for c in trusted + certs), key_pem, chain)


# -- JKS --------------------------------------------------------------------------------


class _Cursor:
    """Big-endian reads over the store's bytes; running off the end is a corrupt store."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path, self.data, self.pos = path, data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            msg = f"key store {self.path!r}: JKS data ends early (corrupt)"
            raise KeyStoreError(msg)
        found = self.data[self.pos : self.pos + n]
        self.pos += n
        return found

    def u32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def utf(self) -> str:
        (length,) = struct.unpack(">H", self.take(2))
        return self.take(length).decode("utf-8", "replace")

    def cert(self) -> x509.Certificate:
        from cryptography import x509

        kind = self.utf()
        der = self.take(self.u32())
        if kind != "X.509":
            msg = f"key store {self.path!r}: certificate type {kind!r} unsupported"
            raise KeyStoreError(msg)
        try:
            return x509.load_der_x509_certificate(der)
        except ValueError:
            msg = f"key store {self.path!r}: a certificate is corrupt"
            raise KeyStoreError(msg) from None


def _jks(path: str, data: bytes, password: str) -> StoreContents:
    cur = _Cursor(path, data)
    magic = cur.u32()
    if magic == _JCEKS_MAGIC:
        msg = f"key store {path!r} is JCEKS: convert it to PKCS12 with keytool"
        raise KeyStoreError(msg)
    if magic != _JKS_MAGIC:
        msg = f"key store {path!r} is not a JKS store (is it PKCS12?)"
        raise KeyStoreError(msg)
    if cur.u32() not in (1, 2):
        msg = f"key store {path!r}: unsupported JKS version"
        raise KeyStoreError(msg)
    secret = password.encode("utf-16-be")
    trusted: list[x509.Certificate] = []
    key_pem, chain = "", ""
    for _ in range(cur.u32()):
        tag = cur.u32()
        cur.utf()  # alias
        cur.take(8)  # creation time
        if tag == 2:
            trusted.append(cur.cert())
        elif tag == 1:
            protected = cur.take(cur.u32())
            certs = [cur.cert() for _ in range(cur.u32())]
            if not key_pem and certs:
                key_pem = _unprotect(path, protected, secret)
                chain = "".join(_pem(c) for c in certs)
                trusted.extend(certs)
        else:
            msg = f"key store {path!r}: unknown JKS entry tag {tag} (corrupt)"
            raise KeyStoreError(msg)
    digest = hashlib.sha1(secret + b"Mighty Aphrodite" + data[: cur.pos]).digest()
    if cur.take(20) != digest:
        msg = f"key store {path!r}: the password is wrong, or the store is corrupt"
        raise KeyStoreError(msg)
    return StoreContents("".join(_pem(c) for c in trusted), key_pem, chain)


def _der(path: str, data: bytes, pos: int) -> tuple[int, bytes, int]:
    """One DER element at ``pos``: (tag, contents, position after it)."""
    try:
        tag, length = data[pos], data[pos + 1]
        pos += 2
        if length & 0x80:
            n = length & 0x7F
            length = int.from_bytes(data[pos : pos + n], "big")
            pos += n
        if pos + length > len(data):
            raise IndexError
        return tag, data[pos : pos + length], pos + length
    except IndexError:
        msg = f"key store {path!r}: a protected key is corrupt"
        raise KeyStoreError(msg) from None


def _oid(raw: bytes) -> str:
    parts = [raw[0] // 40, raw[0] % 40]
    value = 0
    for byte in raw[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _unprotect(path: str, protected: bytes, secret: bytes) -> str:
    """A JKS private key: EncryptedPrivateKeyInfo under Sun's KeyProtector -> PKCS#8 PEM."""
    from cryptography.hazmat.primitives import serialization

    _, info, _ = _der(path, protected, 0)
    _, algorithm, after = _der(path, info, 0)
    _, oid, _ = _der(path, algorithm, 0)
    _, encrypted, _ = _der(path, info, after)
    if _oid(oid) != _SUN_KEY_PROTECTOR:
        msg = f"key store {path!r}: a private key protected by {_oid(oid)} is not supported"
        raise KeyStoreError(msg)
    if len(encrypted) < 40:
        msg = f"key store {path!r}: a protected key is corrupt"
        raise KeyStoreError(msg)
    salt, body, check = encrypted[:20], encrypted[20:-20], encrypted[-20:]
    stream = bytearray()
    digest = salt
    while len(stream) < len(body):
        digest = hashlib.sha1(secret + digest).digest()
        stream += digest
    plain = bytes(a ^ b for a, b in zip(body, stream, strict=False))
    if hashlib.sha1(secret + plain).digest() != check:
        msg = f"key store {path!r}: the key password is wrong"
        raise KeyStoreError(msg)
    try:
        key = serialization.load_der_private_key(plain, None)
    except ValueError:
        msg = f"key store {path!r}: a private key does not parse"
        raise KeyStoreError(msg) from None
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return pem.decode("ascii")


# -- files for ssl ----------------------------------------------------------------------


class TlsFiles:
    """PEM files in a private directory (0700; files 0600) for what Python's ``ssl``
    reads from files only (a client certificate chain and its key); :meth:`close`
    removes them (also when the object is collected)."""

    def __init__(self) -> None:
        self.directory = tempfile.mkdtemp(prefix="pulsar-spark-tls-")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.directory, True)

    def write(self, name: str, text: str) -> str:
        """Write ``text`` to ``name`` in the directory, readable by this user only."""
        path = os.path.join(self.directory, name)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(text)
        return path

    def close(self) -> None:
        self._finalizer()

    def __repr__(self) -> str:
        return f"TlsFiles({self.directory!r})"
