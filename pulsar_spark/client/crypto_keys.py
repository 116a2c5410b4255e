"""Encryption keys from PEM URLs (``file:``, ``data:``) or a JSON map name -> URL; crypto objects.

A key is given as the Java client's default key reader takes it: a URL,
``file:///path/key.pem`` or ``data:application/x-pem-file;base64,<base64 PEM>``
(so that a secret store can carry the key itself), or, per key name, a JSON
object ``{"name": "<url>", ...}`` (also a Python mapping). A single URL
serves every key name.

PEM accepted (as the Java client's BouncyCastle reader): public keys as
``PUBLIC KEY`` (SPKI), ``RSA PUBLIC KEY`` (PKCS#1) or ``CERTIFICATE``; private
keys as ``PRIVATE KEY`` (PKCS#8), ``RSA PRIVATE KEY`` or ``EC PRIVATE KEY``,
an ``EC PARAMETERS`` block before them ignored. Encrypted PEM is not.

Errors name the option and the key name, and a ``file:`` path; never a
``data:`` URL or any PEM text, which hold the key.

A read with the crypto failure action ``discard`` logs each message it drops
at WARNING, then, once per partition read, how many (:func:`counting_discards`),
and adds them to the caller's :class:`CryptoStats` when it gives one.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import urllib.parse
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from pulsar_spark.protocol.crypto.decrypt import Decryptor
from pulsar_spark.protocol.crypto.errors import CryptoKeyError, DecryptionError
from pulsar_spark.protocol.crypto.fields import CryptoFailureAction, crypto_failure_action
from pulsar_spark.protocol.crypto.key_wrap import check_private_key, check_public_key

if TYPE_CHECKING:  # cryptography is loaded where a key is (see protocol.key_wrap)
    from pulsar_spark.protocol.crypto.encrypt import Encryptor
    from pulsar_spark.protocol.crypto.key_wrap import PrivateKey, PublicKey

__all__ = [
    "CryptoStats",
    "KeySpec",
    "check_key_spec",
    "counting_discards",
    "load_private_keys",
    "load_public_keys",
    "make_decryptor",
    "make_encryptor",
    "parse_key_names",
    "producer_encryptor",
]

_log = logging.getLogger(__name__)

#: A key URL, a JSON object of key name to URL, or a mapping of key name to URL.
KeySpec = str | Mapping[str, str]

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n(.*?)-----END \1-----", re.DOTALL)
_PUBLIC_LABELS = ("PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE")
_PRIVATE_LABELS = ("PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY")
_DATA_MIME = "application/x-pem-file"
_T = TypeVar("_T")


@dataclass
class CryptoStats:
    """What a read's crypto failure action did, for the caller of
    ``read_batches(..., crypto_stats=...)`` to read once the read is over (or
    while it goes: each partition adds its count when its read ends)."""

    #: Topic (a partition's name) -> messages discarded there (action ``discard``; a
    #: batch counts its messages, a chunked message one).
    discarded: dict[str, int] = field(default_factory=dict)

    @property
    def total_discarded(self) -> int:
        return sum(self.discarded.values())


def counting_discards(
    items: Iterable[_T], decrypt: Decryptor, stats: CryptoStats | None = None
) -> Iterator[_T]:
    """``items`` (one partition's read with ``decrypt``); when the read ends (done,
    failed or left early), one WARNING saying how many messages ``decrypt``
    discarded, if any, and their count added to ``stats``."""
    try:
        yield from items
    finally:
        count = decrypt.discarded
        if count:
            topic = decrypt.topic or "the topic"
            if stats is not None:
                stats.discarded[topic] = stats.discarded.get(topic, 0) + count
            _log.warning(
                "discarded %d encrypted message%s of %s that did not decrypt "
                "(cryptoFailureAction=discard; each is logged above with its id)",
                count,
                "" if count == 1 else "s",
                topic,
            )


def parse_key_names(value: str | Sequence[str], *, option: str = "encryption_keys") -> list[str]:
    """Key names from ``"a,b"`` or a list; at least one, none empty, each once."""
    names = value.split(",") if isinstance(value, str) else list(value)
    names = [name.strip() for name in names]
    if not names or any(not name for name in names):
        msg = f"{option} must be one or more comma-separated key names, not {value!r}"
        raise CryptoKeyError(msg)
    if len(set(names)) != len(names):
        msg = f"{option} names a key more than once: {value!r}"
        raise CryptoKeyError(msg)
    return names


def load_private_keys(
    spec: KeySpec, *, option: str = "private_key"
) -> tuple[dict[str, PrivateKey], PrivateKey | None]:
    """(key name -> private key, the key for any name) from a URL or a map."""
    urls, default = _split(spec, option)
    keys = {name: _private(_fetch(url, option, name), option, name) for name, url in urls.items()}
    return keys, None if default is None else _private(_fetch(default, option, None), option, None)


def load_public_keys(
    spec: KeySpec, names: Sequence[str], *, option: str = "public_key"
) -> dict[str, PublicKey]:
    """The public key of each name in ``names``, from a URL or a map holding every name."""
    urls, default = _split(spec, option)
    out: dict[str, PublicKey] = {}
    for name in names:
        url = urls.get(name, default)
        if url is None:
            msg = (
                f"{option} gives no public key for the encryption key name {name!r} "
                f"(it names {sorted(urls)})"
            )
            raise CryptoKeyError(msg)
        out[name] = _public(_fetch(url, option, name), option, name)
    return out


def check_key_spec(spec: KeySpec, *, private: bool, option: str) -> list[str]:
    """Check the form of a key spec without reading files (they may exist only where the
    keys are used): a map's JSON, each URL's scheme, and ``data:`` URLs' keys whole.
    Returns the key names of a map (empty for a URL that serves any name)."""
    urls, default = _split(spec, option)
    load = _private if private else _public
    for name, url in [*urls.items(), *([(None, default)] if default is not None else [])]:
        if url.lower().startswith("data:"):
            load(_fetch(url, option, name), option, name)
        elif not url.lower().startswith("file:"):
            _fetch(url, option, name)  # raises: the scheme is wrong
    return sorted(urls)


def make_decryptor(
    topic: str,
    private_key: KeySpec | None,
    action: str | CryptoFailureAction = "fail",
    *,
    key_hint: str = "",
    option: str = "private_key",
    action_option: str = "crypto_failure_action",
) -> Decryptor:
    """A :class:`Decryptor` for ``topic``: discarded messages logged at WARNING."""
    checked = crypto_failure_action(action, option=action_option)
    keys, default = (
        ({}, None) if private_key is None else load_private_keys(private_key, option=option)
    )
    return Decryptor(
        keys,
        default_key=default,
        action=checked,
        topic=topic,
        key_hint=key_hint,
        on_discard=_log_discard,
    )


def make_encryptor(
    topic: str,
    encryption_keys: str | Sequence[str],
    public_key: KeySpec | None,
    *,
    names_option: str = "encryption_keys",
    key_option: str = "public_key",
) -> Encryptor:
    """An :class:`Encryptor` for the named keys, their public keys from ``public_key``."""
    from pulsar_spark.protocol.crypto.encrypt import Encryptor  # a write's, not a read's

    names = parse_key_names(encryption_keys, option=names_option)
    if public_key is None:
        msg = f"{names_option} is set but {key_option} is not: give the public key (a PEM URL)"
        raise CryptoKeyError(msg)
    return Encryptor(load_public_keys(public_key, names, option=key_option), topic=topic)


def producer_encryptor(
    topic: str,
    encryption_keys: str | Sequence[str] | None,
    public_key: KeySpec | None,
    *,
    names_option: str = "encryption_keys",
    key_option: str = "public_key",
) -> Encryptor | None:
    """A producer's :class:`Encryptor`, or None when it has no ``encryption_keys``.

    Raises:
        CryptoKeyError: a ``public_key`` without ``encryption_keys`` (nothing would
            be encrypted: the Java client needs both too), or a bad key.
    """
    if encryption_keys is None or (isinstance(encryption_keys, str) and not encryption_keys):
        if public_key:
            msg = (
                f"{key_option} is set but {names_option} is not: name the key(s) to encrypt "
                "with, or nothing is encrypted"
            )
            raise CryptoKeyError(msg)
        return None
    return make_encryptor(
        topic, encryption_keys, public_key, names_option=names_option, key_option=key_option
    )


def _log_discard(error: DecryptionError) -> None:
    _log.warning(
        "discarded encrypted message %s of %s (key names %s): %s",
        error.message_id,
        error.topic,
        ", ".join(error.key_names),
        error.reason,
    )


def _split(spec: KeySpec, option: str) -> tuple[dict[str, str], str | None]:
    """(per-name URLs, the URL for any name) from a spec."""
    if isinstance(spec, Mapping):
        return _names_to_urls(spec, option), None
    if not isinstance(spec, str) or not spec.strip():
        msg = f"{option} must be a PEM URL (file:... or data:...) or a JSON map of key name to URL"
        raise CryptoKeyError(msg)
    text = spec.strip()
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            msg = f"{option} starts with '{{' but is not a JSON object of key name to URL"
            raise CryptoKeyError(msg) from None
        if not isinstance(parsed, dict):
            msg = f"{option} must be a JSON object of key name to URL"
            raise CryptoKeyError(msg)
        return _names_to_urls(parsed, option), None
    return {}, text


def _names_to_urls(spec: Mapping[Any, Any], option: str) -> dict[str, str]:
    out = {}
    for name, url in spec.items():
        if not isinstance(name, str) or not name or not isinstance(url, str):
            msg = f"{option} maps key names to URL strings; the entry {name!r} is not one"
            raise CryptoKeyError(msg)
        out[name] = url.strip()
    if not out:
        msg = f"{option} is an empty map: give at least one key name and URL"
        raise CryptoKeyError(msg)
    return out


def _where(option: str, name: str | None) -> str:
    return f"{option} (key name {name!r})" if name is not None else option


def _fetch(url: str, option: str, name: str | None) -> bytes:
    """The bytes at a ``file:`` or ``data:`` URL."""
    where = _where(option, name)
    if url.startswith("-----BEGIN"):
        msg = f"{where} holds PEM text: give it as a data:{_DATA_MIME};base64,... URL"
        raise CryptoKeyError(msg)
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "data":
        return _data_url(url, where)
    if scheme != "file":
        shown = f"scheme {scheme!r}" if scheme else "no scheme"
        msg = f"{where} must be a file:... or data:... URL, not a URL with {shown}"
        raise CryptoKeyError(msg)
    import urllib.request  # (with http.client and ssl) for a key file only

    path = urllib.request.url2pathname(urllib.parse.urlsplit(url).path)
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        msg = f"{where}: cannot read {path}: {exc.strerror or exc}"
        raise CryptoKeyError(msg) from None


def _data_url(url: str, where: str) -> bytes:
    head, sep, data = url[len("data:") :].partition(",")
    if not sep:
        msg = f"{where} is a data: URL without a ',' before its data"
        raise CryptoKeyError(msg)
    params = head.split(";")
    if params[0].strip().lower() != _DATA_MIME:
        msg = f"{where}: a data: URL must have the media type {_DATA_MIME}"
        raise CryptoKeyError(msg)
    if "base64" not in (p.strip().lower() for p in params[1:]):
        return urllib.parse.unquote_to_bytes(data)
    try:
        return base64.b64decode(urllib.parse.unquote(data), validate=True)
    except (binascii.Error, ValueError):
        msg = f"{where}: the data: URL's base64 does not decode"
        raise CryptoKeyError(msg) from None


def _block(pem: bytes, labels: tuple[str, ...], where: str, kind: str) -> tuple[str, bytes]:
    for match in _PEM_BLOCK.finditer(pem):
        label = match.group(1).decode()
        if label in labels:
            return label, match.group(0)
        if label == "ENCRYPTED PRIVATE KEY" or b"ENCRYPTED" in match.group(2)[:200]:
            msg = f"{where} is an encrypted PEM key, which is not supported: give it unencrypted"
            raise CryptoKeyError(msg)
    msg = f"{where} holds no PEM {kind} (looked for {', '.join(labels)})"
    raise CryptoKeyError(msg)


def _private(pem: bytes, option: str, name: str | None) -> PrivateKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    where = _where(option, name)
    _, block = _block(pem, _PRIVATE_LABELS, where, "private key")
    try:
        key = serialization.load_pem_private_key(block, password=None)
        return check_private_key(key)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        reason = "not RSA or EC" if isinstance(exc, TypeError) else "does not load"
        msg = f"{where}: the private key {reason}"
        raise CryptoKeyError(msg) from None


def _public(pem: bytes, option: str, name: str | None) -> PublicKey:
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    where = _where(option, name)
    label, block = _block(pem, _PUBLIC_LABELS, where, "public key or certificate")
    try:
        if label == "CERTIFICATE":
            key: object = x509.load_pem_x509_certificate(block).public_key()
        else:
            key = serialization.load_pem_public_key(block)
        return check_public_key(key)
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        reason = "not RSA or EC" if isinstance(exc, TypeError) else "does not load"
        msg = f"{where}: the public key {reason}"
        raise CryptoKeyError(msg) from None
