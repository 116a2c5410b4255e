# Databricks notebook source
# MAGIC %md
# MAGIC # Writing to Pulsar: batch and streaming
# MAGIC
# MAGIC `df.write.format("pulsar")` sends a DataFrame's rows as messages; `df.writeStream
# MAGIC .format("pulsar")` does the same for every micro-batch of a stream. The columns:
# MAGIC
# MAGIC | column | type | |
# MAGIC |---|---|---|
# MAGIC | `value` | binary or string, required | the payload (null: a tombstone) |
# MAGIC | `key` | string or binary | the partition key |
# MAGIC | `properties` | map<string,string> | message properties |
# MAGIC | `eventTime` | timestamp | the event time |
# MAGIC | `topic` | string | routes each row, when there is no `topic` option |
# MAGIC
# MAGIC Batch writes are at-least-once (a retried task sends its rows again). The stream sink is
# MAGIC effectively once when the broker deduplicates (`pulsar-admin namespaces
# MAGIC set-deduplication --enable`), at-least-once otherwise.
# MAGIC
# MAGIC **Databricks:** set the `service_url` and `work_dir` widgets, then *Run all*.
# MAGIC **Elsewhere:** `python notebooks/03_write.py` with `PULSAR_SERVICE_URL` set.

# COMMAND ----------

# MAGIC %pip install pulsar-spark

# COMMAND ----------

# Setup: the service URL (widget on Databricks, PULSAR_SERVICE_URL elsewhere), a Spark
# session (Databricks' own, or a local one). Installing the package gives the "pulsar"
# format: nothing to register.
import os
import sys
import uuid

from pyspark.sql import functions as F

try:
    dbutils  # noqa: B018  (Databricks defines dbutils and spark)
except NameError:
    dbutils = None

DEFAULT_URL = os.environ.get("PULSAR_SERVICE_URL", "pulsar://localhost:6650")
if dbutils is not None:
    dbutils.widgets.text("service_url", DEFAULT_URL, "Pulsar service URL")
    SERVICE_URL = dbutils.widgets.get("service_url")
else:
    SERVICE_URL = DEFAULT_URL

try:
    spark  # noqa: B018
except NameError:
    # Spark's Python workers must run this interpreter: it has pyarrow and pulsar_spark.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(os.environ.get("SPARK_MASTER", "local[2]"))
        .appName("pulsar-spark-notebook")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")

if tuple(int(part) for part in spark.version.split(".")[:2]) < (4, 1):
    # Spark 4.0 (Databricks Runtime 17.x) does not find the "pulsar" format by itself.
    from pulsar_spark import PulsarDataSource

    spark.dataSource.register(PulsarDataSource)
RUN = uuid.uuid4().hex[:8]  # topics of this run: reruns never see each other's data
print(f"Pulsar at {SERVICE_URL}; Spark {spark.version}; run {RUN}")
# COMMAND ----------

DEFAULT_DIR = os.environ.get("PULSAR_NOTEBOOK_DIR", "/tmp/pulsar-spark-notebooks")
if dbutils is not None:
    dbutils.widgets.text("work_dir", DEFAULT_DIR, "Checkpoint directory")
    WORK_DIR = dbutils.widgets.get("work_dir")
else:
    WORK_DIR = DEFAULT_DIR
CHECKPOINT = f"{WORK_DIR.rstrip('/')}/{RUN}/checkpoint"
ORDERS = {region: f"persistent://public/default/orders-{region}-{RUN}" for region in ("eu", "us")}
ALL_ORDERS = f"persistent://public/default/orders-all-{RUN}"
ENRICHED = f"persistent://public/default/orders-enriched-{RUN}"


def read_topic(topic: str):
    return (
        spark.read.format("pulsar").option("service.url", SERVICE_URL).option("topic", topic).load()
    )


# COMMAND ----------

# MAGIC %md
# MAGIC ## Batch: route rows by a `topic` column

# COMMAND ----------

