"""Typed writes: the sink registers a schema derived from the DataFrame (or encodes with the
topic's own), the official client's AvroSchema/JsonSchema/StringSchema/BytesSchema consumers
read what Spark wrote, and DataFrames that do not fit, or schemas the broker refuses, fail
with our errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, split_key_value
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.official import official_client

ORDERS = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("note", T.StringType()),
    ]
)
V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": ["null", "long"], "default": None},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}


def _orders(spark, n: int = 5):
    rows = [((i, None if i == 3 else f"n{i}"), f"k{i}") for i in range(n)]
    schema = T.StructType([T.StructField("value", ORDERS), T.StructField("key", T.StringType())])
    return spark.createDataFrame(rows, schema)


def _write(df, url: str, **options: str) -> None:
    writer = df.write.format("pulsar").option("service.url", url).mode("append")
    writer.options(**options).save()


def _record_class() -> Any:
    from pulsar.schema import Long, Record, String

    class Order(Record):
        id = Long()
        note = String()

    return Order


def _consume(url: str, topic: str, schema: Any, n: int) -> list[tuple[Any, str]]:
    """(value, key) of ``n`` messages, decoded by ``schema`` (with the writer schema of
    each message's version, fetched by the client, while it is open)."""
    with official_client(url) as client:
        consumer = client.subscribe(topic, "check", schema=schema, initial_position=_earliest())
        got = [consumer.receive(10_000) for _ in range(n)]
        decoded = [(m.value(), m.partition_key()) for m in got]
        consumer.close()
    return decoded


def _earliest() -> Any:
    import pulsar

    return pulsar.InitialPosition.Earliest


def test_a_struct_value_is_written_as_avro_the_official_client_reads(
    spark, read_pulsar, apache_pulsar, topic_name, caplog
) -> None:
    from pulsar.schema import AvroSchema

    url = apache_pulsar.service_url
    df = _orders(spark)
    _write(df, url, topic=topic_name, recordName="Order")
    with PulsarClient(url) as client:
        registered = client.latest_schema(topic_name)
    assert registered is not None
    assert registered.info.type is SchemaType.AVRO
    assert json.loads(registered.info.data) == V1
    got = _consume(url, topic_name, AvroSchema(_record_class()), 5)
    values = sorted((value.id, value.note, key) for value, key in got)
    assert values == [(i, None if i == 3 else f"n{i}", f"k{i}") for i in range(5)]
    assert "Failed to decode" not in caplog.text  # read with the registered writer schema
    # And our typed read gives the DataFrame back.
    back = read_pulsar(url, topic=topic_name)
    assert back.schema["value"].dataType == ORDERS
    assert sorted(tuple(r) for r in back.select("value.*").collect()) == sorted(
        tuple(r) for r in df.select("value.*").collect()
    )


def test_json_primitive_and_key_value_writes(spark, read_pulsar, apache_pulsar, topic_name):
    from pulsar.schema import JsonSchema

    url = apache_pulsar.service_url
    _write(_orders(spark, 3), url, topic=f"{topic_name}-json", valueSchemaType="json",
           recordName="Order")  # fmt: skip
    got = _consume(url, f"{topic_name}-json", JsonSchema(_record_class()), 3)
    assert sorted(value.id for value, _ in got) == [0, 1, 2]

    ints = spark.createDataFrame([(7,), (-1,)], "value int")
    _write(ints, url, topic=f"{topic_name}-int")
    back = read_pulsar(url, topic=f"{topic_name}-int")
    assert back.schema["value"].dataType == T.IntegerType()
    assert sorted(r.value for r in back.collect()) == [-1, 7]

    for encoding in ("inline", "separated"):
        topic = f"{topic_name}-kv-{encoding}"
        _write(_orders(spark, 4), url, topic=topic, keyValueEncoding=encoding)
        with PulsarClient(url) as client:
            found = client.latest_schema(topic)
        assert found is not None
        halves = split_key_value(found.info)
        assert halves.encoding is KeyValueEncoding[encoding.upper()]
        assert (halves.key.type, halves.value.type) == (SchemaType.STRING, SchemaType.AVRO)
        back = read_pulsar(url, topic=topic)
        assert back.schema["key"].dataType == T.StringType()
        rows = sorted((r.key, r.id) for r in back.select("key", "value.id").collect())
        assert rows == [(f"k{i}", i) for i in range(4)]


def test_text_and_binary_writes_read_by_the_official_string_and_bytes_schemas(
    spark, apache_pulsar, topic_name
) -> None:
    from pulsar.schema import BytesSchema, StringSchema

    url = apache_pulsar.service_url
    texts = ["é", "", "日本語 🎉", "a\x00b"]
    blobs = [b"\x00\xff", b"", bytes(range(256))]
    string_topic, bytes_topic = f"{topic_name}-string", f"{topic_name}-bytes"
    _write(spark.createDataFrame([(t,) for t in texts], "value string"), url, topic=string_topic)
    _write(spark.createDataFrame([(b,) for b in blobs], "value binary"), url, topic=bytes_topic)
    with PulsarClient(url) as client:
        registered = client.latest_schema(string_topic)
        assert client.latest_schema(bytes_topic) is None  # binary values: no schema
    assert registered is not None and registered.info.type is SchemaType.STRING
    got = _consume(url, string_topic, StringSchema(), len(texts))
    assert sorted(value for value, _ in got) == sorted(texts)
    got = _consume(url, bytes_topic, BytesSchema(), len(blobs))
    assert sorted(value for value, _ in got) == sorted(blobs)


def test_a_dataframe_that_does_not_fit_the_topics_schema_fails_before_sending(
    spark, read_pulsar, apache_pulsar, topic_name
) -> None:
    url = apache_pulsar.service_url
    _write(_orders(spark, 2), url, topic=topic_name, recordName="Order")
    clash = spark.createDataFrame([(("x", 1),)], "value struct<id: string, extra: int>")
    with pytest.raises(Exception, match=r"PulsarWriteError: writing to \S+ with its schema") as e:
        _write(clash, url, topic=topic_name)
    assert "id" in str(e.value) and "extra" in str(e.value)
    # The broker's compatibility check refuses a schema given for the topic.
    clashing = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}
    only_id = spark.createDataFrame([(("x",),)], "value struct<id: string>")
    with pytest.raises(Exception, match=rf"IncompatibleSchema.*{topic_name} with schema AVRO"):
        _write(only_id, url, topic=topic_name, avroSchema=json.dumps(clashing))
    assert read_pulsar(url, topic=topic_name).count() == 2  # nothing more was sent


def test_a_struct_write_on_pulsar_lite_reads_back_with_its_schema(
    spark, read_pulsar, pulsar_lite, topic_name
) -> None:
    from pulsar_spark.columnar.values.avro.encode import avro_schema_json

    url = pulsar_lite.service_url
    df = _orders(spark, 6)
    _write(df, url, topic=topic_name)
    # No registry: the bytes read as binary, or typed with the schema the sink derived.
    assert read_pulsar(url, topic=topic_name).schema["value"].dataType == T.BinaryType()
    arrow = pa_struct_of(ORDERS)
    back = read_pulsar(url, topic=topic_name, avroSchema=avro_schema_json(arrow))
    assert sorted(tuple(r) for r in back.select("value.*").collect()) == sorted(
        tuple(r) for r in df.select("value.*").collect()
    )


def pa_struct_of(schema: T.StructType) -> Any:
    from pyspark.sql.pandas.types import to_arrow_type

    return to_arrow_type(schema)
