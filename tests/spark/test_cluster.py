"""Spark with separate executor processes: ``local-cluster[2,1,1024]`` (two executor JVMs,
each with its own Python workers) on pulsar-lite with 4 partitions per topic.

One driver subprocess (the suite's own session is ``local[2]``, and a JVM has one
SparkContext) runs three jobs and reports what it saw in a JSON file, checked here
row by row: a batch write, a batch read of it with ``minPartitions`` (more splits
than partitions), and a stream read in two runs, the second restarted from the
first's checkpoint after more messages were written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WRITTEN = 2000
STREAMED = (300, 200)


def test_two_executors_write_read_and_stream(pulsar_lite_partitioned, tmp_path) -> None:
    url = pulsar_lite_partitioned.service_url
    stamp = time.time_ns()
    job = {
        "url": url,
        "written": f"persistent://public/default/cluster-write-{stamp}",
        "streamed": f"persistent://public/default/cluster-stream-{stamp}",
        "out": str(tmp_path),
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, __file__, json.dumps(job)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    text = log.read_text(errors="replace")
    assert done.returncode == 0, text[-5000:]
    result = json.loads((tmp_path / "result.json").read_text())
    print("FIGURE cluster seconds:", {k: round(v, 1) for k, v in result["seconds"].items()})
    assert result["executors"] == 2
    # Batch write then read with minPartitions: every row once, as written.
    written = [f"w-{i:05d}" for i in range(WRITTEN)]
    assert result["read_splits"] >= 8
    rows = result["read"]
    assert sorted(r[0] for r in rows) == written
    assert all(r[1] == r[0].replace("w-", "k-") for r in rows)
    assert len({r[2] for r in rows}) == WRITTEN  # message ids unique
    assert {r[3] for r in rows} == {0, 1, 2, 3}  # every partition
    assert len(result["read_pids"]) == 2  # both executors' Python workers read
    # The stream, run twice over the same checkpoint: each message once, in order
    # within its partition.
    sent = [f"s-{i:05d}" for i in range(sum(STREAMED))]
    streamed = result["streamed"]
    assert sorted(r[0] for r in streamed) == sent
    assert len({r[1] for r in streamed}) == len(sent)
    by_partition: dict[int, list[str]] = {}
    for value, _, partition in sorted(streamed, key=lambda r: _id_order(r[1])):
        by_partition.setdefault(partition, []).append(value)
    for values in by_partition.values():
        assert values == sorted(values)
    assert result["stream_runs"] == [STREAMED[0], STREAMED[1]]


def _id_order(message_id: str) -> tuple[int, ...]:
    return tuple(int(x) for x in message_id.split(":"))


# ---------------------------------------------------------------------------
# The driver subprocess
# ---------------------------------------------------------------------------


def _driver(job: dict) -> None:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from pulsar_spark.client import PulsarClient
    from tests.support.spark_cluster import executor_of, local_cluster_session

    started = time.perf_counter()
    spark, executors = local_cluster_session(
        "pulsar-spark-cluster-test", **{"spark.sql.shuffle.partitions": "2"}
    )
    out, url = Path(job["out"]), job["url"]
    result: dict = {}
    try:
        result["executors"] = executors
        seconds = result["seconds"] = {"start": time.perf_counter() - started}

        # A batch write, from 4 Spark partitions.
        rows = [(f"w-{i:05d}".encode(), f"k-{i:05d}") for i in range(WRITTEN)]
        frame = spark.createDataFrame(
            spark.sparkContext.parallelize(rows, 4), "value binary, key string"
        )
        frame.write.format("pulsar").mode("append").option("service.url", url).option(
            "topic", job["written"]
        ).save()

        seconds["write"] = time.perf_counter() - started - sum(seconds.values())
        # A batch read of it, split beyond its 4 partitions.
        read = (
            spark.read.format("pulsar")
            .option("service.url", url)
            .option("topic", job["written"])
            .option("minPartitions", "8")
            .load()
        )
        result["read_splits"] = read.rdd.getNumPartitions()
        result["read"] = [
            [bytes(r.value).decode(), bytes(r.key).decode(), r.messageId, r.partition]
            for r in read.select("value", "key", "messageId", "partition").collect()
        ]

        def worker_pid(_rows):  # the executor's Python worker that read the split
            yield (os.getppid(), TaskContext.get().partitionId())

        pids = read.select("value").rdd.mapPartitions(worker_pid).collect()
        result["read_pids"] = sorted({executor_of(pid) for pid, _ in pids})

        seconds["read"] = time.perf_counter() - started - sum(seconds.values())
        # A stream, restarted from its checkpoint.
        runs = []
        first = 0
        for count in STREAMED:
            with (
                PulsarClient(url) as client,
                client.create_producer(job["streamed"], batch_max_messages=7) as producer,
            ):
                for i in range(first, first + count):
                    producer.send(f"s-{i:05d}".encode())
                producer.flush()
            first += count
            before = _parquet_rows(spark, out / "sink")
            query = (
                spark.readStream.format("pulsar")
                .option("service.url", url)
                .option("topic", job["streamed"])
                .option("startingOffsets", "earliest")
                .load()
                .select(
                    F.col("value").cast("string").alias("value"),
                    F.col("messageId").cast("string").alias("messageId"),
                    "partition",
                )
                .writeStream.format("parquet")
                .option("path", str(out / "sink"))
                .option("checkpointLocation", str(out / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(300)
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            runs.append(_parquet_rows(spark, out / "sink") - before)
        result["stream_runs"] = runs
        seconds["stream"] = time.perf_counter() - started - sum(seconds.values())
        result["streamed"] = [
            [r.value, r.messageId, r.partition]
            for r in spark.read.parquet(str(out / "sink")).collect()
        ]
    finally:
        spark.stop()
    (out / "result.json").write_text(json.dumps(result))


def _parquet_rows(spark, path: Path) -> int:  # type: ignore[no-untyped-def]
    if not path.exists():
        return 0
    return spark.read.parquet(str(path)).count()


if __name__ == "__main__":
    _driver(json.loads(sys.argv[1]))
