"""The documentation site builds with no warning, and speaks of the product only.

``mkdocs build --strict`` fails on a broken link, a missing page, an anchor that does not
exist and a page left out of the navigation (``mkdocs.yml``'s ``validation``), and on a
mkdocstrings reference to a name that does not exist.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").rglob("*.md"))

#: Words of the project's own making, not of the product ("this session", an issue number).
DIARY = re.compile(
    r"\b(this|last|next|earlier|previous|the same) (session|morning|afternoon)\b"
    r"|\bsession note\b|\b[Ii]ssue \d+\b|\bstop \d+\b|\bm[1-9] \(",
)


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stdout}\n{done.stderr}"
    assert (tmp_path / "index.html").exists()
    assert (tmp_path / "reference" / "api" / "index.html").exists()


def test_no_page_speaks_of_its_making() -> None:
    for path in [ROOT / "README.md", *DOCS]:
        text = path.read_text("utf-8")
        for number, line in enumerate(text.splitlines(), 1):
            found = DIARY.search(line)
            assert found is None, f"{path.relative_to(ROOT)}:{number}: {found[0]!r}: {line}"


def test_the_front_page_is_short_and_links_to_every_task() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) <= 250
    for block in ("```sh main\n", "```sh test\n"):
        assert block in readme
