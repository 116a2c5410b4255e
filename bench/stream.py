"""Structured Streaming with format "pulsar": end-to-end latency and Pulsar-to-Pulsar throughput.

    python bench/stream.py [--rate 200] [--seconds 20] [--messages 1000000] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started. Spark runs ``local[2]``.

* **Latency**: a stream query with the default trigger (a micro-batch as soon as the
  previous one ends) feeds ``foreachBatch``; a producer thread sends ``--rate``
  messages per second for ``--seconds`` (once a first row has come through), each
  carrying its send time. Latency is the time from ``send`` to the row being
  visible in ``foreachBatch``. Prints p50, p99 and max.
* **Throughput**: ``--messages`` messages of 100 bytes are in a source topic; a
  ``Trigger.AvailableNow`` query copies them to a sink topic through
  ``writeStream.format("pulsar")`` and waits for every receipt; timed twice, the
  session's first copy (which warms Spark up) and a second one. Compared, in the
  same run, with the client alone copying the same topic (``read_batches`` into
  ``send_batch``, one process, one thread): the ceiling for one partition.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, spark_session

from pulsar_spark.client import PulsarClient

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

from pyspark.sql import SparkSession

_STAMP = struct.Struct(">d")


def latency(spark: SparkSession, url: str, rate: int, seconds: float) -> list[float]:
    topic = f"persistent://public/default/bench-latency-{int(time.time())}"
    with PulsarClient(url) as client, client.create_producer(topic) as producer:
        producer.send(b"warm-up")  # the topic exists before the stream starts at latest
    seen: list[float] = []
    warm: list[bytes] = []

    def collect(frame, _batch_id: int) -> None:
        now = time.time()
        for row in frame.select("value").collect():
            if len(row.value) == _STAMP.size:
                seen.append(now - _STAMP.unpack(row.value)[0])
            else:
                warm.append(row.value)

    with tempfile.TemporaryDirectory() as checkpoint:
        query = (
            spark.readStream.format("pulsar")
            .option("service.url", url)
            .option("topic", topic)
            .load()
            .writeStream.foreachBatch(collect)
            .option("checkpointLocation", checkpoint)
            .start()
        )
        sent = 0
        with (
            PulsarClient(url) as client,
            client.create_producer(topic, batch_max_delay=0.001) as producer,
        ):
            # Timing starts once a first row came through: the first micro-batches
            # start Python workers (seconds), which is not the steady state measured.
            deadline = time.time() + 120
            while not warm and time.time() < deadline:
                producer.send(b"warm-up")
                time.sleep(1)
            started = time.time()
            while time.time() - started < seconds:
                producer.send(_STAMP.pack(time.time()))
                sent += 1
                producer.flush()
                time.sleep(max(0.0, started + sent / rate - time.time()))
        deadline = time.time() + 30
        while len(seen) < sent and time.time() < deadline:
            time.sleep(0.1)
        query.stop()
    if len(seen) < sent:
        print(f"latency: only {len(seen)} of {sent} messages seen")
    return seen


def throughput(spark: SparkSession, url: str, messages: int) -> tuple[float, float, float]:
    stamp = int(time.time())
    source = f"persistent://public/default/bench-stream-in-{stamp}"
    import pyarrow as pa

    table = pa.table({"value": pa.array([b"x" * 100] * messages, pa.binary())})
    with PulsarClient(url) as client, client.create_producer(source, compression="lz4") as p:
        p.send_batch(table)
    # The client alone: read everything and write it to another topic.
    started = time.perf_counter()
    with (
        PulsarClient(url) as client,
        client.create_producer(f"{source}-client-copy", compression="lz4") as producer,
    ):
        for batch in client.read_batches(source):
            producer.send_batch(pa.table({"value": batch.column("value")}))
    client_rate = messages / (time.perf_counter() - started)
    # The first copy of a session also pays for warming up (the writer's Python
    # workers, the JVM's first Arrow conversions): timed apart.
    first_rate = messages / _spark_copy(spark, url, source, f"{source}-spark-first")
    spark_rate = messages / _spark_copy(spark, url, source, f"{source}-spark-copy")
    return first_rate, spark_rate, client_rate


def _spark_copy(spark: SparkSession, url: str, source: str, sink: str) -> float:
    """Seconds a Trigger.AvailableNow query takes to copy ``source`` to ``sink``."""
    with tempfile.TemporaryDirectory() as checkpoint:
        started = time.perf_counter()
        query = (
            spark.readStream.format("pulsar")
            .option("service.url", url)
            .option("topic", source)
            .option("startingOffsets", "earliest")
            .load()
            .select("value")
            .writeStream.format("pulsar")
            .option("service.url", url)
            .option("topic", sink)
            .option("compressionType", "lz4")
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=200, help="messages per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--service-url")
    args = parser.parse_args()
    spark = spark_session("pulsar-spark-bench-stream")
    try:
        with broker_url(args.service_url, "bench-stream-") as url:
            seen = sorted(latency(spark, url, args.rate, args.seconds))
            if seen:
                p50 = statistics.median(seen)
                p99 = seen[min(len(seen) - 1, int(len(seen) * 0.99))]
                print(
                    f"latency, default trigger, {args.rate} msgs/s for {args.seconds:g} s: "
                    f"p50 {p50 * 1000:.0f} ms  p99 {p99 * 1000:.0f} ms  "
                    f"max {seen[-1] * 1000:.0f} ms  ({len(seen)} messages)"
                )
            first_rate, spark_rate, client_rate = throughput(spark, url, args.messages)
            print(
                f"pulsar -> pulsar, {args.messages:,} x 100 B, Trigger.AvailableNow: "
                f"{spark_rate:,.0f} msgs/s (the session's first copy: {first_rate:,.0f})"
            )
            print(f"client alone, read_batches -> send_batch:          {client_rate:,.0f} msgs/s")
            print(
                f"stream/client: {spark_rate / client_rate:.2f}x (the client is one partition "
                "and no Spark)"
            )
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
