"""A read given ``.schema(...)``: some of the row schema's columns, the only ones it yields
(Spark moves less); a schema that does not fit is refused, naming the column."""

from __future__ import annotations

import re

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.spark.errors import PulsarSchemaError


def _produce(url: str, topic: str, n: int) -> None:
    with PulsarClient(url) as client, client.create_producer(topic) as producer:
        for i in range(n):
            producer.send(f"v{i}".encode(), key=f"k{i}")
        producer.flush()


def test_a_read_with_some_columns_yields_those(spark, pulsar_lite, topic_name, tmp_path) -> None:
    url = pulsar_lite.service_url
    _produce(url, topic_name, 300)
    options = {"service.url": url, "topic": topic_name, "startingOffsets": "earliest"}
    df = spark.read.format("pulsar").options(**options).schema("value binary, key binary").load()
    assert df.columns == ["value", "key"]
    got = sorted((bytes(r.key).decode(), bytes(r.value).decode()) for r in df.collect())
    assert got == sorted((f"k{i}", f"v{i}") for i in range(300))
    # A stream too: the micro-batch's rows have the columns asked for.
    query = (
        spark.readStream.format("pulsar")
        .options(**options)
        .schema("messageId string, value binary")
        .load()
        .writeStream.format("memory")
        .queryName("projected")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    rows = spark.sql("select * from projected").collect()
    assert sorted(bytes(r.value).decode() for r in rows) == sorted(f"v{i}" for i in range(300))
    assert len({r.messageId for r in rows}) == 300


@pytest.mark.parametrize(
    ("ddl", "fault"),
    [
        ("value string", "value string (here binary)"),
        ("value binary, offset bigint", "offset bigint (no such column)"),
    ],
)
def test_a_schema_that_does_not_fit_names_the_column(spark, ddl: str, fault: str) -> None:
    from pyspark.sql.types import _parse_datatype_string

    from pulsar_spark.spark.datasource import SPARK_SCHEMA, _check_projection

    with pytest.raises(PulsarSchemaError, match=re.escape(fault)):
        _check_projection(_parse_datatype_string(ddl), SPARK_SCHEMA)
    with pytest.raises(Exception, match="does not fit"):
        spark.read.format("pulsar").option("service.url", "pulsar://127.0.0.1:1").option(
            "topic", "t"
        ).schema(ddl).load().collect()


def test_typed_values_with_some_columns(spark, pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for i in range(50):
            producer.send(f'{{"id": {i}, "name": "n{i}"}}'.encode())
        producer.send(b"not json")
        producer.flush()
    df = (
        spark.read.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .option("jsonSchema", "id BIGINT, name STRING")
        .option("decodeErrorMode", "deadLetter")
        .schema("value struct<id:bigint,name:string>, messageId string")
        .load()
    )
    rows = df.collect()
    assert df.columns == ["value", "messageId"]
    assert sorted(r.value.id for r in rows if r.value is not None) == list(range(50))
    assert len(rows) == 51  # the undecodable one too, its value null