orders = (
    spark.range(1000)
    .withColumn("region", F.when(F.col("id") % 4 == 0, "us").otherwise("eu"))
    .withColumn("amount", F.round(F.col("id") % 97 * 1.25 + 5, 2))
    .select(
        F.format_string("customer-%03d", F.col("id") % 200).alias("key"),
        F.to_json(F.struct("id", "region", "amount")).alias("value"),
        F.create_map(F.lit("region"), F.col("region")).alias("properties"),
        F.timestamp_seconds(F.lit(1767225600) + F.col("id") * 60).alias("eventTime"),
        F.concat(
            F.lit("persistent://public/default/orders-"), F.col("region"), F.lit(f"-{RUN}")
        ).alias("topic"),
    )
)
(
    orders.write.format("pulsar")
    .option("service.url", SERVICE_URL)
    .mode("append")  # the only mode: a topic cannot be overwritten
    .save()
)
counts = {region: read_topic(topic).count() for region, topic in ORDERS.items()}
print(f"routed by the topic column: {counts}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Batch: one topic, with producer options
# MAGIC
# MAGIC LZ4 compression, batches of at most 500 messages; the `topic` option wins over the column.

# COMMAND ----------

(
    orders.drop("topic")
    .write.format("pulsar")
    .option("service.url", SERVICE_URL)
    .option("topic", ALL_ORDERS)
    .option("compressionType", "LZ4")
    .option("batchingMaxMessages", "500")
    .mode("append")
    .save()
)
all_count = read_topic(ALL_ORDERS).count()
print(f"wrote {all_count} orders to {ALL_ORDERS}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Streaming: read both regional topics, enrich, write to a third
# MAGIC
# MAGIC The query reads the two topics from the earliest message, adds a `tier` to each order
# MAGIC and writes it with the same key and event time. Its checkpoint makes a second run a no-op.
# MAGIC `writeStream.format("pulsar")` needs Spark 4.1+; on 4.0, `foreachBatch` with the batch
# MAGIC sink does the same, at-least-once.

# COMMAND ----------

ORDER = "id long, region string, amount double"
enriched = (
    spark.readStream.format("pulsar")
    .option("service.url", SERVICE_URL)
    .option("topics", ",".join(ORDERS.values()))
    .option("startingOffsets", "earliest")
    .load()
    .withColumn("o", F.from_json(F.col("value").cast("string"), ORDER))
    .select(
        "key",
        "eventTime",
        F.to_json(
            F.struct(
                "o.*", F.when(F.col("o.amount") >= 100, "gold").otherwise("standard").alias("tier")
            )
        ).alias("value"),
        F.map_concat("properties", F.create_map(F.lit("enriched-by"), F.lit("03_write"))).alias(
            "properties"
        ),
    )
)


def write_micro_batch(frame, _batch_id: int) -> None:
    """Spark 4.0 has no streaming Arrow writer: each micro-batch goes through the batch
    sink (at-least-once: a replayed micro-batch is sent again)."""
    frame.write.format("pulsar").option("service.url", SERVICE_URL).option("topic", ENRICHED).mode(
        "append"
    ).save()


def run_once() -> int:
    writer = enriched.writeStream.option("checkpointLocation", CHECKPOINT)
    if tuple(int(x) for x in spark.version.split(".")[:2]) >= (4, 1):
        writer = (
            writer.format("pulsar").option("service.url", SERVICE_URL).option("topic", ENRICHED)
        )
    else:
        writer = writer.foreachBatch(write_micro_batch)
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()
    # p.numInputRows, not p["numInputRows"]: over Spark Connect (pyspark 4.3) the latter is None.
    return sum(p.numInputRows for p in query.recentProgress)


first, second = run_once(), run_once()
result = read_topic(ENRICHED)
tiers = {
    r.tier: r["count"]
    for r in result.select(F.get_json_object(F.col("value").cast("string"), "$.tier").alias("tier"))
    .groupBy("tier")
    .count()
    .collect()
}
written = result.count()
print(
    f"stream: {first} rows on the first run, {second} on the second; "
    f"{written} messages in {ENRICHED}, tiers {tiers}"
)
result.select(
    F.col("key").cast("string").alias("key"),
    F.col("value").cast("string").alias("value"),
    "properties",
).show(3, truncate=False)

# COMMAND ----------

if (
    counts != {"eu": 750, "us": 250}
    or all_count != 1000
    or (first, second, written) != (1000, 0, 1000)
):
    msg = f"unexpected counts: {counts}, {all_count}, {(first, second, written)}"
    raise AssertionError(msg)
print("03_write: OK, 1000 rows routed, 1000 written with options, 1000 streamed once")
