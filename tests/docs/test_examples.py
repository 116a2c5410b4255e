"""Every Python example of README.md and docs/ runs, against the broker its page names.

See :mod:`tests.docs.examples` for how a page says what it needs. Each page is one test:
its blocks run in order in one namespace, in a working directory of the page's own, with the
broker's addresses and files put where the example writes ``localhost`` ones. A block marked
``skip`` is compiled only; one marked ``raises`` must fail with the error it shows.
"""

from __future__ import annotations

import ast
import os
import re
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.docs.examples import PLACEHOLDERS, RELATIVE_ROOTS, Block, Page, pages, parse_page
from tests.support.identity import AUDIENCE

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import SparkSession

PAGES = pages()


#: The environment variables a page reads credentials from, by the broker's value they hold.
ENVIRONMENT = {"PULSAR_TOKEN": "token", "PULSAR_PASSWORD": "password"}


def _values(request: pytest.FixtureRequest, kind: str, workdir: Path) -> dict[str, str]:
    """The broker of ``kind``'s addresses and files, by :data:`PLACEHOLDERS` value."""
    if kind in ("lite", "lite-partitioned"):
        factory = request.getfixturevalue("fresh_pulsar_lite")
        lite = factory(default_partitions=4 if kind == "lite-partitioned" else 0)
        return {"service_url": lite.service_url}
    fixture = "apache_pulsar" if kind == "apache" else "apache_pulsar_" + kind.split("-")[1]
    broker = request.getfixturevalue(fixture)
    values = {"service_url": broker.service_url, "http_url": broker.http_url}
    if broker.secure is not None:
        sec = broker.secure
        token_file = workdir / "token.txt"
        token_file.write_text(sec.token)
        values.update({
            "service_url": broker.plain_service_url,
            "http_url": broker.plain_http_url,
            "tls_service_url": broker.service_url,
            "tls_http_url": broker.http_url,
            "ca_cert": sec.ca_cert,
            "client_cert": sec.client_cert,
            "client_key": sec.client_key,
            "token_file": str(token_file),
            "token": sec.token,
            "password": sec.basic_password,
        })  # fmt: skip
    identity = broker.identity
    if identity is not None:
        values.update({
            "issuer_url": identity.oidc.url,
            "oauth2_credentials": str(identity.credentials_file),
            "audience": AUDIENCE,
            "principal": identity.principal,
            "keytab": str(identity.keytab),
            "krb5_conf": str(identity.kdc.krb5_conf),
            "jaas_file": str(identity.jaas_file),
        })  # fmt: skip
    return values


def _as_here(block: Block, values: dict[str, str], workdir: Path) -> str:
    """The block's code with this run's addresses, files and directories in it (a block that
    is only compiled keeps what this broker has no value for)."""
    code = block.code
    for written, key in PLACEHOLDERS.items():
        if written in code and (key in values or block.skip is None):
            assert key in values, f"this page's broker has no {key} for {written!r}"
            code = code.replace(written, values[key])
    for root in RELATIVE_ROOTS:
        for quote in "\"'":
            code = code.replace(quote + root, quote + str(workdir / root))
    return code


def _relative_roots(page: Page) -> set[str]:
    """The first folder of each relative path a page's code names (string literals only)."""
    roots = set()
    for block in page.blocks:
        for node in ast.walk(ast.parse(block.code)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if "/" in text and not text.startswith(("/", ".")) and "://" not in text:
                    roots.add(text.split("/", 1)[0])
    return roots


@contextmanager
def _page_environment(
    spark: SparkSession, page: Page, workdir: Path, values: dict[str, str]
) -> Iterator[None]:
    """The page's working directory and credentials (:data:`ENVIRONMENT`); and a check that
    the page left none of its relative paths in the directory Spark's JVM started in (where
    Spark would put them)."""
    cwd = Path.cwd()
    saved = {name: os.environ.get(name) for name in ENVIRONMENT}
    jvm = spark._jvm
    assert jvm is not None
    jvm_cwd = Path(jvm.java.lang.System.getProperty("user.dir"))
    before = set(jvm_cwd.iterdir())
    os.chdir(workdir)
    for name, key in ENVIRONMENT.items():
        if key in values:
            os.environ[name] = values[key]
    try:
        yield
    finally:
        os.chdir(cwd)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    left = sorted(
        p.name for p in set(jvm_cwd.iterdir()) - before if p.name in _relative_roots(page)
    )
    assert not left, (
        f"the page wrote {left} into {jvm_cwd}: start its relative paths with one of "
        f"{', '.join(RELATIVE_ROOTS)}"
    )


def _run(block: Block, page: Page, code: str, namespace: dict[str, Any]) -> None:
    where = f"{page.name}:{block.line}"
    compiled = compile(code, where, "exec")
    if block.skip is not None:
        return
    if block.raises is None:
        try:
            exec(compiled, namespace)
        except Exception as exc:
            detail = "".join(traceback.format_exception(exc))
            pytest.fail(f"the example at {where} failed:\n{detail}", pytrace=False)
        return
    with pytest.raises(Exception) as caught:
        exec(compiled, namespace)
    text = f"{type(caught.value).__name__}: {caught.value}"
    assert re.search(block.raises, text, re.DOTALL), (
        f"the example at {where} raised, but not what it shows ({block.raises!r}):\n{text}"
    )


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_the_page_examples_run(
    page: Page, spark: SparkSession, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    values = _values(request, page.broker, tmp_path)
    namespace: dict[str, Any] = {"__name__": "__main__", "spark": spark}
    with _page_environment(spark, page, tmp_path, values):
        try:
            for block in page.blocks:
                _run(block, page, _as_here(block, values, tmp_path), namespace)
        finally:
            for query in spark.streams.active:  # a failed page leaves no stream behind
                query.stop()


def test_every_example_compiles_and_says_why_it_is_skipped() -> None:
    for page in PAGES:
        for block in page.blocks:
            compile(block.code, f"{page.name}:{block.line}", "exec")
            if block.skip is not None:
                assert len(block.skip) >= 10, f"{page.name}:{block.line}: say why it is skipped"


def test_the_directives_are_read(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "<!-- test: broker=apache-txn -->\n\n```python\nx = 1\n```\n\n"
        '<!-- test: skip "needs a Databricks workspace" -->\n```python\ndbutils\n```\n\n'
        '<!-- test: raises "KeyError" -->\n```python tagged\n{}["a"]\n```\n\n'
        "```sh\nnot python\n```\n\n- a list\n\n    ```python\n    y = 2\n    ```\n"
    )
    parsed = parse_page(page)
    assert parsed.broker == "apache-txn"
    assert [(b.code, b.skip, b.raises) for b in parsed.blocks] == [
        ("x = 1\n", None, None),
        ("dbutils\n", "needs a Databricks workspace", None),
        ('{}["a"]\n', None, "KeyError"),
        ("y = 2\n", None, None),
    ]
    page.write_text("<!-- test: broker=kafka -->\n```python\nx = 1\n```\n")
    with pytest.raises(ValueError, match="unknown broker 'kafka'"):
        parse_page(page)
