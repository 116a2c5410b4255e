"""The README's quick start, as written, on the newest Spark (the run's own session).

``tests/versions`` runs it on each older Spark the README claims; see
:mod:`tests.support.quick_start`.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.quick_start import run_quick_start


def test_the_readme_quick_start_runs_as_written(spark, pulsar_lite, topic_name, tmp_path: Path):
    run_quick_start(spark, pulsar_lite.service_url, topic_name, tmp_path)
