"""The broker a client benchmark runs against: the one given, or an embedded pulsar-lite."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.lite import PulsarLite


@contextlib.contextmanager
def broker_url(service_url: str | None, prefix: str) -> Iterator[str]:
    """``service_url`` as is, or the URL of a pulsar-lite started (and stopped) here."""
    if service_url is not None:
        yield service_url
        return
    broker = PulsarLite(Path(tempfile.mkdtemp(prefix=prefix)), name="bench")
    broker.start()
    try:
        yield broker.service_url
    finally:
        broker.close()


def run_child(script: str, *args: str) -> dict:
    """Run ``script --child ARGS`` in a fresh interpreter and return the JSON object
    it prints last: each measured side then has a process (and a peak RSS) of its own."""
    import json
    import subprocess

    done = subprocess.run(
        [sys.executable, script, "--child", *args], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        msg = f"{Path(script).name} --child {' '.join(args)} failed:\n{done.stderr[-3000:]}"
        raise RuntimeError(msg)
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_report(**figures: float) -> None:
    """Print what :func:`run_child` reads, with this process's peak RSS in MiB."""
    import json
    import resource

    # VmHWM belongs to this process's address space; ru_maxrss would also carry the
    # parent's peak, which Linux keeps across fork and exec.
    try:
        status = Path("/proc/self/status").read_text()
        kib = next(
            int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")
        )
    except (OSError, StopIteration):
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures["rss_mib"] = kib / 1024
    print(json.dumps(figures))


def spark_session(app: str, cores: int = 2, *extra_sources: type):
    """A ``local[cores]`` session for a benchmark, quiet, with the "pulsar" format and
    ``extra_sources`` registered; its Python workers run this interpreter."""
    import os

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pulsar_spark import PulsarDataSource

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for source in (PulsarDataSource, *extra_sources):
        spark.dataSource.register(source)
    return spark
