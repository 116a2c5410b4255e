"""Key-store TLS options (the Java client's ``useKeyStoreTls``): store types, passwords, checks.

``pulsar.client.useKeyStoreTls=true`` takes the broker's CA certificates from
``pulsar.client.tlsTrustStorePath`` and the client's certificate (mTLS) from
``pulsar.client.tlsKeyStorePath``, each a PKCS12 or JKS file (``...StoreType``,
JKS by default as in Java) with a ``...StorePassword``. Passwords are
:class:`Secret`\\ s: their repr never shows them, and no error echoes one.
:func:`check_key_store_options` refuses the combinations Java would silently
ignore. Reading the stores is :mod:`pulsar_spark.client.net.keystores`'s, in each
process that opens a client (:mod:`.connect`). Nothing here imports pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import PulsarOptionError

__all__ = ["Secret", "check_key_store_options", "secret", "store_type"]

_C = "pulsar.client."
USE = _C + "useKeyStoreTls"
TRUST_PATH, KEY_PATH = _C + "tlsTrustStorePath", _C + "tlsKeyStorePath"
#: Options that mean something only with useKeyStoreTls=true.
STORE_OPTIONS = tuple(
    _C + f"tls{store}Store{part}"
    for store in ("Trust", "Key")
    for part in ("Type", "Path", "Password")
)


class Secret(str):
    """A password: a str whose repr is hidden (options are printed in plans and logs)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<hidden>"


def secret(name: str, value: str) -> Secret:
    """A password, kept as given (blank is no password)."""
    return Secret(value)


def store_type(name: str, value: str) -> str:
    """PKCS12 or JKS (any case)."""
    found = value.strip().upper().replace("#", "")
    if found not in ("PKCS12", "JKS"):
        raise PulsarOptionError(name, f"expected PKCS12 or JKS, got {value.strip()[:20]!r}")
    return found


def check_key_store_options(given: Mapping[str, str], auth_kind: str | None) -> None:
    """Refuse what the Java client would ignore without a word: store options without
    ``useKeyStoreTls=true``, a PEM trust file beside a trust store, a client key store
    beside TLS authentication's own certificate files."""
    use = given.get(USE, "").strip().lower() == "true"
    if not use:
        for name in STORE_OPTIONS:
            if name in given:
                msg = f"is used only with {USE}=true (as in the Java client); set that too"
                raise PulsarOptionError(name, msg)
        return
    if TRUST_PATH in given and _C + "tlsTrustCertsFilePath" in given:
        msg = f"cannot be combined with {_C}tlsTrustCertsFilePath: give one of the two"
        raise PulsarOptionError(TRUST_PATH, msg)
    if KEY_PATH in given and auth_kind in ("tls", "keystoretls"):
        msg = (
            "cannot be combined with TLS authentication, which brings its own client "
            "certificate (authParams): give one of the two"
        )
        raise PulsarOptionError(KEY_PATH, msg)
