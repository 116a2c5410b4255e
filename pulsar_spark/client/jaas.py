"""JAAS login configuration files, as the Java client's Kerberos users write them.

A JAAS file names sections; each lists login modules with a flag and options::

    PulsarClient {
        com.sun.security.auth.module.Krb5LoginModule required
        useKeyTab=true
        storeKey=true
        useTicketCache=false
        keyTab="/etc/security/keytabs/spark.keytab"
        principal="spark@EXAMPLE.COM";
    };

Only ``Krb5LoginModule`` means anything to a client without a JVM: :func:`kerberos_login`
reads its options from one section (``saslJaasClientSectionName``, ``PulsarClient`` by
default) into a :class:`KerberosLogin`. Comments (``//`` and ``/* */``) are skipped.
Errors name the file and the section, never an option's value beyond paths and principals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ClientError

#: A login module, its flag and its options.
Module = tuple[str, str, dict[str, str]]

__all__ = [
    "KRB5_LOGIN_MODULE",
    "JaasError",
    "KerberosLogin",
    "Module",
    "kerberos_login",
    "sections",
]

KRB5_LOGIN_MODULE = "com.sun.security.auth.module.Krb5LoginModule"

_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|[{};=]|[^\s{};="]+""",
    re.DOTALL,
)


class JaasError(ClientError):
    """A JAAS file that cannot be read, or that has no usable Kerberos login."""


@dataclass(frozen=True)
class KerberosLogin:
    """What a ``Krb5LoginModule`` entry asks for: a keytab and principal, or a ticket
    cache (the one ``kinit`` filled, or a named one)."""

    principal: str | None = None
    keytab: str | None = None
    use_ticket_cache: bool = False
    ticket_cache: str | None = None


def _tokens(text: str, where: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            msg = f"{where}: cannot read the JAAS file at offset {pos}"
            raise JaasError(msg)
        token = match.group()
        pos = match.end()
        if token.isspace() or token.startswith(("//", "/*")):
            continue
        out.append(token)
    return out


def _unquote(token: str) -> str:
    if token.startswith('"'):
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return token


def sections(text: str, where: str = "JAAS file") -> dict[str, list[Module]]:
    """The sections of a JAAS file: name -> [(login module, flag, options)]."""
    tokens = _tokens(text, where)
    out: dict[str, list[Module]] = {}
    i = 0

    def expect(what: str) -> str:
        nonlocal i
        if i >= len(tokens):
            msg = f"{where}: the file ends where {what} was expected"
            raise JaasError(msg)
        token = tokens[i]
        i += 1
        return token

    while i < len(tokens):
        name = _unquote(expect("a section name"))
        if expect("'{'") != "{":
            msg = f"{where}: section {name!r} does not open with '{{'"
            raise JaasError(msg)
        modules: list[Module] = []
        while True:
            token = expect("a login module or '}'")
            if token == "}":
                break
            flag = expect(f"the flag of {token}")
            options: dict[str, str] = {}
            while True:
                key = expect(f"an option of {token} or ';'")
                if key == ";":
                    break
                if expect(f"'=' after {key}") != "=":
                    msg = f"{where}: option {key!r} of {token} in section {name!r} has no '='"
                    raise JaasError(msg)
                options[key] = _unquote(expect(f"the value of {key}"))
            modules.append((token, flag, options))
        if i < len(tokens) and tokens[i] == ";":
            i += 1
        out[name] = modules
    return out


def _flag(options: dict[str, str], key: str) -> bool:
    return options.get(key, "false").strip().lower() == "true"


def kerberos_login(path: str, section: str = "PulsarClient") -> KerberosLogin:
    """The ``Krb5LoginModule`` options of ``section`` in the JAAS file at ``path``."""
    where = f"JAAS file {path}"
    try:
        text = Path(path).read_text()
    except OSError as exc:
        msg = f"cannot read {where}: {exc.strerror or exc}"
        raise JaasError(msg) from exc
    found = sections(text, where)
    if section not in found:
        names = ", ".join(sorted(found)) or "none"
        msg = (
            f"{where} has no section {section!r} (saslJaasClientSectionName); its sections: {names}"
        )
        raise JaasError(msg)
    for module, _flag_name, options in found[section]:
        if module != KRB5_LOGIN_MODULE:
            continue
        keytab = options.get("keyTab") if _flag(options, "useKeyTab") else None
        if _flag(options, "useKeyTab") and not keytab:
            msg = f"{where}, section {section!r}: useKeyTab=true needs keyTab"
            raise JaasError(msg)
        login = KerberosLogin(
            principal=options.get("principal") or None,
            keytab=keytab,
            use_ticket_cache=_flag(options, "useTicketCache"),
            ticket_cache=options.get("ticketCache") or None,
        )
        if login.keytab is None and not login.use_ticket_cache:
            msg = (
                f"{where}, section {section!r}: Krb5LoginModule needs useKeyTab=true with "
                "keyTab and principal, or useTicketCache=true"
            )
            raise JaasError(msg)
        return login
    msg = f"{where}, section {section!r} has no {KRB5_LOGIN_MODULE} entry"
    raise JaasError(msg)
