"""The main job: a Spark batch job on an embedded Pulsar broker, end to end.

    python examples/main_job.py [--orders 20000]

1. Starts pulsar-lite (the broker inside the ``pulsar-lite`` wheel) on a free
   loopback port, with its data in a temporary directory.
2. Produces sample orders to ``orders`` with the connector's client: key =
   customer, value = JSON ``{"customer", "region", "amount"}``, a ``source``
   property and an event time.
3. Reads them with ``spark.read.format("pulsar")``, totals the amounts per
   region, and writes one message per region to ``order-totals`` with
   ``df.write.format("pulsar")``.
4. Reads ``order-totals`` back, prints it, checks the totals against what was
   produced, and exits 0 (1 if they differ).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol import PulsarError

REGIONS = ("north", "south", "east", "west")


@contextlib.contextmanager
def embedded_broker() -> Iterator[str]:
    """Start pulsar-lite on a free port; yield its service URL; stop it."""
    from pulsar_lite.binary_finder import find_pulsar_lite_binary

    root = Path(tempfile.mkdtemp(prefix="pulsar-spark-main-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = root / "pulsar-lite.toml"
    # The metrics endpoint would bind 0.0.0.0:8080: leave it off.
    config.write_text("default_partitions = 0\n\n[metrics]\nenabled = false\n")
    log = (root / "broker.log").open("wb")
    process = subprocess.Popen(
        [find_pulsar_lite_binary(), "--addr", f"127.0.0.1:{port}", "--db-path",
         str(root / "data"), "--config", str(config), "--log-level", "warn"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"pulsar://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                msg = f"pulsar-lite exited with status {process.returncode}; see {log.name}"
                raise RuntimeError(msg)
            try:
                with PulsarClient(url, connect_timeout=1, operation_timeout=2) as client:
                    client.get_partitions("readiness-check")
                break
            except PulsarError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        print(f"pulsar-lite is up at {url} (pid {process.pid})")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def produce_orders(url: str, topic: str, count: int) -> dict[str, tuple[int, float]]:
    """Send ``count`` orders; return the expected (orders, total amount) per region."""
    rng = random.Random(7)
    expected: dict[str, tuple[int, float]] = {}
    values, keys, properties, times = [], [], [], []
    now = int(time.time() * 1000)
    for i in range(count):
        region = rng.choice(REGIONS)
        amount = round(rng.uniform(1, 500), 2)
        customer = f"customer-{rng.randrange(1000)}"
        values.append(json.dumps({"customer": customer, "region": region,
                                  "amount": amount}).encode())
        keys.append(customer)
        properties.append([("source", "main_job")])
        times.append(now - (count - i))
        n, total = expected.get(region, (0, 0.0))
        expected[region] = (n + 1, total + amount)
    table = pa.table({
        "value": pa.array(values, pa.binary()),
        "key": pa.array(keys, pa.string()),
        "properties": pa.array(properties, pa.map_(pa.string(), pa.string())),
        "eventTime": pa.array(times, pa.int64()),
    })
    with PulsarClient(url) as client, client.create_producer(topic, compression="lz4") as p:
        p.send_batch(table)
        p.flush()
    return expected


def run_spark_job(url: str, orders: str, totals: str) -> list:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from pulsar_spark import PulsarDataSource

    spark = (SparkSession.builder.master("local[2]").appName("pulsar-spark-main-job")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.dataSource.register(PulsarDataSource)
        raw = (spark.read.format("pulsar").option("service.url", url).option("topic", orders)
               .option("minPartitions", "2").load())
        print(f"read {raw.count()} orders from {orders}; the first three:")
        raw.select(F.col("key").cast("string").alias("key"),
                   F.col("value").cast("string").alias("value"),
                   "messageId", "eventTime", "properties").show(3, truncate=False)

        order = F.from_json(F.col("value").cast("string"),
                            "customer string, region string, amount double")
        per_region = (raw.select(order.alias("o")).groupBy("o.region")
                      .agg(F.count("*").alias("orders"),
                           F.round(F.sum("o.amount"), 2).alias("total")))
        (per_region.select(
            F.col("region").alias("key"),
            F.to_json(F.struct("region", "orders", "total")).alias("value"),
            F.create_map(F.lit("job"), F.lit("main_job")).alias("properties"))
         .write.format("pulsar").option("service.url", url).option("topic", totals)
         .mode("append").save())

        back = (spark.read.format("pulsar").option("service.url", url).option("topic", totals)
                .load()
                .select(F.col("key").cast("string").alias("region"),
                        F.col("value").cast("string").alias("value"), "messageId",
                        "properties"))
        print(f"read back from {totals}:")
        back.orderBy("region").show(truncate=False)
        return back.collect()
    finally:
        spark.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=20_000)
    args = parser.parse_args()
    with embedded_broker() as url:
        orders = "persistent://public/default/orders"
        totals = "persistent://public/default/order-totals"
        expected = produce_orders(url, orders, args.orders)
        print(f"produced {args.orders} orders to {orders}")
        rows = run_spark_job(url, orders, totals)
    got = {}
    for row in rows:
        data = json.loads(row.value)
        got[row.region] = (data["orders"], data["total"])
    wanted = {r: (n, round(total, 2)) for r, (n, total) in expected.items()}
    ok = got.keys() == wanted.keys() and all(
        got[r][0] == wanted[r][0] and abs(got[r][1] - wanted[r][1]) < 0.01 for r in wanted)
    print("totals match what was produced" if ok else f"MISMATCH: {got} != {wanted}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
