"""The main job: Spark batch and streaming jobs on an embedded Pulsar broker, end to end.

    python examples/main_job.py [--orders 20000] [--service-url pulsar://host:6650]

1. Starts pulsar-lite (the broker inside the ``pulsar-lite`` wheel) on a free
   loopback port, with its data in a temporary directory; with
   ``--service-url`` it uses that broker instead (topic names then get a
   unique suffix).
2. Produces sample orders to ``orders`` with the connector's client: key =
   customer, value = JSON ``{"order", "customer", "region", "amount"}``, a ``source``
   property and an event time.
3. Reads them with ``spark.read.format("pulsar")`` as typed columns: the
   ``jsonSchema`` option gives the JSON values' type as a Spark DDL string
   (pulsar-lite keeps no schemas; on Apache Pulsar a topic's registered schema
   does this by itself), totals the amounts per region, and writes one
   message per region to ``order-totals`` with ``df.write.format("pulsar")``.
4. Reads ``order-totals`` back, prints it and checks the totals against what
   was produced.
5. Streams the orders of 250 or more into ``big-orders`` with
   ``spark.readStream`` / ``writeStream.format("pulsar")`` and a checkpoint
   (``Trigger.AvailableNow``, at most 4,000 rows a micro-batch); produces more
   orders and runs the stream again from its checkpoint, which picks up only
   the new ones; checks ``big-orders`` holds each big order exactly once.
6. Exits 0, or 1 if any check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator

import pyarrow as pa

from pulsar_spark.client import PulsarClient
from pulsar_spark.embedded import EmbeddedBroker

REGIONS = ("north", "south", "east", "west")
#: Orders of this amount or more are "big": the stream picks them out.
BIG = 250.0


@contextlib.contextmanager
def embedded_broker() -> Iterator[str]:
    """Start pulsar-lite on a free port, its data in a temporary directory; yield its service
    URL; stop it."""
    with EmbeddedBroker() as broker:
        print(f"pulsar-lite is up at {broker.service_url}")
        yield broker.service_url


def produce_orders(
    url: str, topic: str, count: int, seed: int = 7, first_id: int = 0
) -> dict[str, tuple[int, float, int]]:
    """Send ``count`` orders; return the expected (orders, total amount, orders of BIG
    or more) per region."""
    rng = random.Random(seed)
    expected: dict[str, tuple[int, float, int]] = {}
    values, keys, properties, times = [], [], [], []
    now = int(time.time() * 1000)
    for i in range(count):
        region = rng.choice(REGIONS)
        amount = round(rng.uniform(1, 500), 2)
        customer = f"customer-{rng.randrange(1000)}"
        values.append(
            json.dumps(
                {"order": first_id + i, "customer": customer, "region": region, "amount": amount}
            ).encode()
        )
        keys.append(customer)
        properties.append([("source", "main_job")])
        times.append(now - (count - i))
        n, total, big = expected.get(region, (0, 0.0, 0))
        expected[region] = (n + 1, total + amount, big + (amount >= BIG))
    table = pa.table(
        {
            "value": pa.array(values, pa.binary()),
            "key": pa.array(keys, pa.string()),
            "properties": pa.array(properties, pa.map_(pa.string(), pa.string())),
            "eventTime": pa.array(times, pa.int64()),
        }
    )
    with PulsarClient(url) as client, client.create_producer(topic, compression="lz4") as p:
        p.send_batch(table)
        p.flush()
    return expected


def spark_session():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-spark-main-job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    if tuple(int(part) for part in spark.version.split(".")[:2]) < (4, 1):
        # Spark 4.0 does not find the "pulsar" format by itself.
        from pulsar_spark import PulsarDataSource

        spark.dataSource.register(PulsarDataSource)
    return spark


def run_batch_job(spark, url: str, orders: str, totals: str) -> list:
    """Read the orders, total them per region, write the totals, read them back."""
    from pyspark.sql import functions as F

    typed = (
        spark.read.format("pulsar")
        .option("service.url", url)
        .option("topic", orders)
        .option("minPartitions", "2")
        # The values' type: `value` becomes a struct of these columns.
        .option("jsonSchema", "order BIGINT, customer STRING, region STRING, amount DOUBLE")
        .load()
    )
    print(f"read {typed.count()} orders from {orders}; the first three:")
    typed.select(
        F.col("key").cast("string").alias("key"),
        "value.*",
        "messageId",
        "eventTime",
        "properties",
    ).show(3, truncate=False)

    per_region = typed.groupBy("value.region").agg(
        F.count("*").alias("orders"), F.round(F.sum("value.amount"), 2).alias("total")
    )
    (
        per_region.select(
            F.col("region").alias("key"),
            F.to_json(F.struct("region", "orders", "total")).alias("value"),
            F.create_map(F.lit("job"), F.lit("main_job")).alias("properties"),
        )
        .write.format("pulsar")
        .option("service.url", url)
        .option("topic", totals)
        .mode("append")
        .save()
    )

    back = (
        spark.read.format("pulsar")
        .option("service.url", url)
        .option("topic", totals)
        .load()
        .select(
            F.col("key").cast("string").alias("region"),
            F.col("value").cast("string").alias("value"),
            "messageId",
            "properties",
        )
    )
    print(f"read back from {totals}:")
    back.orderBy("region").show(truncate=False)
    return back.collect()


def run_stream(spark, url: str, orders: str, big: str, checkpoint: str) -> int:
    """Stream the orders of BIG or more into ``big`` until caught up; return the rows
    this run wrote."""
    from pyspark.sql import functions as F

    amount = F.get_json_object(F.col("value").cast("string"), "$.amount").cast("double")
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", orders)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerTrigger", "4000")
        .load()
        .where(amount >= BIG)
        .select("key", "value", "eventTime")
    )
    query = (
        stream.writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", big)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in batches)
    print(f"stream: {len(batches)} micro-batches read {rows} orders; the big ones went to {big}")
    return rows


def big_orders_in(url: str, topic: str) -> list[bytes]:
    with PulsarClient(url) as client:
        return [v for b in client.read_batches(topic) for v in b.column("value").to_pylist()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--orders", type=int, default=20_000)
    parser.add_argument("--service-url", help="an existing broker instead of pulsar-lite")
    args = parser.parse_args()
    broker = contextlib.nullcontext(args.service_url) if args.service_url else embedded_broker()
    suffix = f"-{int(time.time())}" if args.service_url else ""
    orders = f"persistent://public/default/orders{suffix}"
    totals = f"persistent://public/default/order-totals{suffix}"
    big = f"persistent://public/default/big-orders{suffix}"
    checkpoint = tempfile.mkdtemp(prefix="pulsar-spark-main-checkpoint-")
    with broker as url:
        expected = produce_orders(url, orders, args.orders)
        print(f"produced {args.orders} orders to {orders}")
        spark = spark_session()
        try:
            rows = run_batch_job(spark, url, orders, totals)
            streamed = run_stream(spark, url, orders, big, checkpoint)
            more = produce_orders(url, orders, 2_000, seed=8, first_id=args.orders)
            print("produced 2000 more orders; the stream restarts from its checkpoint")
            streamed_again = run_stream(spark, url, orders, big, checkpoint)
        finally:
            spark.stop()
            shutil.rmtree(checkpoint, ignore_errors=True)
        stored = big_orders_in(url, big)
    streams_ok = check_stream(stored, args.orders, streamed, streamed_again, expected, more)
    return 0 if check_totals(rows, expected) and streams_ok else 1


def check_stream(
    stored: list[bytes], first: int, streamed: int, streamed_again: int, expected: dict, more: dict
) -> bool:
    wanted = sum(big for _, _, big in expected.values()) + sum(big for _, _, big in more.values())
    ok = (
        streamed == first
        and streamed_again == 2_000
        and len(stored) == wanted
        and len(set(stored)) == len(stored)
    )
    print(
        f"big-orders holds {len(stored)} orders, {len(set(stored))} distinct; expected "
        f"{wanted}: " + ("exactly once" if ok else "MISMATCH")
    )
    return ok


def check_totals(rows: list, expected: dict) -> bool:
    got = {}
    for row in rows:
        data = json.loads(row.value)
        got[row.region] = (data["orders"], data["total"])
    wanted = {r: (n, round(total, 2)) for r, (n, total, _) in expected.items()}
    ok = got.keys() == wanted.keys() and all(
        got[r][0] == wanted[r][0] and abs(got[r][1] - wanted[r][1]) < 0.01 for r in wanted
    )
    print("totals match what was produced" if ok else f"MISMATCH: {got} != {wanted}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
