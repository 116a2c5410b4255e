"""The smoke runs on older pyspark versions, started in the background when collected.

When the run selects any test of ``test_spark_versions.py``, collection's end
(:func:`pytest_collection_finish`) starts a pulsar-lite of these runs (from the main thread:
its ``setpriv --pdeathsig`` follows the thread that started it) and, for each version of
:data:`tests.support.spark_venvs.VERSIONS`, a thread that builds or reuses the version's
venv (all at once: downloads and unpacking) and then runs ``smoke/smoke_spark.py`` in it
(one version at a time, ``PULSAR_SPARK_SMOKE_JOBS`` to change: each is a Spark driver with
two cores' worth of tasks beside the main run's). The rest of the suite runs meanwhile; the
version tests are moved to the end of the run and wait there for their results (under
pytest-xdist, the suite's ordering plugin, ``tests/support/ordering.py``, gives them all to
one worker, near the start of its share: :func:`pytest_collection_modifyitems`). At the
end the terminal summary has one line per version: venv built or reused, and how long
each part took.
"""

from __future__ import annotations

import ast
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.lite import PulsarLite
from tests.support.process import orphan_guard
from tests.support.spark_venvs import REPO, VERSIONS, VenvBuilt, ensure_venv

HERE = Path(__file__).resolve().parent
SMOKE = HERE / "smoke"
SMOKE_FILE = SMOKE / "smoke_spark.py"
OUTER = HERE / "test_spark_versions.py"
#: A smoke run's deadline, seconds.
SMOKE_TIMEOUT = 900
RUNS = pytest.StashKey["SmokeRuns"]()


