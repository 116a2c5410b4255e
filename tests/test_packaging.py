"""Packaging: the wheel builds, installs into a clean virtualenv and imports from there, with
``py.typed``, the license and the version; the library logs and never prints.

The sdist and the wheel are built (``python -m build``, no isolation) from a copy of the files
a build reads, so no ``build/`` or ``*.egg-info`` lands in the working tree, and ``twine check``
passes on both (the PyPI page renders, and its links are absolute).

The clean virtualenv has no pip and no packages of its own: the wheel goes into its
site-packages with this interpreter's pip (``--target``, ``--no-deps``), and a ``.pth`` line
lends it this environment's site-packages for the dependencies (pyarrow, protobuf, ...),
behind its own, so ``pulsar_spark`` must come from the wheel. A second, real virtualenv takes
``pulsar-spark[spark,lite]`` from the wheel and pip, and runs the main job.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

import pulsar_spark

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pulsar_spark"
#: Modules that are command-line tools and may print.
CLI_MODULES = {"dump.py", "embedded.py"}


def _run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    kwargs.setdefault("timeout", 300)
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, check=False, **kwargs
    )
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "pyspark_pulsar.py"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        PACKAGE, src / "pulsar_spark", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    out = tmp_path_factory.mktemp("dist")
    _run(sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "-o", out, src)
    (built,) = out.glob("pulsar_spark-*.whl")
    return built


def test_the_sdist_and_wheel_pass_twine_check_with_absolute_links(wheel: Path) -> None:
    (sdist,) = wheel.parent.glob("pulsar_spark-*.tar.gz")
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert checked.stdout.count("PASSED") == 2, checked.stdout
    with zipfile.ZipFile(wheel) as zf:
        dist_info = f"pulsar_spark-{pulsar_spark.__version__}.dist-info"
        metadata = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
    description = metadata.get_payload()
    assert metadata["Description-Content-Type"] == "text/markdown"
    relative = [
        link
        for link in re.findall(r"\]\(([^)\s]+)\)", description)
        if not link.startswith(("https://", "http://", "#", "mailto:"))
    ]
    assert relative == [], f"relative links break on PyPI: {relative}"
    urls = {
        value.split(", ", 1)[0]: value.split(", ", 1)[1]
        for value in metadata.get_all("Project-URL")
    }
    assert {"Homepage", "Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    classifiers = set(metadata.get_all("Classifier"))
    assert {"Typing :: Typed", "Programming Language :: Python :: 3.10"} <= classifiers
    assert metadata["Author-email"] and "developers" not in metadata["Author-email"]


def test_the_wheel_holds_the_package_its_types_and_license(wheel: Path) -> None:
    assert wheel.name.startswith(f"pulsar_spark-{pulsar_spark.__version__}-py3-none-any")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        dist_info = f"pulsar_spark-{pulsar_spark.__version__}.dist-info"
        metadata = Parser().parsestr(zf.read(f"{dist_info}/METADATA").decode())
    assert "pulsar_spark/py.typed" in names
    assert "pulsar_spark/protocol/PulsarApi_pb2.pyi" in names
    assert {
        "pulsar_spark/__init__.py",
        "pulsar_spark/spark/datasource.py",
        "pulsar_spark/client/__init__.py",
        "pulsar_spark/dump.py",
        "pyspark_pulsar.py",
    } <= names
    entry_points = zf_text(wheel, f"{dist_info}/entry_points.txt")
    assert "pulsar-spark-dump = pulsar_spark.dump:main" in entry_points
    assert "pulsar-spark-broker = pulsar_spark.embedded:main" in entry_points
    assert f"{dist_info}/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]
    assert metadata["Name"] == "pulsar-spark"
    assert metadata["Version"] == pulsar_spark.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    for extra in ("spark", "lite", "connect", "docs"):
        assert f"Provides-Extra: {extra}" in str(metadata)


def zf_text(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(name).decode()


def test_the_wheel_installs_and_imports_in_a_clean_venv(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(
        _run(
            python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"
        ).stdout.strip()
    )
    _run(sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site, wheel)
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    probe = (
        "import json, sys, importlib.metadata as md, importlib.resources as res\n"
        "import pulsar_spark\n"
        "no_spark = 'pyspark' not in sys.modules\n"
        "from pulsar_spark import PulsarDataSource\n"
        "print(json.dumps({'file': pulsar_spark.__file__, 'version': pulsar_spark.__version__,\n"
        "  'dist': md.version('pulsar-spark'), 'no_spark_on_import': no_spark,\n"
        "  'typed': res.files('pulsar_spark').joinpath('py.typed').is_file(),\n"
        "  'format': PulsarDataSource.name()}))\n"
    )
    got = json.loads(_run(python, "-I", "-c", probe, cwd=tmp_path).stdout)
    assert Path(got["file"]).is_relative_to(env_dir), got["file"]
    assert got == {
        **got,
        "version": pulsar_spark.__version__,
        "dist": pulsar_spark.__version__,
        "no_spark_on_import": True,
        "typed": True,
        "format": "pulsar",
    }
    dump = _run(python, "-I", "-m", "pulsar_spark.dump", "--help", cwd=tmp_path)
    assert "usage" in dump.stdout.lower()


def test_the_main_job_runs_from_the_wheel_with_its_extras_in_a_new_venv(
    wheel: Path, tmp_path: Path
) -> None:
    """What a user does: ``pip install 'pulsar-spark[spark,lite]'`` into a new virtualenv, then
    the main job (embedded broker, batch and stream, nothing registered by hand). pip takes
    the dependencies from its cache when the test environment's install filled it."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    _run(
        sys.executable, "-m", "pip", "--python", python, "install", "-q",
        "--disable-pip-version-check", f"{wheel}[spark,lite]", "pandas<3",
    )  # fmt: skip
    job = tmp_path / "main_job.py"
    shutil.copy2(ROOT / "examples" / "main_job.py", job)
    done = _run(python, "-I", job, cwd=tmp_path, timeout=600)
    assert "MISMATCH" not in done.stdout, done.stdout
    assert "totals match what was produced" in done.stdout, done.stdout
    where = _run(python, "-I", "-c", "import pulsar_spark; print(pulsar_spark.__file__)").stdout
    assert Path(where.strip()).is_relative_to(env_dir)
    assert (env_dir / "bin" / "pulsar-spark-dump").exists()
    assert (env_dir / "bin" / "pulsar-spark-broker").exists()


def test_the_version_is_pep_440_and_in_the_changelog() -> None:
    from packaging.version import Version

    assert str(Version(pulsar_spark.__version__)) == pulsar_spark.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text("utf-8")
    assert f"## {pulsar_spark.__version__}" in changelog
    assert "Apache License" in (ROOT / "LICENSE").read_text("utf-8").splitlines()[1]


def _calls(tree: ast.AST, name: str) -> list[int]:
    """Lines calling ``name(...)`` or ``<something>.name(...)``."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if called == name:
                found.append(node.lineno)
    return found


def test_library_code_logs_and_never_prints() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in CLI_MODULES or rel.endswith("_pb2.py"):
            continue
        tree = ast.parse(path.read_text("utf-8"), str(path))
        offenders += [f"{rel}:{line}: print()" for line in _calls(tree, "print")]
        # A library configures no logging: that is the application's job.
        offenders += [f"{rel}:{line}: basicConfig()" for line in _calls(tree, "basicConfig")]
    assert offenders == []
