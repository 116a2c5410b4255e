"""Every Spark the README claims: the smoke set on the newest pyspark of each older minor line.

CI runs the newest pyspark; the README says 4.0 or newer. For each of
:data:`tests.support.spark_venvs.VERSIONS` the smoke set (``smoke/smoke_spark.py``: batch
write and read, a typed read, a stream read, ``Trigger.AvailableNow``, the stream sink, a
rate-limited stream, the README's quick start as written) runs in a venv of that pyspark
against a pulsar-lite, in the background while the rest of the suite runs (``conftest.py``);
the main run checks the quick start on its own, newest, Spark
(``tests/spark/test_readme_quick_start.py``). Where a Spark lacks a feature, the smoke test
asserts the error the README promises; so every smoke test must pass, none skipped. A venv
that cannot be built (no network on a first run) fails the test with pip's output: it is
never skipped.
"""

from __future__ import annotations

import pytest

from tests.support.spark_venvs import VERSIONS

#: How long a version test waits for its background run (venv build and smoke run).
WAIT = 2400


@pytest.mark.parametrize("version", VERSIONS)
def test_smoke_set_passes_on_older_pyspark(version: str, smoke_runs, smoke_names) -> None:
    future = smoke_runs.futures[version]
    result = future.result(timeout=WAIT)  # a VenvBuildError says why the venv is missing
    bad = {
        name: case
        for name, case in result.cases.items()
        if case[0] != "passed" or name not in smoke_names
    }
    missing = sorted(set(smoke_names) - set(result.cases))
    if result.returncode != 0 or bad or missing:
        report = [f"the smoke set failed on pyspark {version} (exit {result.returncode})"]
        report += [f"--- {name}: {outcome}\n{message}" for name, (outcome, message) in bad.items()]
        if missing:
            report.append(f"--- not run: {', '.join(missing)}")
        tail = "\n".join(result.output.splitlines()[-60:])
        report.append(f"--- output of the smoke run (tail):\n{tail}")
        pytest.fail("\n".join(report), pytrace=False)
    assert sorted(result.cases) == sorted(smoke_names)