def smoke_test_names() -> list[str]:
    """The test functions of ``smoke_spark.py``, read without importing it (it needs
    the venv's pyspark)."""
    tree = ast.parse(SMOKE_FILE.read_text("utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    ]


@dataclass
class SmokeResult:
    """What one version's smoke run gave: its venv, exit status, output and junit cases."""

    version: str
    venv: VenvBuilt
    returncode: int
    seconds: float
    output: str
    #: test name -> ("passed" | "failed" | "error" | "skipped", message)
    cases: dict[str, tuple[str, str]] = field(default_factory=dict)


def _cases(junit: Path) -> dict[str, tuple[str, str]]:
    cases: dict[str, tuple[str, str]] = {}
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return cases
    for case in root.iter("testcase"):
        outcome, message = "passed", ""
        for kind in ("failure", "error", "skipped"):
            found = case.find(kind)
            if found is not None:
                outcome = kind if kind != "failure" else "failed"
                message = (found.get("message") or "") + "\n" + (found.text or "")
                break
        cases[case.get("name", "?")] = (outcome, message.strip())
    return cases


class SmokeRuns:
    """The background venv builds and smoke runs of one pytest session."""

    def __init__(self, base: Path, versions: tuple[str, ...] = VERSIONS) -> None:
        self.base = base
        self.broker = PulsarLite(base / "broker", name="smoke-pulsar-lite", default_partitions=0)
        self.broker.start()
        self._slots = threading.Semaphore(int(os.environ.get("PULSAR_SPARK_SMOKE_JOBS", "1")))
        self._procs: list[subprocess.Popen[bytes]] = []
        self._closed = False
        self.futures: dict[str, Future[SmokeResult]] = {v: Future() for v in versions}
        for v in versions:
            # Daemon threads: a run cut short (-x, ^C) does not wait for a venv build; the
            # build's pip dies with its thread (orphan_guard), the venv is built next time.
            threading.Thread(
                target=self._resolve, args=(v,), name=f"smoke-{v}", daemon=True
            ).start()

    def _resolve(self, version: str) -> None:
        future = self.futures[version]
        try:
            future.set_result(self._run(version))
        except BaseException as failure:
            future.set_exception(failure)

    def _run(self, version: str) -> SmokeResult:
        venv = ensure_venv(version)
        with self._slots:
            if self._closed:
                msg = "the session ended before this smoke run started"
                raise RuntimeError(msg)
            return self._smoke(version, venv)

    def _smoke(self, version: str, venv: VenvBuilt) -> SmokeResult:
        work = self.base / f"pyspark-{version}"
        work.mkdir(parents=True, exist_ok=True)
        junit = work / "junit.xml"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME"}
            and not k.startswith(("SPARK_CONNECT", "PYTEST_"))
        }
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
        env["PULSAR_SPARK_SMOKE_URL"] = self.broker.service_url
        env["PULSAR_SPARK_SMOKE_PREFIX"] = (
            f"smoke-{version.replace('.', '')}-{secrets.token_hex(4)}"
        )
        env["PULSAR_SPARK_SMOKE_PYSPARK"] = version
        command = [
            *orphan_guard(), str(venv.python), "-m", "pytest", str(SMOKE_FILE),
            "-c", str(SMOKE / "pytest.ini"), "--rootdir", str(SMOKE), "--confcutdir", str(SMOKE),
            "-p", "no:cacheprovider", "--basetemp", str(work / "tmp"),
            "--junitxml", str(junit), "-rA",
        ]  # fmt: skip
        started = time.monotonic()
        with open(work / "output.log", "wb") as out:
            proc = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )
            self._procs.append(proc)
            try:
                code = proc.wait(SMOKE_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = -9
        output = (work / "output.log").read_text("utf-8", "replace")
        if code == -9:
            output += f"\n(killed after the {SMOKE_TIMEOUT} s deadline)"
        return SmokeResult(version, venv, code, time.monotonic() - started, output, _cases(junit))

    def summary(self) -> list[str]:
        lines = []
        for version, future in self.futures.items():
            if not future.done():
                lines.append(f"pyspark {version}: not finished")
                continue
            failure = future.exception()
            if failure is not None:
                first = str(failure).splitlines()[0] if str(failure) else repr(failure)
                lines.append(f"pyspark {version}: {first}")
                continue
            r = future.result()
            venv = f"venv built in {r.venv.seconds:.0f} s" if r.venv.built else "venv reused"
            outcomes = [o for o, _ in r.cases.values()]
            counts = ", ".join(f"{outcomes.count(o)} {o}" for o in sorted(set(outcomes)))
            lines.append(
                f"pyspark {version}: {venv}; smoke run {r.seconds:.0f} s ({counts or 'no tests'},"
                f" exit {r.returncode})"
            )
        return lines

    def close(self) -> None:
        self._closed = True
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.broker.close()
        # Each run's output is in its result (and a failing test's report): the folder goes.
        shutil.rmtree(self.base, ignore_errors=True)


def _is_version_test(item: pytest.Item) -> bool:
    return Path(str(item.path)).resolve() == OUTER


def _xdist_worker() -> bool:
    """Whether this process is a pytest-xdist worker (the README's test command runs two)."""
    return "PYTEST_XDIST_WORKER" in os.environ


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """In one process, the version tests last: they wait for the runs started in the
    background at collection. Under xdist, every worker collects, so the runs start in the
    worker given the version tests, when the first of them asks (:func:`smoke_runs`); the
    ordering plugin (``tests/support/ordering.py``) gives them all to one worker."""
    worker = _xdist_worker()
    items.sort(key=lambda item: _is_version_test(item) != worker)


def pytest_collection_finish(session: pytest.Session) -> None:
    if _xdist_worker():
        return
    selected = [
        item.callspec.params["version"]
        for item in session.items
        if _is_version_test(item) and isinstance(item, pytest.Function)
    ]
    if selected and not session.config.option.collectonly:
        start_runs(session.config, tuple(v for v in VERSIONS if v in selected))


def start_runs(config: pytest.Config, versions: tuple[str, ...] = VERSIONS) -> SmokeRuns:
    runs = config.stash.get(RUNS, None)
    if runs is None:
        runs = SmokeRuns(Path(tempfile.mkdtemp(prefix="pulsar-spark-versions-")), versions)
        config.stash[RUNS] = runs
    return runs


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # type: ignore[no-untyped-def]
    runs = config.stash.get(RUNS, None)
    if runs is not None:
        terminalreporter.section("older pyspark smoke runs")
        for line in runs.summary():
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    runs = config.stash.get(RUNS, None)
    if runs is not None:
        runs.close()


@pytest.fixture(scope="session")
def smoke_runs(pytestconfig: pytest.Config) -> SmokeRuns:
    """The session's background runs (started here if collection did not)."""
    return start_runs(pytestconfig)


@pytest.fixture(scope="session")
def smoke_names() -> list[str]:
    return smoke_test_names()
