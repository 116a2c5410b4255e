"""One warm Spark driver for one connector; commands come as JSON lines on stdin.

    python driver.py streamnative JAR     # in the Spark 3.4.1 / Scala 2.13 venv
    python driver.py ours                 # in the project's venv (Spark 4)

Runs under both pyspark 3.4.1 and 4 (standard library and pyspark only). Each command
is one JSON object on a line; each answer is one JSON object on a line of stdout that
starts with ``@@ `` (Spark may print other lines):

* ``{"op": "read", "service_url": ..., "admin_url": ..., "topic": ...}``:
  ``spark.read.format("pulsar")...load().count()``, timed from ``load()`` to the count;
  answers ``{"rows": n, "seconds": s}``;
* ``{"op": "cache", "rows": n, "size": b, "partitions": p}``: caches the DataFrame the
  writes use (``value``: a 10-digit serial and ``x`` filler, ``b`` bytes, binary);
* ``{"op": "write", "service_url": ..., "admin_url": ..., "topic": ...}``: writes the
  cached DataFrame (LZ4, batched), timed; answers ``{"seconds": s}``;
* ``{"op": "quit"}``.
"""

from __future__ import annotations

import json
import sys
import time
import traceback


def session(connector: str, jar: str | None):  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName(f"streamnative-bench-{connector}")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
    )
    if jar:
        builder = builder.config("spark.jars", jar)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if connector == "ours":
        from pulsar_spark import PulsarDataSource

        spark.dataSource.register(PulsarDataSource)
    return spark


def options(connector: str, command: dict) -> dict[str, str]:
    found = {"service.url": command["service_url"], "topic": command["topic"]}
    if connector == "streamnative":
        # StreamNative asks for the admin URL; the project has no use for it.
        found["admin.url"] = command["admin_url"]
    return found


def write_options(connector: str, command: dict) -> dict[str, str]:
    found = options(connector, command)
    # The same option name in both connectors (the project also accepts "compressionType").
    found["pulsar.producer.compressionType"] = "LZ4"
    if connector == "streamnative":
        # Without it StreamNative's producer fails the task once its client's memory
        # buffer is full (MemoryBufferIsFullError) instead of waiting.
        found["pulsar.producer.blockIfQueueFull"] = "true"
    return found


def main() -> int:
    connector = sys.argv[1]
    jar = sys.argv[2] if len(sys.argv) > 2 else None
    spark = session(connector, jar)
    cached = None
    answer = {"ready": True, "spark": spark.version}
    print("@@ " + json.dumps(answer), flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        op = command["op"]
        try:
            if op == "quit":
                break
            if op == "read":
                started = time.perf_counter()
                rows = spark.read.format("pulsar").options(**options(connector, command)).load()
                count = rows.count()
                answer = {"rows": count, "seconds": time.perf_counter() - started}
            elif op == "cache":
                size = int(command["size"])
                value = (
                    f"cast(concat(lpad(cast(id as string), 10, '0'), repeat('x', {size - 10}))"
                    " as binary) as value"
                )
                cached = (
                    spark.range(0, int(command["rows"]), 1, int(command["partitions"]))
                    .selectExpr(value)
                    .cache()
                )
                answer = {"rows": cached.count()}
            elif op == "write":
                assert cached is not None, "cache first"
                started = time.perf_counter()
                (
                    cached.write.format("pulsar")
                    .options(**write_options(connector, command))
                    .mode("append")
                    .save()
                )
                answer = {"seconds": time.perf_counter() - started}
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as exc:
            traceback.print_exc()
            answer = {"error": f"{type(exc).__name__}: {str(exc)[:2000]}"}
        print("@@ " + json.dumps(answer), flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
