"""The data source over Spark Connect: a local Spark Connect server, a client session that
registers ``PulsarDataSource`` and reads and writes Pulsar through it.

``tests.support.spark.local_connect_session`` starts a local Spark Connect server (what
``SparkSession.builder.remote("local[2]")`` does, on a free port instead of the fixed 15002)
and connects to it (pyspark[connect]: grpcio, grpcio-status, googleapis-common-protos,
zstandard). It runs in a subprocess: the session-scoped classic ``spark`` fixture lives in
this process, and a classic and a Connect session do not share one well. The data source
class travels from the client to the server pickled, as it would to a remote cluster.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.official import produce, read_all

#: The repository root: the subprocess imports ``tests.support.spark`` from it.
ROOT = Path(__file__).resolve().parents[2]

#: Reads ``topic`` (JSON summary on stdout), then writes ``n`` rows to ``out``, all over
#: Spark Connect. argv: service URL, topic, out topic, n.
SCRIPT = r"""
import json, sys
from pyspark.sql import functions as F
from pulsar_spark import PulsarDataSource
from tests.support.spark import local_connect_session

url, topic, out, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
spark = local_connect_session("local[2]")
try:
    spark.dataSource.register(PulsarDataSource)
    df = spark.read.format("pulsar").option("service.url", url).option("topic", topic).load()
    rows = df.select(F.col("value").cast("string").alias("value"),
                     F.col("key").cast("string").alias("key"), "properties").collect()
    (spark.range(n)
     .select(F.format_string("k%d", "id").alias("key"),
             F.format_string("v%d", "id").alias("value"),
             F.create_map(F.lit("via"), F.lit("connect")).alias("properties"))
     .write.format("pulsar").option("service.url", url).option("topic", out)
     .mode("append").save())
    print(json.dumps({
        "session": type(spark).__module__,
        "schema": df.schema.simpleString(),
        "rows": sorted([r.key, r.value, r.properties] for r in rows),
    }))
finally:
    spark.stop()
"""


def test_read_and_write_over_spark_connect(pulsar_lite, topic_name: str, tmp_path) -> None:
    url = pulsar_lite.service_url
    produce(
        url,
        topic_name,
        [{"value": f"m{i}", "key": f"k{i}", "properties": {"i": str(i)}} for i in range(30)],
    )
    out = topic_name + "-out"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPARK_")}
    env.update(
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
    )
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, url, topic_name, out, "25"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-8000:]}"
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["session"].startswith("pyspark.sql.connect"), result["session"]
    assert result["schema"].startswith("struct<key:binary,value:binary,topic:string,")
    assert result["rows"] == sorted([f"k{i}", f"m{i}", {"i": str(i)}] for i in range(30))
    written = read_all(url, out, at_least=25)
    assert sorted((m["key"], m["value"], m["properties"]) for m in written) == sorted(
        (f"k{i}", f"v{i}".encode(), {"via": "connect"}) for i in range(25)
    )
