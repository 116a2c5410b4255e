"""Virtualenvs with an older pyspark, for the smoke runs of ``tests/versions``.

:func:`ensure_venv` gives a venv under ``~/.cache/pulsar-spark/venvs/pyspark-<version>``
(``PULSAR_SPARK_VENVS`` moves the root) holding ``pyspark==<version>``, this project
(editable, so pip resolves its dependencies against that pyspark), ``pandas<3`` and pytest.
It is built once and reused while its stamp matches: the pyspark version, the Python
version and the project's dependency list (``[project] dependencies`` of
``pyproject.toml``). A reused venv needs no network; building one does (pyspark is a
~400 MB sdist, which pip builds into a wheel once and keeps in its cache, ``~/.cache/pip``).

The venv is made with ``--without-pip`` and filled by this interpreter's pip
(``pip --python``), which saves installing pip into each. A file lock beside it keeps two
test runs from building the same venv at once. The smoke runs put the checkout first on
``PYTHONPATH``, so the code they test is this checkout's, whichever checkout the editable
install points at.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .process import orphan_guard

__all__ = [
    "REPO",
    "VERSIONS",
    "VenvBuildError",
    "VenvBuilt",
    "ensure_venv",
    "venv_root",
]

#: The newest release of each minor line older than the one CI runs.
VERSIONS = ("4.0.5", "4.1.4", "4.2.1")
REPO = Path(__file__).resolve().parents[2]

#: Besides pyspark and the project (with its dependencies).
EXTRAS = ("pandas<3", "pytest>=8")

#: pip's own deadline per network operation, and the whole build's.
PIP_TIMEOUT = 60
BUILD_TIMEOUT = 1800


class VenvBuildError(RuntimeError):
    """Building a venv failed; the message has pip's command and the tail of its output."""


@dataclass(frozen=True)
class VenvBuilt:
    """A ready venv: its python, whether it was built now, and how long that took."""

    version: str
    python: Path
    built: bool
    seconds: float
    log: Path


def venv_root() -> Path:
    override = os.environ.get("PULSAR_SPARK_VENVS")
    return Path(override) if override else Path.home() / ".cache" / "pulsar-spark" / "venvs"


def _dependencies() -> str:
    text = (REPO / "pyproject.toml").read_text("utf-8")
    found = re.search(r"^dependencies = \[(.*?)^\]", text, re.MULTILINE | re.DOTALL)
    return found.group(1) if found else text


def _stamp(version: str) -> dict[str, str]:
    deps = hashlib.sha256(_dependencies().encode()).hexdigest()[:16]
    return {
        "pyspark": version,
        "python": ".".join(map(str, sys.version_info[:3])),
        "dependencies": deps,
        "extras": " ".join(EXTRAS),
    }


def _reusable(venv: Path, stamp: dict[str, str]) -> bool:
    try:
        found = json.loads((venv / "pulsar-spark-stamp.json").read_text("utf-8"))
    except (OSError, ValueError):
        return False
    return found == stamp and (venv / "bin" / "python").exists()


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text("utf-8", "replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def ensure_venv(version: str) -> VenvBuilt:
    """The venv of pyspark ``version``, built if missing or stale.

    Raises:
        VenvBuildError: venv or pip failed (no network, no such version...), with pip's output.
    """
    root = venv_root()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / f"pyspark-{version}"
    log = root / f"pyspark-{version}.log"
    stamp = _stamp(version)
    started = time.monotonic()
    with open(root / f"pyspark-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _reusable(venv, stamp):
            return VenvBuilt(version, venv / "bin" / "python", False, 0.0, log)
        shutil.rmtree(venv, ignore_errors=True)
        steps = [
            [sys.executable, "-m", "venv", "--without-pip", str(venv)],
            [
                sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                "install", "--disable-pip-version-check", "--progress-bar", "off",
                "--timeout", str(PIP_TIMEOUT),
                f"pyspark=={version}", *EXTRAS, "-e", str(REPO),
            ],
        ]  # fmt: skip
        with open(log, "w") as out:
            for step in steps:
                out.write(f"+ {' '.join(step)}\n")
                out.flush()
                try:
                    code = subprocess.run(
                        [*orphan_guard(), *step],
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        timeout=BUILD_TIMEOUT,
                    ).returncode
                except subprocess.TimeoutExpired:
                    code = -1
                if code != 0:
                    shutil.rmtree(venv, ignore_errors=True)
                    msg = (
                        f"building the venv of pyspark {version} in {venv} failed (exit "
                        f"{code}): `{' '.join(step)}`. A first build needs the network (PyPI); "
                        f"later runs reuse the venv. pip's output ({log}), tail:\n{_tail(log)}"
                    )
                    raise VenvBuildError(msg)
        (venv / "pulsar-spark-stamp.json").write_text(json.dumps(stamp), "utf-8")
    return VenvBuilt(version, venv / "bin" / "python", True, time.monotonic() - started, log)
