"""The ``orders`` streaming table: every JSON order of the Pulsar topic, as typed columns.

Each run of the pipeline reads what arrived since the previous run (the checkpoint is under
the pipeline's ``storage``) and appends it to the table.
"""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

spark = SparkSession.active()

SERVICE_URL = spark.conf.get("pulsar.serviceUrl")
TOPIC = spark.conf.get("pulsar.topic")


@dp.table(comment="Orders from the Pulsar topic, one row per message")
def orders() -> DataFrame:
    return (
        spark.readStream.format("pulsar")
        .option("service.url", SERVICE_URL)
        .option("topic", TOPIC)
        .option("startingOffsets", "earliest")  # the first run reads the whole topic
        .option("jsonSchema", "id LONG, customer STRING, amount DOUBLE")
        .load()
        .select("value.*", "publishTime")
    )
