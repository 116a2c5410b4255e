"""Encryption options: ``privateKey``, ``cryptoFailureAction``, ``encryptionKeys``, ``publicKey``.

Keys are given as the Java client takes them: a PEM URL (``file:///path``, or
``data:application/x-pem-file;base64,...`` so that a secret can carry the key),
or a JSON object of key name to URL. They are checked here for form (a
``data:`` URL's key is parsed whole; files are read where the keys are used, in
the tasks) and held in a :class:`KeySource`, whose repr never shows a ``data:``
URL. Errors name the option, never the key. Nothing here imports pyspark.

Spark shows a stream's options in its plan (``explain()``, the UI) unless the
option's name or value matches ``spark.sql.redaction.options.regex`` (``(?i)url``
by default) or ``spark.redaction.regex`` (``(?i)secret|password|token|
access[.]?key|credential``): a ``data:`` private key given as ``privateKey`` or
``pulsar.reader.privateKey`` shows there, given as ``privateKeyUrl`` it does
not. :func:`warn_unredacted_keys` says so once per process and option name.
A public key is no secret: it may show.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pulsar_spark.client.crypto_keys import check_key_spec, parse_key_names
from pulsar_spark.protocol.crypto.errors import CryptoKeyError
from pulsar_spark.protocol.crypto.fields import crypto_failure_action
from pulsar_spark.protocol.errors import InvalidArgument

from ..errors import PulsarOptionError

__all__ = [
    "SPARK_REDACTION_DEFAULTS",
    "KeySource",
    "failure_action",
    "key_names",
    "private_key",
    "public_key",
    "warn_unredacted_keys",
]

_log = logging.getLogger(__name__)

#: The defaults of ``spark.sql.redaction.options.regex`` and ``spark.redaction.regex``
#: (Spark 4): Spark hides an option's value in plans when either matches its name or value.
SPARK_REDACTION_DEFAULTS = (
    re.compile(r"(?i)url"),
    re.compile(r"(?i)secret|password|token|access[.]?key|credential"),
)
_PRIVATE_KEY_OPTION = "privateKey"
_warned: set[str] = set()


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


def warn_unredacted_keys(options: Mapping[str, str]) -> list[str]:
    """Once per process and option name, a WARNING for a private key given inline (a
    ``data:`` URL, alone or in a JSON map) under a name Spark's default redaction does
    not cover, so that a stream's plan shows the key. Returns the names warned about
    now. The key is never logged."""
    from .table import by_spelling  # it imports this module

    warned = []
    for key, value in options.items():
        option = by_spelling(key)
        if option is None or option.name != _PRIVATE_KEY_OPTION:
            continue
        if "data:" not in str(value).lower() or key.lower() in _warned:
            continue
        if any(regex.search(key) or regex.search(str(value)) for regex in SPARK_REDACTION_DEFAULTS):
            continue
        spelled = next((s for s in (option.name, *option.aliases) if s.lower() == key.lower()), key)
        _warned.add(key.lower())
        warned.append(spelled)
        _log.warning(
            "%s holds a private key inline (a data: URL): Spark shows a stream's options in "
            "its plan (explain(), the UI) unless the option's name or value matches "
            "spark.sql.redaction.options.regex (default (?i)url) or spark.redaction.regex, "
            "so this key can show there. Give it as privateKeyUrl (the same option, hidden "
            "by the default regex), or add %s to spark.sql.redaction.options.regex",
            spelled,
            spelled,
        )
    return warned
