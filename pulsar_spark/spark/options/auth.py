"""Authentication options: the plugin's name and its parameters, read into an :class:`AuthSpec`.

``pulsar.client.authPluginClassName`` takes the Java client's class names
(or ``token``, ``basic``, ``tls``, ``oauth2``); ``pulsar.client.authParams``
the Java client's parameter formats. :func:`auth_spec` checks the two
together (an OAuth2 ``privateKey`` may be a ``data:`` URL of the key file, as in
Java: its client id and secret are taken out here). No error shows a credential:
parameter errors name the option and the missing keys, never a value, and a plugin
value is echoed only when it looks like a class name. Nothing here imports pyspark.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import urllib.parse
from dataclasses import dataclass

from ..errors import PulsarOptionError

__all__ = ["AuthSpec", "auth_plugin", "auth_spec"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AuthSpec:
    """The authentication plugin and its parameters, built into a client-side
    :class:`~pulsar_spark.client.Authentication` in each task (those hold locks
    and are not picklable)."""

    kind: str  # token, basic, tls, oauth2, keystoretls, sasl
    params: tuple[tuple[str, str], ...]

    def __repr__(self) -> str:  # never print credentials
        return f"AuthSpec(kind={self.kind!r}, params=<{len(self.params)} hidden>)"


_AUTH_CLASSES = {
    "org.apache.pulsar.client.impl.auth.authenticationtoken": "token",
    "org.apache.pulsar.client.impl.auth.authenticationbasic": "basic",
    "org.apache.pulsar.client.impl.auth.authenticationtls": "tls",
    "org.apache.pulsar.client.impl.auth.oauth2.authenticationoauth2": "oauth2",
    "org.apache.pulsar.client.impl.auth.authenticationkeystoretls": "keystoretls",
    "org.apache.pulsar.client.impl.auth.authenticationsasl": "sasl",
    "token": "token", "basic": "basic", "tls": "tls", "oauth2": "oauth2",
    "keystoretls": "keystoretls", "sasl": "sasl",
}  # fmt: skip


#: A Java class name (or a short name): what an error may echo of the plugin option.
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]{0,63}(\.[A-Za-z_$][\w$]{0,63}){0,15}")


def _shown_plugin(value: str) -> str:
    """``value`` quoted when it looks like a class name; otherwise a note, never the
    value: a token or a password pasted into the wrong option must not reach a log."""
    found = value.strip()
    if _CLASS_NAME.fullmatch(found) and not found.startswith("eyJ"):  # JWTs start so
        return repr(found)
    return (
        "(a value that is not a class name, not shown in case it is a credential: "
        "credentials go in pulsar.client.authParams)"
    )


def auth_plugin(name: str, value: str) -> str:
    """The plugin's kind: token, basic, tls, keystoretls, oauth2 or sasl."""
    kind = _AUTH_CLASSES.get(value.strip().lower())
    if kind is None:
        known = sorted(k for k in _AUTH_CLASSES if "." in k)
        short = ", ".join(sorted(set(_AUTH_CLASSES.values())))
        shown = _shown_plugin(value)
        msg = f"unsupported plugin {shown}; supported: {', '.join(known)} (or {short})"
        raise PulsarOptionError(name, msg)
    return kind


def _split_params(name: str, value: str) -> dict[str, str]:
    """The Java client's two parameter formats: JSON, or ``key:value,key:value``."""
    found = value.strip()
    if found.startswith("{"):
        try:
            data = json.loads(found)
        except ValueError:
            raise PulsarOptionError(name, "is not valid JSON") from None
        if not isinstance(data, dict):
            raise PulsarOptionError(name, "must be a JSON object")
        return {str(k): str(v) for k, v in data.items()}
    params = {}
    for part in found.split(","):
        key, sep, item = part.partition(":")
        if not sep:
            raise PulsarOptionError(name, "expected JSON or key:value,key:value")
        params[key.strip()] = item.strip()
    return params


_warned: set[str] = set()


def _warn_bare_token(params_name: str) -> None:
    """Once per process: a bare token is shown by Spark in streaming plans."""
    if params_name in _warned:
        return
    _warned.add(params_name)
    log.warning(
        "%s holds a bare token: Spark redacts an option in plans only when its key or "
        "value matches spark.redaction.regex or spark.sql.redaction.options.regex, so a "
        "stream's explain() can show it. Write token:<jwt> or file:///path/to/token, or "
        "add authParams to spark.sql.redaction.options.regex",
        params_name,
    )


