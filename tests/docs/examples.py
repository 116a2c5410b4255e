"""The Python examples of README.md and docs/, as pages of blocks the tests run.

A page's ``python`` fenced blocks (```` ```python ```` or ```` ```python <tag> ````) run in
order in one namespace, like a notebook's cells. What a page runs against is set by HTML
comments, which Markdown renders as nothing:

``<!-- test: broker=KIND -->`` (anywhere on the page; default ``lite``)
    ``lite``: a pulsar-lite of the page's own (every topic non-partitioned);
    ``lite-partitioned``: one whose topics all have 4 partitions;
    ``apache``, ``apache-txn``, ``apache-dedup``, ``apache-stock``, ``apache-secure``: the
    test session's Apache Pulsar of that variant (plain; transactions; deduplication; stock
    data lifecycle; TLS with token authentication and authorization). Topics on these are
    shared with the rest of the run, so a page's topic names are its own (``schemas-orders``).
``<!-- test: skip "why" -->`` (the line before a fence)
    The block is compiled, not run: for what needs a cluster, a cloud or a service the tests
    cannot start. The reason is said to the reader too, in the page's prose.
``<!-- test: raises "regex" -->`` (the line before a fence)
    The block must raise an exception whose text matches ``regex``: an example of an error.

The examples are written as a user runs them, against ``pulsar://localhost:6650`` (admin API
``http://localhost:8080``; on TLS ``pulsar+ssl://localhost:6651`` and
``https://localhost:8443``); the test puts its broker's addresses in their place
(:data:`PLACEHOLDERS`). Certificates are at ``/etc/pulsar/tls/{ca,client,client-key}.pem``
and a token in ``/etc/pulsar/token.txt`` or the environment's ``PULSAR_TOKEN``, the password
of the basic user ``spark-jobs`` in ``PULSAR_PASSWORD``: the secure broker's files, its
``client`` role's token and that user's password take their place. OAuth2 examples name the
issuer ``https://auth.example.com``, the credentials ``/etc/pulsar/oauth2/credentials.json``
and the audience ``urn:pulsar:cluster-1``; Kerberos ones the principal ``spark@EXAMPLE.COM``,
its keytab ``/etc/security/keytabs/spark.keytab``, ``/etc/krb5.conf`` and the JAAS file
``/etc/pulsar/jaas.conf``: the secure broker's issuer and realm
(:mod:`tests.support.identity`) take their place. Each page runs in a fresh
working directory. Spark resolves a relative path against the directory its JVM started in,
which no page can move, so the relative paths of examples start with one of
:data:`RELATIVE_ROOTS` (``"checkpoints/orders"``, ``"lake/orders"``), which the test roots in
the page's directory; a page that leaves anything in the JVM's directory fails. Each page runs
with a Spark session already in its namespace as ``spark`` (the run's shared ``local[2]``
session; a page's own ``SparkSession.builder...getOrCreate()`` returns it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "BROKER_KINDS",
    "PLACEHOLDERS",
    "RELATIVE_ROOTS",
    "Block",
    "Page",
    "pages",
    "parse_page",
]

ROOT = Path(__file__).resolve().parents[2]

#: Every page whose examples run: the front page and the documentation site.
SOURCES = (ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")))

BROKER_KINDS = (
    "lite",
    "lite-partitioned",
    "apache",
    "apache-txn",
    "apache-dedup",
    "apache-stock",
    "apache-secure",
)

#: What the examples write, by what the test puts in its place (keys of the broker's values).
PLACEHOLDERS = {
    "pulsar://localhost:6650": "service_url",
    "http://localhost:8080": "http_url",
    "pulsar+ssl://localhost:6651": "tls_service_url",
    "https://localhost:8443": "tls_http_url",
    "/etc/pulsar/tls/ca.pem": "ca_cert",
    "/etc/pulsar/tls/client.pem": "client_cert",
    "/etc/pulsar/tls/client-key.pem": "client_key",
    "/etc/pulsar/token.txt": "token_file",
    "https://auth.example.com": "issuer_url",
    "/etc/pulsar/oauth2/credentials.json": "oauth2_credentials",
    "urn:pulsar:cluster-1": "audience",
    "spark@EXAMPLE.COM": "principal",
    "/etc/security/keytabs/spark.keytab": "keytab",
    "/etc/krb5.conf": "krb5_conf",
    "/etc/pulsar/jaas.conf": "jaas_file",
}

#: The first folders of the relative paths examples write (checkpoints, tables, files).
RELATIVE_ROOTS = ("checkpoints/", "lake/", "output/", "warehouse/", "tables/", "keys/", "pipeline/")

_FENCE = re.compile(r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                    re.MULTILINE | re.DOTALL)  # fmt: skip
_DIRECTIVE = re.compile(r"<!--\s*test:\s*(?P<word>[a-z-]+)(?:[ =]+(?P<arg>.*?))?\s*-->")


@dataclass(frozen=True)
class Block:
    """One ``python`` fenced block: its code (unindented), line, and what to do with it."""

    code: str
    line: int
    skip: str | None = None
    raises: str | None = None


@dataclass(frozen=True)
class Page:
    """A Markdown file's Python blocks and the broker they run against."""

    path: Path
    broker: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.relative_to(ROOT).as_posix()


def _unquote(arg: str | None, what: str, where: str) -> str:
    if not arg or len(arg) < 2 or arg[0] != '"' or arg[-1] != '"':
        msg = f'{where}: <!-- test: {what} "..." --> needs a quoted reason or pattern'
        raise ValueError(msg)
    return arg[1:-1]


def parse_page(path: Path, text: str | None = None) -> Page:
    """The page at ``path``: its ``broker=`` directive and its Python blocks."""
    text = path.read_text("utf-8") if text is None else text
    broker = "lite"
    for found in _DIRECTIVE.finditer(text):
        if found["word"] == "broker":
            broker = (found["arg"] or "").strip()
            if broker not in BROKER_KINDS:
                msg = f"{path}: unknown broker {broker!r}; one of {', '.join(BROKER_KINDS)}"
                raise ValueError(msg)
        elif found["word"] not in ("skip", "raises"):
            msg = f"{path}: unknown directive <!-- test: {found['word']} -->"
            raise ValueError(msg)
    page = Page(path, broker)
    for fence in _FENCE.finditer(text):
        words = fence["info"].strip().split()
        if not words or words[0] not in ("python", "py"):
            continue
        line = text.count("\n", 0, fence.start()) + 1
        before = text[: fence.start()].rstrip("\n ").rsplit("\n", 1)[-1].strip()
        skip = raises = None
        directive = _DIRECTIVE.fullmatch(before)
        where = f"{path}:{line}"
        if directive and directive["word"] == "skip":
            skip = _unquote(directive["arg"], "skip", where)
        elif directive and directive["word"] == "raises":
            raises = _unquote(directive["arg"], "raises", where)
        indent = len(fence["indent"])
        code = "\n".join(row[indent:] for row in fence["body"].splitlines())
        page.blocks.append(Block(code + "\n", line + 1, skip, raises))
    return page


def pages() -> list[Page]:
    """Every page that has Python examples."""
    found = [parse_page(path) for path in SOURCES]
    return [page for page in found if page.blocks]
