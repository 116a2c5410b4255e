"""The notebooks in ``notebooks/`` run, start to finish, against real brokers.

They are Databricks source-format notebooks (``# Databricks notebook source``, cells split by
``# COMMAND ----------``, markdown and ``%pip`` as ``# MAGIC`` comments), so plain Python runs
them. One subprocess runs them all, in one local Spark, the way a Databricks cluster would:
the first notebook builds the session (the path outside Databricks), the others find ``spark``
already defined (the Databricks path). Each must end with its ``<name>: OK`` line; a notebook
that fails is reported with its traceback, and the others still run.

They run again over Spark Connect (a local Spark Connect server), as on Databricks
serverless. The auth notebook takes its token from the environment on
pulsar-lite (which accepts any), and runs once more on Apache Pulsar with TLS and token
authorization, with a stand-in ``dbutils`` whose widgets and secret scope hold the settings
and the token, as on Databricks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support.spark import TEST_JVM_OPTIONS

#: The repository root: the runner imports ``tests.support.spark`` from it.
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = ROOT / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.py"))
HEADER = "# Databricks notebook source\n"
SEPARATOR = "\n# COMMAND ----------\n"

#: Executes each notebook given on the command line in turn, handing the Spark session the
#: first one built to the next ones; prints ``=== name: ok|failed (seconds)``.
RUNNER = r"""
import json, runpy, sys, time, traceback
from pathlib import Path


# The parts of Databricks' dbutils the notebooks use (widgets.text/get, secrets.get), from
# {"widgets": {name: value}, "secrets": {scope: {key: value}}}.
class FakeDbutils:

    def __init__(self, config):
        values, scopes = dict(config.get("widgets", {})), config.get("secrets", {})

        class Widgets:
            def text(self, name, default, label=None):
                values.setdefault(name, default)  # an existing widget keeps its value

            def get(self, name):
                return values[name]

        class Secrets:
            def get(self, scope, key):
                if key not in scopes.get(scope, {}):
                    msg = f"Secret does not exist with scope: {scope} and key: {key}"
                    raise ValueError(msg)
                return scopes[scope][key]

        self.widgets, self.secrets = Widgets(), Secrets()


spark, failed, given = None, [], {}
while len(sys.argv) > 1 and sys.argv[1].startswith("--"):
    option, value = sys.argv.pop(1)[2:].split("=", 1)
    if option == "remote":  # a local Spark Connect server with this master
        from tests.support.spark import local_connect_session

        spark = local_connect_session(value)
        print(f"=== session: {type(spark).__module__}", flush=True)
    elif option == "dbutils":
        given["dbutils"] = FakeDbutils(json.loads(value))
for path in sys.argv[1:]:
    name = Path(path).stem
    start = time.monotonic()
    try:
        init = dict(given) if spark is None else {**given, "spark": spark}
        scope = runpy.run_path(path, init_globals=init, run_name="__main__")
        spark = scope.get("spark", spark)
        status = "ok"
    except BaseException:
        traceback.print_exc()
        failed.append(name)
        status = "failed"
    print(f"=== {name}: {status} ({time.monotonic() - start:.1f}s)", flush=True)
