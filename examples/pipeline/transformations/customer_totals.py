"""The ``customer_totals`` materialized view: orders and amount per customer, recomputed from
the ``orders`` table on each run."""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()


@dp.materialized_view(comment="Number of orders and total amount per customer")
def customer_totals() -> DataFrame:
    return (
        spark.read.table("orders")
        .groupBy("customer")
        .agg(F.count("*").alias("orders"), F.sum("amount").alias("total"))
    )