def _inline_key(params_name: str, found: dict[str, str]) -> dict[str, str]:
    """OAuth2 ``privateKey`` given as a ``data:`` URL (``data:application/json;base64,...``,
    as the Java client takes it): its ``client_id`` and ``client_secret`` become the
    ``clientId`` and ``clientSecret`` parameters. Errors never show the URL: it is the
    key itself."""
    head, comma, data = found["privateKey"].partition(",")
    try:
        raw = base64.b64decode(data, validate=True) if head.endswith(";base64") else None
        key = json.loads(urllib.parse.unquote_to_bytes(data) if raw is None else raw)
    except ValueError:
        key = None
    if not comma or not isinstance(key, dict) or not key.get("client_id"):
        msg = (
            "privateKey is a data: URL that is not a JSON object with client_id and "
            "client_secret (value not shown)"
        )
        raise PulsarOptionError(params_name, msg)
    inlined = {k: v for k, v in found.items() if k != "privateKey"}
    inlined.setdefault("clientId", str(key["client_id"]))
    if key.get("client_secret"):
        inlined.setdefault("clientSecret", str(key["client_secret"]))
    return inlined


#: The parameters of ``AuthenticationSasl`` (Kerberos): the Java client's
#: ``saslJaasClientSectionName`` and ``serverType``, the JAAS file it takes from
#: ``-Djava.security.auth.login.config`` (``jaasConfFile``), or the ``Krb5LoginModule``
#: options themselves; ``krb5Conf`` for ``-Djava.security.krb5.conf``.
SASL_PARAMS = (
    "jaasConfFile",
    "keyTab",
    "krb5Conf",
    "principal",
    "saslJaasClientSectionName",
    "serverType",
    "ticketCache",
)

_REQUIRED_PARAMS = {
    "basic": ("userId", "password"),
    "tls": ("tlsCertFile", "tlsKeyFile"),
    "oauth2": ("issuerUrl",),
    "keystoretls": ("keyStorePath",),
    "sasl": (),
}


def auth_spec(
    kind: str | None, params: str | None, *, plugin_name: str, params_name: str
) -> AuthSpec | None:
    """The plugin (a kind from :func:`auth_plugin`) and its parameters, checked together."""
    if kind is None:
        if params is not None:
            raise PulsarOptionError(params_name, f"needs {plugin_name}")
        return None
    found_text = (params or "").strip()
    if kind == "token":
        # token:<jwt>, file:///path, {"token": ...} or {"file": ...}, or the bare token.
        if found_text.startswith("{"):
            found = _split_params(params_name, found_text)
            items = {k: v for k, v in found.items() if k in ("token", "file")}
        elif found_text.startswith("token:"):
            items = {"token": found_text[len("token:") :]}
        elif found_text.startswith("file:"):
            items = {"file": found_text}
        else:
            items = {"token": found_text} if found_text else {}
            if found_text:
                _warn_bare_token(params_name)
        if not items:
            raise PulsarOptionError(
                params_name, "token authentication needs token:<jwt> or file:///path/to/token"
            )
        return AuthSpec(kind, tuple(sorted(items.items())))
    if kind == "sasl":
        # No parameters: the default credentials (the ticket cache kinit filled).
        found = _split_params(params_name, found_text) if found_text else {}
        unknown = sorted(set(found) - set(SASL_PARAMS))
        if unknown:
            msg = f"unknown SASL parameter(s) {', '.join(unknown)}; known: {', '.join(SASL_PARAMS)}"
            raise PulsarOptionError(params_name, msg)
        return AuthSpec(kind, tuple(sorted(found.items())))
    if not found_text:
        raise PulsarOptionError(params_name, f"{kind} authentication needs parameters")
    found = _split_params(params_name, found_text)
    if kind == "oauth2" and found.get("privateKey", "").startswith("data:"):
        found = _inline_key(params_name, found)
    missing = [k for k in _REQUIRED_PARAMS[kind] if not found.get(k)]
    if kind == "oauth2" and not (
        found.get("privateKey") or (found.get("clientId") and found.get("clientSecret"))
    ):
        missing.append("privateKey (or clientId and clientSecret)")
    if missing:
        raise PulsarOptionError(params_name, f"{kind} authentication needs {', '.join(missing)}")
    return AuthSpec(kind, tuple(sorted(found.items())))
