"""Packaging: the wheel builds, installs into a clean virtualenv and imports from there, with
``py.typed``, the license and the version; the library logs and never prints.

The wheel is built (``pip wheel --no-deps``) from a copy of the files a build reads, so no
``build/`` or ``*.egg-info`` lands in the working tree. The clean virtualenv has no pip and no
packages of its own: the wheel goes into its site-packages with this interpreter's pip
(``--target``, ``--no-deps``), and a ``.pth`` line lends it this environment's site-packages for the
dependencies (pyarrow, protobuf, ...), behind its own, so ``pulsar_spark`` must come from the
wheel.
"""

from __future__ import annotations

import ast
import json
import os
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
CLI_MODULES = {"dump.py"}


def _run(*args: str | Path, **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=300, check=False, **kwargs
    )
    assert proc.returncode == 0, f"{args}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(
        PACKAGE, src / "pulsar_spark", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    out = tmp_path_factory.mktemp("dist")
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        out,
        src,
    )
    (built,) = out.glob("pulsar_spark-*.whl")
    return built


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
    } <= names
    assert f"{dist_info}/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]
    assert metadata["Name"] == "pulsar-spark"
    assert metadata["Version"] == pulsar_spark.__version__
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    assert "Provides-Extra: spark" in str(metadata)


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
