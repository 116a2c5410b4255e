"""A sink task that fails on its first attempt, after some of its rows reached the broker.

Spark retries a failed task only when allowed to (``local[N,F]``), which the session
of the other tests is not, so the query runs in a Spark of its own in a subprocess:
Pulsar -> the Pulsar sink, whose task sends half its rows, waits for their receipts
and fails on attempt 0. On a namespace with deduplication the retry's replays are dropped; on one
without, they are stored again, and the count is reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pulsar_spark.spark.compat import spark_version
from tests.support.official import produce, read_all
from tests.support.spark import TEST_JVM_OPTIONS

SCRIPT = textwrap.dedent('''
    import json, os, sys
    from pyspark import TaskContext
    from pyspark.sql import SparkSession
    from pulsar_spark import PulsarDataSource
    from pulsar_spark.spark.stream.writer import PulsarStreamWriter

    class FailingOnceWriter(PulsarStreamWriter):
        """The real sink, failing its first attempt once half its rows are confirmed."""

        def _send(self, producer, table):
            if TaskContext.get().attemptNumber() > 0 or table.num_rows < 2:
                return super()._send(producer, table)
            super()._send(producer, table.slice(0, table.num_rows // 2))
            producer.flush()
            raise RuntimeError("injected failure on the first attempt")

    class FailingOnce(PulsarDataSource):
        @classmethod
        def name(cls):
            return "pulsar_failing_once"

        def streamWriter(self, schema, overwrite):
            writer = super().streamWriter(schema, overwrite)
            return FailingOnceWriter(writer.options, writer.columns)

    runs = json.loads(sys.argv[1])
    spark = (SparkSession.builder.master("local[2,2]").appName("task-retry")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
             .config("spark.driver.extraJavaOptions", os.environ["TEST_JVM_OPTIONS"])
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(PulsarDataSource)
    spark.dataSource.register(FailingOnce)
    for run in runs:
        df = (spark.readStream.format("pulsar").option("service.url", run["url"])
              .option("topic", run["source"]).option("startingOffsets", "earliest").load()
              .select("value"))
        query = (df.writeStream.format("pulsar_failing_once").option("service.url", run["url"])
                 .option("topic", run["target"]).option("checkpointLocation", run["checkpoint"])
                 .trigger(availableNow=True).start())
        query.awaitTermination(240)
        if query.exception() is not None:
            raise query.exception()
    spark.stop()
''')


@pytest.mark.skipif(
    spark_version() < (4, 1), reason="writeStream.format('pulsar') needs Spark 4.1+"
)
def test_a_retried_sink_task_writes_each_row_once_with_deduplication(
    apache_pulsar_dedup, apache_pulsar, topic_name, tmp_path: Path
) -> None:
    rows = [b"t%d" % i for i in range(40)]
    runs = []
    for broker, name in ((apache_pulsar_dedup, "dedup"), (apache_pulsar, "plain")):
        source, target = f"{topic_name}-{name}-in", f"{topic_name}-{name}-out"
        produce(broker.service_url, source, rows)
        runs.append(
            {
                "url": broker.service_url,
                "source": source,
                "target": target,
                "checkpoint": str(tmp_path / name),
            }
        )
    script = tmp_path / "task_retry.py"
    script.write_text(SCRIPT)
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        TEST_JVM_OPTIONS=TEST_JVM_OPTIONS,
    )
    done = subprocess.run(
        [sys.executable, str(script), json.dumps(runs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "injected failure on the first attempt" in done.stderr  # it did fail once

    deduplicated = read_all(runs[0]["url"], runs[0]["target"], at_least=len(rows))
    assert sorted(m["value"] for m in deduplicated) == sorted(rows)  # each row once

    plain = read_all(runs[1]["url"], runs[1]["target"], at_least=len(rows))
    assert set(m["value"] for m in plain) == set(rows)
    duplicates = len(plain) - len(rows)
    print(f"a failed first attempt, without deduplication: {duplicates} duplicate rows")
    assert duplicates == len(rows) // 2  # the first half, sent twice
