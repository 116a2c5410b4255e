"""Installing the package is enough: a fresh Spark session finds the ``pulsar`` format itself.

Spark 4 registers the ``DefaultSource`` of every top-level ``pyspark_*`` module on its first use
of a Python data source; ``pyspark_pulsar`` is ours. Each test runs a new Spark (its own JVM,
in a subprocess: the tests' shared session registers the source by hand) that never calls
``spark.dataSource.register``, and writes, reads and queries through SQL there: classic, and
over Spark Connect. ``tests/test_packaging.py`` does the same from the built wheel in a new
virtualenv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.quick_start import produce

ROOT = Path(__file__).resolve().parents[2]

#: Writes a DataFrame, reads it with format("pulsar") and with SQL's USING pulsar, and
#: prints what came back; argv: service URL, topic, "classic" or "connect".
PROBE = r"""
import json, os, sys
url, topic, mode = sys.argv[1:4]
os.environ["PYSPARK_PYTHON"] = sys.executable
if mode == "connect":
    from tests.support.spark import local_connect_session
    spark = local_connect_session()
else:
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .getOrCreate())
(spark.createDataFrame([("k1", b"one"), ("k2", b"two")], "key string, value binary")
 .write.format("pulsar").option("service.url", url).option("topic", topic + "-out")
 .mode("append").save())
read = sorted(r.value.decode() for r in spark.read.format("pulsar")
              .option("service.url", url).option("topic", topic).load().collect())
written = sorted(r.value.decode() for r in spark.read.format("pulsar")
                 .option("service.url", url).option("topic", topic + "-out").load().collect())
spark.sql(f"CREATE TEMPORARY VIEW pulsar_view USING pulsar "
          f"OPTIONS (`service.url` '{url}', topic '{topic}')")
sql = spark.sql("SELECT count(*) AS n, min(string(key)) AS k FROM pulsar_view").collect()[0]
print(json.dumps({"read": read, "written": written, "sql": [sql.n, sql.k],
                  "registered_by_hand": False}))
"""


@pytest.mark.parametrize("mode", ["classic", "connect"])
def test_a_fresh_session_finds_the_pulsar_format_without_registering(
    mode: str, fresh_pulsar_lite, topic_name: str
) -> None:
    lite = fresh_pulsar_lite()
    produce(lite.service_url, topic_name, [b"a", b"b", b"c"], ["x", "y", "z"])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, lite.service_url, topic_name, mode],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, f"stdout:\n{done.stdout}\nstderr:\n{done.stderr[-6000:]}"
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == {
        "read": ["a", "b", "c"],
        "written": ["one", "two"],
        "sql": [3, "x"],
        "registered_by_hand": False,
    }


def test_the_module_spark_looks_up_is_the_data_source() -> None:
    import pyspark_pulsar
    from pulsar_spark import PulsarDataSource

    assert pyspark_pulsar.DefaultSource is PulsarDataSource
    assert PulsarDataSource.name() == "pulsar"
