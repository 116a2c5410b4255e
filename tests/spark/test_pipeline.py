"""The Spark Declarative Pipeline of ``examples/pipeline`` runs with ``spark-pipelines``.

The example project (a streaming table from a Pulsar topic, a materialized view aggregating
it) is copied to a temporary directory with the broker's URL, a topic of the test's own and a
storage directory put in its ``spark-pipeline.yml``, then run as the guide says
(``docs/guides/pipelines.md``): ``spark-pipelines run`` in the project's directory, which
starts a local Spark Connect server. That server finds the ``pulsar`` format itself
(``pyspark_pulsar`` on its Python path), nothing registers it. The materialized view's parquet
files are read back with pyarrow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds

from tests.support.quick_start import produce

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "pipeline"
#: The CLI beside this interpreter (pyspark installs it).
CLI = Path(sys.executable).parent / "spark-pipelines"
#: Spark Connect server start, two flows, stop: about 30 s on an idle 2-core machine, 90 s
#: and more beside a whole test run's load. A bound for a hang, not a speed target.
RUN_TIMEOUT = 300.0

ORDERS = [
    {"id": 1, "customer": "alice", "amount": 20.0},
    {"id": 2, "customer": "bob", "amount": 35.5},
    {"id": 3, "customer": "alice", "amount": 12.25},
    {"id": 4, "customer": "carol", "amount": 7.0},
]


def _project(tmp_path: Path, url: str, topic: str) -> Path:
    """A copy of the example with this run's broker, topic and storage in its spec."""
    project = tmp_path / "pipeline"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("__pycache__"))
    spec = project / "spark-pipeline.yml"
    text = spec.read_text("utf-8")
    for written, here in {
        "file:///tmp/pulsar-orders-pipeline/storage": (tmp_path / "storage").as_uri(),
        "pulsar://localhost:6650": url,
        "pulsar.topic: orders": f"pulsar.topic: {topic}",
    }.items():
        assert written in text, f"examples/pipeline/spark-pipeline.yml has no {written!r}"
        text = text.replace(written, here)
    spec.write_text(text, "utf-8")
    return project


def test_the_example_pipeline_reads_a_topic_into_a_materialized_view(
    fresh_pulsar_lite, topic_name: str, tmp_path: Path
) -> None:
    lite = fresh_pulsar_lite()
    produce(lite.service_url, topic_name, [json.dumps(order).encode() for order in ORDERS])
    project = _project(tmp_path, lite.service_url, topic_name)
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        # The server's Python workers look the format up among the top-level modules of their
        # path: pyspark_pulsar, at the root of a source checkout.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.pop("SPARK_REMOTE", None)

    started = time.monotonic()
    done = subprocess.run(
        [str(CLI), "run", "--conf", "spark.sql.catalogImplementation=hive"],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        env=env,
        cwd=project,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 0, f"stdout:\n{done.stdout[-6000:]}\nstderr:\n{done.stderr[-6000:]}"
    assert "Run is COMPLETED" in done.stdout + done.stderr

    warehouse = project / "spark-warehouse"
    totals = ds.dataset(warehouse / "customer_totals", format="parquet").to_table()
    assert sorted(totals.to_pylist(), key=lambda row: row["customer"]) == [
        {"customer": "alice", "orders": 2, "total": 32.25},
        {"customer": "bob", "orders": 1, "total": 35.5},
        {"customer": "carol", "orders": 1, "total": 7.0},
    ], f"run took {took:.0f} s"
    orders = ds.dataset(warehouse / "orders", format="parquet").to_table(
        columns=["id", "customer", "amount"]
    )
    assert sorted(orders.column("id").to_pylist()) == [1, 2, 3, 4]