sys.exit(1 if failed else 0)
"""

#: Lines each notebook must print (regular expressions), beyond its ``<name>: OK`` line.
EXPECTED = {
    "01_batch_read": [r"wrote 2000 click events", r"read 2000 messages from"],
    "02_streaming_read": [
        r"first run: micro-batches of \[.*\] rows",
        r"output: 1000 rows, 1000 distinct message ids, seq 0\.\.999",
    ],
    "03_write": [
        r"routed by the topic column: \{'eu': 750, 'us': 250\}",
        r"stream: 1000 rows on the first run, 0 on the second",
    ],
    # pulsar-lite takes any token: the environment's is used, and accepted.
    "04_auth": [r"with token auth, the token from environment PULSAR_AUTH_TOKEN$"],
}

AUTH_VARIABLES = (
    "PULSAR_AUTH_TOKEN",
    "PULSAR_AUTH_PARAMS",
    "PULSAR_AUTH_PLUGIN",
    "PULSAR_TLS_TRUST_CERTS",
    "PULSAR_SECRET_SCOPE",
)


def _run(
    notebooks: list[Path], tmp_path: Path, *options: str, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if k not in AUTH_VARIABLES and not k.startswith("SPARK_")
    }
    environ.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PULSAR_NOTEBOOK_DIR=str(tmp_path / "work"),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.pathsep.join([str(ROOT), environ.get("PYTHONPATH", "")]),
        # The notebooks build their own session: the tests' JVM options reach it this way.
        PYSPARK_SUBMIT_ARGS=f'--driver-java-options "{TEST_JVM_OPTIONS}" pyspark-shell',
        **env,
    )
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *options, *map(str, notebooks)],
        cwd=tmp_path,
        env=environ,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def _report(proc: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {proc.returncode}\n--- stdout ---\n{proc.stdout}\n"
        f"--- stderr ---\n{proc.stderr[-8000:]}"
    )


def test_every_notebook_is_in_databricks_source_format() -> None:
    assert [p.stem for p in NOTEBOOKS] == sorted(EXPECTED), "a notebook without expectations"
    for path in NOTEBOOKS:
        text = path.read_text("utf-8")
        assert text.startswith(HEADER), f"{path.name}: no {HEADER!r} first line"
        cells = text[len(HEADER) :].split(SEPARATOR)
        assert len(cells) >= 4, f"{path.name}: {len(cells)} cells"
        for cell in cells:
            lines = cell.strip("\n").splitlines()
            assert lines, f"{path.name}: an empty cell"
            magic = [line.startswith("# MAGIC") for line in lines]
            # A cell is either all magic (markdown, %pip) or all Python.
            assert all(magic) or not any(magic), f"{path.name}: mixed cell {lines[0]!r}"
        assert "# MAGIC %md" in text and "PULSAR_SERVICE_URL" in text


def test_the_notebooks_run_on_pulsar_lite(pulsar_lite, tmp_path: Path) -> None:
    proc = _run(
        NOTEBOOKS,
        tmp_path,
        PULSAR_SERVICE_URL=pulsar_lite.service_url,
        PULSAR_AUTH_TOKEN="header.payload.signature",
    )
    assert proc.returncode == 0, _report(proc)
    assert "header.payload.signature" not in proc.stdout + proc.stderr
    for name, patterns in EXPECTED.items():
        assert re.search(rf"^=== {name}: ok ", proc.stdout, re.M), _report(proc)
        assert re.search(rf"^{name}: OK\b", proc.stdout, re.M), _report(proc)
        for pattern in patterns:
            assert re.search(pattern, proc.stdout, re.M), f"{name}: no {pattern!r}\n{_report(proc)}"


def test_the_notebooks_run_over_spark_connect(pulsar_lite, tmp_path: Path) -> None:
    """Databricks serverless and shared clusters are Spark Connect: every notebook runs on a
    local Spark Connect server's session too."""
    proc = _run(
        NOTEBOOKS,
        tmp_path,
        "--remote=local[2]",  # tests/support/spark.py
        PULSAR_SERVICE_URL=pulsar_lite.service_url,
    )
    assert proc.returncode == 0, _report(proc)
    assert "=== session: pyspark.sql.connect." in proc.stdout, _report(proc)
    for name in EXPECTED:
        assert re.search(rf"^{name}: OK\b", proc.stdout, re.M), _report(proc)
    assert re.search(
        r"^04_auth: OK, .* with no authentication \(no credentials in the secret "
        r"scope or the environment\)$",
        proc.stdout,
        re.M,
    ), _report(proc)


def test_the_auth_notebook_on_apache_pulsar_with_a_secret_scope(
    apache_pulsar_secure, tmp_path: Path
) -> None:
    """The Databricks path, with a stand-in dbutils: the service URL and the CA from widgets,
    the token from the secret scope, which wins over the (wrong) token in the environment."""
    broker = apache_pulsar_secure
    assert broker.service_url.startswith("pulsar+ssl://")
    token = broker.secure.token
    dbutils = {
        "widgets": {
            "service_url": broker.service_url,
            "secret_scope": "pulsar-ci",
            "tls_trust_certs": broker.secure.ca_cert,
        },
        "secrets": {"pulsar-ci": {"token": token}},
    }
    proc = _run(
        [NOTEBOOKS_DIR / "04_auth.py"],
        tmp_path,
        f"--dbutils={json.dumps(dbutils)}",
        PULSAR_SERVICE_URL="pulsar://wrong.invalid:6650",
        PULSAR_AUTH_TOKEN="not-it",
    )
    assert proc.returncode == 0, _report(proc)
    assert re.search(
        r"^04_auth: OK, 100 messages written and read back with token auth, the "
        r"token from secret pulsar-ci/token, TLS trusting ",
        proc.stdout,
        re.M,
    ), _report(proc)
    assert token not in proc.stdout + proc.stderr, "the token was printed"
