# Databricks notebook source
# MAGIC %md
# MAGIC # Pulsar batch read and analysis
# MAGIC
# MAGIC Reads a Pulsar topic into a DataFrame with `spark.read.format("pulsar")` and analyses it:
# MAGIC the row schema, clicks per page, users per page, a funnel and clicks per 10 minutes of
# MAGIC event time; then reads the JSON values as typed columns (a schema for the values). The
# MAGIC notebook writes its own sample data first (2,000 JSON click events by 100 users, keyed by
# MAGIC user, with properties and an event time) to a topic of its own.
# MAGIC
# MAGIC **Databricks:** install the package on the cluster (or run the `%pip` cell below), set the
# MAGIC `service_url` widget to your broker, then *Run all*. **Anywhere else:** `python
# MAGIC notebooks/01_batch_read.py` with `PULSAR_SERVICE_URL` set (default
# MAGIC `pulsar://localhost:6650`, e.g. the repository's `docker-compose.yml`); it starts a local
# MAGIC Spark.

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

# MAGIC %md
# MAGIC ## Sample data: 2,000 click events
# MAGIC
# MAGIC Key = user id, value = JSON `{"user", "page", "seq", "ms"}`, properties `source` and
# MAGIC `device`, event times one second apart from 2026-01-01. Pages follow a fixed mix (40%
# MAGIC home, 20% search, 20% product, 10% cart, 10% checkout) so the analysis can be checked.

# COMMAND ----------

TOPIC = f"persistent://public/default/clicks-{RUN}"
N = 2000
PAGE = F.expr(
    "CASE WHEN id % 10 < 4 THEN 'home' WHEN id % 10 < 6 THEN 'search' "
    "WHEN id % 10 < 8 THEN 'product' WHEN id % 10 < 9 THEN 'cart' "
    "ELSE 'checkout' END"
)
clicks = (
    spark.range(N)
    .withColumn("user", F.format_string("user-%02d", F.pmod(F.xxhash64("id"), F.lit(100))))
    .withColumn("page", PAGE)
    .select(
        F.col("user").alias("key"),
        F.to_json(
            F.struct(
                "user", "page", F.col("id").alias("seq"), (F.col("id") * 37 % 900 + 100).alias("ms")
            )
        ).alias("value"),
        F.create_map(
            F.lit("source"),
            F.lit("notebook"),
            F.lit("device"),
            F.when(F.col("id") % 3 == 0, "mobile").otherwise("desktop"),
        ).alias("properties"),
        F.timestamp_seconds(F.lit(1767225600) + F.col("id")).alias("eventTime"),
    )
)
(
    clicks.write.format("pulsar")
    .option("service.url", SERVICE_URL)
    .option("topic", TOPIC)
    .mode("append")
    .save()
)
print(f"wrote {N} click events to {TOPIC}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Read the topic
# MAGIC
# MAGIC One Spark task per topic partition; `minPartitions` splits large partitions into more.
# MAGIC `startingOffsets` defaults to `earliest` and `endingOffsets` to `latest`.

# COMMAND ----------

raw = (
    spark.read.format("pulsar")
    .option("service.url", SERVICE_URL)
    .option("topic", TOPIC)
    .option("minPartitions", "2")
    .load()
)
raw.printSchema()
raw.select(
    F.col("key").cast("string").alias("key"),
    F.col("value").cast("string").alias("value"),
    "messageId",
    "publishTime",
    "eventTime",
    "properties",
).show(3, truncate=False)
total = raw.count()
print(f"read {total} messages from {TOPIC}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Analysis
# MAGIC
# MAGIC Parse the JSON values, then aggregate: clicks and distinct users per page, the share of
# MAGIC users reaching each funnel step, clicks per device and per 10 minutes of event time.

# COMMAND ----------

CLICK = "user string, page string, seq long, ms int"
parsed = (
    raw.select(
        F.from_json(F.col("value").cast("string"), CLICK).alias("c"),
        F.col("properties")["device"].alias("device"),
        "eventTime",
    )
    .select("c.*", "device", "eventTime")
    .cache()
)

per_page = (
    parsed.groupBy("page")
    .agg(
        F.count("*").alias("clicks"),
        F.countDistinct("user").alias("users"),
        F.round(F.avg("ms"), 1).alias("avg_ms"),
    )
    .orderBy(F.desc("clicks"), "page")
)
per_page.show()

funnel = (
    parsed.groupBy("user")
    .agg(F.collect_set("page").alias("pages"))
    .select(
        *[
            F.array_contains("pages", p).cast("int").alias(p)
            for p in ("home", "search", "product", "cart", "checkout")
        ]
    )
    .agg(*[F.sum(p).alias(p) for p in ("home", "search", "product", "cart", "checkout")])
)
funnel.show()

parsed.groupBy("device").count().orderBy("device").show()
(
    parsed.groupBy(F.window("eventTime", "10 minutes").alias("w"))
    .count()
    .select(F.col("w.start").alias("window_start"), "count")
    .orderBy("window_start")
    .show()
)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Typed read: the values as columns
# MAGIC
# MAGIC A topic with a schema in the broker's registry (AVRO, JSON, a primitive or KEY_VALUE, as
# MAGIC Java and Python producers register them) reads as typed columns with no option: `value`
# MAGIC is a struct of the record's fields. For JSON values without a registered schema (and on
# MAGIC pulsar-lite, which keeps no schemas) give their type: `jsonSchema` takes a Spark DDL
# MAGIC string (or an Avro schema), `avroSchema` an Avro schema for Avro values.
# MAGIC `decodeErrorMode=deadLetter` turns values that do not decode into a null `value` and a
# MAGIC `decodeError` text instead of failing the job; `schemaMode=raw` always reads bytes.

# COMMAND ----------

typed = (
    spark.read.format("pulsar")
    .option("service.url", SERVICE_URL)
    .option("topic", TOPIC)
    .option("jsonSchema", "user STRING, page STRING, seq BIGINT, ms INT")
    .load()
)
typed.printSchema()
typed.select(F.col("key").cast("string").alias("key"), "value.*", "schemaVersion").show(3)
typed_pages = {r.page: r["count"] for r in typed.groupBy("value.page").count().collect()}
print(f"typed read: value is {typed.schema['value'].dataType.simpleString()}")

# COMMAND ----------

# Check the figures against the mix the sample data was made with.
got = {r.page: r.clicks for r in per_page.collect()}
want = {
    "home": N * 4 // 10,
    "search": N * 2 // 10,
    "product": N * 2 // 10,
    "cart": N // 10,
    "checkout": N // 10,
}
if total != N or got != want or typed_pages != want:
    msg = f"expected {N} messages with pages {want}, read {total} with {got} ({typed_pages})"
    raise AssertionError(msg)
parsed.unpersist()
print(f"01_batch_read: OK, {total} clicks over {len(got)} pages")
