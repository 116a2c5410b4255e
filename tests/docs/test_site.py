"""The documentation site builds with no warning, and speaks of the product only.

``mkdocs build --strict`` fails on a broken link, a missing page, an anchor that does not
exist and a page left out of the navigation (``mkdocs.yml``'s ``validation``), and on a
mkdocstrings reference to a name that does not exist.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").rglob("*.md"))

#: Words of the project's own making, not of the product ("this session", an issue number).
DIARY = re.compile(
    r"\b(this|that|the same) (morning|afternoon|evening)\b"
    r"|\b(last|next|earlier|previous|this work) session\b|\bsession note\b"
    r"|\b[Ii]ssues? #?\d+\b|\bstop \d+\b|\bm[1-9] \("
)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "reference" / "api" / "index.html").exists()


def test_no_page_speaks_of_its_making() -> None:
    for path in [ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS]:  # the site includes both
        text = path.read_text("utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            found = DIARY.search(line)
            assert found is None, f"{path.relative_to(ROOT)}:{number}: {found[0]!r}: {line}"


#: Where the site is published (``mkdocs.yml``'s ``site_url``): the front page links there,
#: so its links work on PyPI too.
SITE = "https://pulsar-spark.github.io/pulsar-spark/"

#: The tasks a new user comes with, each one link away from the front page.
TASKS = (
    "guides/batch/",  # read a topic in batch; write a DataFrame
    "guides/lakehouse/",  # stream a topic into Delta or parquet
    "guides/security/",  # authenticate with a token; connect over TLS
    "guides/schemas/",  # read a topic with a schema as typed columns
    "guides/sinks/",  # write exactly once
    "guides/migrating/",  # move a StreamNative job
    "guides/databricks/",  # run on Databricks
    "guides/operations/",  # find what an error means
)


def test_the_front_page_is_short_and_links_to_every_task() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 250
    for block in ("```sh main\n", "```sh test\n"):
        assert block in readme
    links = set(re.findall(r"\]\((https?://[^)\s]+)\)|<(https?://[^>\s]+)>", readme))
    site_pages = {
        url.removeprefix(SITE).split("#", 1)[0]
        for pair in links
        for url in pair
        if url.startswith(SITE)
    }
    for task in TASKS:
        assert task in site_pages, f"README.md does not link to {SITE}{task}"
    for page in site_pages - {""}:
        source = ROOT / "docs" / (page.rstrip("/") + ".md")
        assert source.exists(), f"README.md links to {SITE}{page}, which no docs page makes"
    config = (ROOT / "mkdocs.yml").read_text("utf-8")
    assert f"site_url: {SITE}" in config
