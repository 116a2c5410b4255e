# Databricks notebook source
# MAGIC %md
# MAGIC # Pulsar streaming read with a checkpoint
# MAGIC
# MAGIC `spark.readStream.format("pulsar")` turns a topic into a stream. The query keeps its
# MAGIC position (one message id per topic partition) in its **checkpoint**: run it, produce more,
# MAGIC run it again from the same checkpoint, and it reads only what is new, each message once.
# MAGIC
# MAGIC This notebook runs the query with `Trigger.AvailableNow` (read what is there, then stop),
# MAGIC twice, into parquet files. For a query that runs on, use `.trigger(processingTime="10
# MAGIC seconds")` and stop it with `query.stop()`.
# MAGIC
# MAGIC **Databricks:** set the `service_url` widget (and `work_dir`, where the checkpoint and
# MAGIC the output go), then *Run all*. **Elsewhere:** `python notebooks/02_streaming_read.py` with
# MAGIC `PULSAR_SERVICE_URL` (and optionally `PULSAR_NOTEBOOK_DIR`) set.

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

# Where the checkpoint and the output live: DBFS or a volume on Databricks, a local
# directory elsewhere.
DEFAULT_DIR = os.environ.get("PULSAR_NOTEBOOK_DIR", "/tmp/pulsar-spark-notebooks")
if dbutils is not None:
    dbutils.widgets.text("work_dir", DEFAULT_DIR, "Checkpoint and output directory")
    WORK_DIR = dbutils.widgets.get("work_dir")
else:
    WORK_DIR = DEFAULT_DIR
CHECKPOINT = f"{WORK_DIR.rstrip('/')}/{RUN}/checkpoint"
OUTPUT = f"{WORK_DIR.rstrip('/')}/{RUN}/clicks"
TOPIC = f"persistent://public/default/clicks-stream-{RUN}"
print(f"topic {TOPIC}\ncheckpoint {CHECKPOINT}\noutput {OUTPUT}")


def write_clicks(first: int, count: int) -> None:
    """Write click events `first` .. `first + count - 1` to TOPIC (a batch write)."""
    page = F.element_at(
        F.array(*[F.lit(p) for p in ("home", "search", "product", "cart")]),
        (F.col("id") % 4 + 1).cast("int"),
    )
    (
        spark.range(first, first + count)
        .withColumn("user", F.format_string("user-%02d", F.pmod(F.xxhash64("id"), F.lit(50))))
        .select(
            F.col("user").alias("key"),
            F.to_json(F.struct("user", page.alias("page"), F.col("id").alias("seq"))).alias(
                "value"
            ),
            F.timestamp_seconds(F.lit(1767225600) + F.col("id")).alias("eventTime"),
        )
        .write.format("pulsar")
        .option("service.url", SERVICE_URL)
        .option("topic", TOPIC)
        .mode("append")
        .save()
    )


# COMMAND ----------

# MAGIC %md
# MAGIC ## The stream
# MAGIC
# MAGIC `startingOffsets` applies to a query's first run only (a stream starts at `latest` by
# MAGIC default); later runs go on from the checkpoint. `maxRecordsPerTrigger` (Spark 4.2+) caps
# MAGIC each micro-batch.

# COMMAND ----------

write_clicks(0, 600)
print("wrote 600 click events")

SPARK_MINOR = tuple(int(x) for x in spark.version.split(".")[:2])
stream = (
    spark.readStream.format("pulsar")
    .option("service.url", SERVICE_URL)
    .option("topic", TOPIC)
    .option("startingOffsets", "earliest")
)
if SPARK_MINOR >= (4, 2):
    stream = stream.option("maxRecordsPerTrigger", "250")
CLICK = "user string, page string, seq long"
clicks = (
    stream.load()
    .select(
        F.from_json(F.col("value").cast("string"), CLICK).alias("c"),
        "messageId",
        "publishTime",
    )
    .select("c.*", "messageId", "publishTime")
)


def run_once() -> list[int]:
    """Run the query until it has read everything there is; return rows per micro-batch."""
    query = (
        clicks.writeStream.format("parquet")
        .option("path", OUTPUT)
        .option("checkpointLocation", CHECKPOINT)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()
    # p.numInputRows, not p["numInputRows"]: over Spark Connect (pyspark 4.3) the latter is None.
    return [p.numInputRows for p in query.recentProgress if p.numInputRows]


first = run_once()
print(f"first run: micro-batches of {first} rows")

# COMMAND ----------

# MAGIC %md
# MAGIC ## More data, same checkpoint: only the new messages are read

# COMMAND ----------

write_clicks(600, 400)
print("wrote 400 more click events")
second = run_once()
print(f"second run: micro-batches of {second} rows")

out = spark.read.parquet(OUTPUT)
out.groupBy("page").agg(
    F.count("*").alias("clicks"), F.countDistinct("user").alias("users")
).orderBy("page").show()
rows, ids = out.count(), out.select("messageId").distinct().count()
seqs = out.agg(F.min("seq"), F.max("seq")).first()
print(f"output: {rows} rows, {ids} distinct message ids, seq {seqs[0]}..{seqs[1]}")

# COMMAND ----------

if sum(first) != 600 or sum(second) != 400 or rows != 1000 or ids != 1000:
    msg = f"expected 600 then 400 rows, 1000 in all, got {first}, {second}, {rows}, {ids}"
    raise AssertionError(msg)
print("02_streaming_read: OK, 600 + 400 rows, each message once")
