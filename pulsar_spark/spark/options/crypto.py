"""Encryption options: ``privateKey``, ``cryptoFailureAction``, ``encryptionKeys``, ``publicKey``.

Keys are given as the Java client takes them: a PEM URL (``file:///path``, or
``data:application/x-pem-file;base64,...`` so that a secret can carry the key),
or a JSON object of key name to URL. They are checked here for form (a
``data:`` URL's key is parsed whole; files are read where the keys are used, in
the tasks) and held in a :class:`KeySource`, whose repr never shows a ``data:``
URL. Errors name the option, never the key (where Spark's plans show a key:
:mod:`.redaction`). Nothing here imports pyspark.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from pulsar_spark.client.crypto_keys import check_key_spec, parse_key_names
from pulsar_spark.protocol.crypto.errors import CryptoKeyError
from pulsar_spark.protocol.crypto.fields import crypto_failure_action
from pulsar_spark.protocol.errors import InvalidArgument

from ..errors import PulsarOptionError

__all__ = ["KeySource", "failure_action", "key_names", "private_key", "public_key"]


@dataclass(frozen=True)
class KeySource:
    """A key option's text (a URL, or a JSON map of key name to URL), never shown whole."""

    spec: str

    def __repr__(self) -> str:
        text = self.spec.strip()
        if text.startswith("{"):
            names = sorted(json.loads(text))
            return f"KeySource(map of {', '.join(names)})"
        if text.lower().startswith("file:"):
            return f"KeySource({text})"
        return "KeySource(<data: URL hidden>)"

    __str__ = __repr__


def private_key(name: str, value: str) -> KeySource:
    return _source(name, value, private=True)


def public_key(name: str, value: str) -> KeySource:
    return _source(name, value, private=False)


def _source(name: str, value: str, *, private: bool) -> KeySource:
    try:
        check_key_spec(value, private=private, option=name)
    except CryptoKeyError as exc:
        reason = str(exc).removeprefix(f"{name}: ").removeprefix(name + " ")
        raise PulsarOptionError(name, reason) from None
    return KeySource(value.strip())


def failure_action(name: str, value: str) -> str:
    try:
        return crypto_failure_action(value, option=name)
    except InvalidArgument as exc:
        raise PulsarOptionError(name, f"must be fail, discard or consume, not {value!r}") from exc


def key_names(name: str, value: str) -> tuple[str, ...]:
    try:
        return tuple(parse_key_names(value, option=name))
    except CryptoKeyError:
        msg = f"expected one or more comma-separated key names (each once), got {value!r}"
        raise PulsarOptionError(name, msg) from None
