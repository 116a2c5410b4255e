"""Typed reads on Apache Pulsar: the topic's registered schema decides the DataFrame's types.

Topics written by the official Python client (AvroSchema, JsonSchema, StringSchema), by
our producer (a primitive schema) and by the Java CLI (KEY_VALUE, INLINE and SEPARATED);
schema evolution read in one query; several topics with different schemas; a stream that
meets a version it cannot resolve, and one planned before its topic had a schema; schemas
given by the user (``jsonSchema`` over JSON bytes without a registered schema, ``avroSchema``
over a topic of two registered versions)."""

from __future__ import annotations

import json
import secrets
import struct
from typing import Any

import pytest
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType
from pulsar_spark.spark import SPARK_SCHEMA
from tests.support.apache_dist import java_produce_key_value
from tests.support.official import official_client, produce

V1 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "old", "type": "string", "default": "gone"},
    ],
}
#: V1 with ``old`` removed and ``qty`` added, both with defaults: FULL-compatible.
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "qty", "type": "int", "default": 1},
    ],
}
#: ``id`` as a string: no reader of V1 can resolve it.
CLASHING = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}


def _record_class() -> Any:
    from pulsar.schema import Integer, Record, String

    class Order(Record):
        id = Integer()
        note = String()

    return Order


def _send(url: str, topic: str, schema: Any, values: list[Any]) -> None:
    with official_client(url) as client:
        producer = client.create_producer(topic, schema=schema)
        for value in values:
            producer.send(value)
        producer.close()


def test_official_python_records_read_as_typed_columns(read_pulsar, apache_pulsar, topic_name):
    from pulsar.schema import AvroSchema, JsonSchema, StringSchema

    url = apache_pulsar.service_url
    order = _record_class()
    orders = [order(id=i, note=None if i == 2 else f"n{i}") for i in range(4)]
    _send(url, f"{topic_name}-avro", AvroSchema(order), orders)
    _send(url, f"{topic_name}-json", JsonSchema(order), orders)
    _send(url, f"{topic_name}-string", StringSchema(), ["a", "bé", ""])
    expected = [(i, None if i == 2 else f"n{i}") for i in range(4)]
    for kind in ("avro", "json"):
        df = read_pulsar(url, topic=f"{topic_name}-{kind}")
        value = df.schema["value"].dataType
        assert isinstance(value, T.StructType), kind
        assert value["id"].dataType == T.IntegerType()
        assert value["note"].dataType == T.StringType()
        assert sorted(tuple(r) for r in df.select("value.id", "value.note").collect()) == expected
        assert {r.schemaVersion for r in df.select("schemaVersion").collect()} == {0}
    df = read_pulsar(url, topic=f"{topic_name}-string")
    assert df.schema["value"].dataType == T.StringType()
    assert sorted(r.value for r in df.select("value").collect()) == ["", "a", "bé"]
    # Raw mode reads the same topic as bytes, with its schema version.
    raw = read_pulsar(url, topic=f"{topic_name}-avro", schemaMode="raw")
    assert raw.schema == SPARK_SCHEMA
    assert {r.schemaVersion for r in raw.select("schemaVersion").collect()} == {0}


def test_primitive_schemas_of_our_producer(read_pulsar, apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    cases = {
        SchemaType.INT64: ([struct.pack(">q", n) for n in (7, -3)], T.LongType(), [-3, 7]),
        SchemaType.DOUBLE: ([struct.pack(">d", 2.5)], T.DoubleType(), [2.5]),
        SchemaType.BOOLEAN: ([b"\x01", b"\x00"], T.BooleanType(), [False, True]),
    }
    with PulsarClient(url) as client:
        for kind, (payloads, _, _) in cases.items():
            topic = f"{topic_name}-{kind.name.lower()}"
            with client.create_producer(topic, schema=SchemaInfo.primitive(kind)) as producer:
                for payload in payloads:
                    producer.send(payload)
    for kind, (_, spark_type, values) in cases.items():
        df = read_pulsar(url, topic=f"{topic_name}-{kind.name.lower()}")
        assert df.schema["value"].dataType == spark_type
        assert sorted(r.value for r in df.select("value").collect()) == values


def test_evolution_reads_every_version_in_the_latest_shape(
    read_pulsar, apache_pulsar, topic_name
) -> None:
    from pulsar.schema import AvroSchema

    url = apache_pulsar.service_url
    _send(url, topic_name, AvroSchema(None, schema_definition=V1), [{"id": 1, "old": "x"}])
    _send(url, topic_name, AvroSchema(None, schema_definition=V2), [{"id": 2, "qty": 5}])
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["value"].dataType.names == ["id", "note", "qty"]
    rows = sorted(df.select("value.*", "schemaVersion").collect())
    # v1's message: no qty (its default, 1), its old field dropped.
    assert [tuple(r) for r in rows] == [(1, None, 1, 0), (2, None, 5, 1)]


def test_topics_with_different_schemas_are_named(spark, read_pulsar, apache_pulsar, topic_name):
    from pulsar.schema import AvroSchema, StringSchema

    url = apache_pulsar.service_url
    first, second = f"{topic_name}-a", f"{topic_name}-b"
    _send(url, first, AvroSchema(None, schema_definition=V1), [{"id": 1}])
    _send(url, second, StringSchema(), ["text"])
    with pytest.raises(Exception, match=r"different schemas") as failed:
        read_pulsar(url, topics=f"{first},{second}")
    text = str(failed.value)
    assert f"{first}: AVRO (version 0)" in text
    assert f"{second}: STRING (version 0)" in text
    assert "schemaMode=raw" in text
    both = read_pulsar(url, topics=f"{first},{second}", schemaMode="raw")
    assert both.count() == 2


@pytest.mark.parametrize("encoding", ["inline", "separated"])
def test_key_value_topics_of_the_java_client(
    read_pulsar, apache_pulsar, topic_name, encoding: str
) -> None:
    java_produce_key_value(apache_pulsar.service_url, topic_name, encoding)
    df = read_pulsar(apache_pulsar.service_url, topic=topic_name)
    assert df.schema["key"].dataType == T.StringType()
    assert df.schema["value"].dataType == T.StructType([T.StructField("n", T.IntegerType(), False)])
    rows = df.select("key", "value.n").collect()
    assert [tuple(r) for r in rows] == [("the-key", 5)]


def test_a_stream_fails_on_a_version_it_cannot_resolve(spark, apache_pulsar, tmp_path) -> None:
    # A namespace of its own that accepts any new schema (FULL, the default, would refuse
    # the clashing one).
    namespace = f"public/evolve-{secrets.token_hex(4)}"
    admin = apache_pulsar.admin
    admin.create_namespace(namespace)
    admin.request("PUT", f"namespaces/{namespace}/schemaCompatibilityStrategy", "ALWAYS_COMPATIBLE")
    topic = f"persistent://{namespace}/orders"
    url = apache_pulsar.service_url
    from pulsar.schema import AvroSchema

    _send(url, topic, AvroSchema(None, schema_definition=V1), [{"id": 1}])
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    assert stream.schema["value"].dataType.names == ["id", "note", "old"]
    _send(url, topic, AvroSchema(None, schema_definition=CLASHING), [{"id": "x"}])
    query = (
        stream.select("value.id")
        .writeStream.format("memory")
        .queryName(f"evolve_{secrets.token_hex(4)}")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"schema version 1") as failed:
        query.awaitTermination(120)
    text = str(failed.value)
    assert "cannot be read as the query's schema" in text
    assert "field id: long in the query's schema, string in the messages" in text
    assert "Restart the query" in text


def test_a_stream_planned_before_its_topic_had_a_schema_fails_when_it_gains_one(
    spark, read_pulsar, apache_pulsar, topic_name, tmp_path
) -> None:
    """Values planned as bytes cannot become typed mid-query: the micro-batch that meets
    the new schema's messages fails, naming the type, and writes nothing; raw mode reads
    on."""
    from pulsar.schema import AvroSchema

    url = apache_pulsar.service_url
    produce(url, topic_name, [b"plain-1", b"plain-2"])
    options = {"service.url": url, "topic": topic_name, "startingOffsets": "earliest"}
    stream = spark.readStream.format("pulsar").options(**options).load()
    assert stream.schema == SPARK_SCHEMA
    batch = read_pulsar(url, topic=topic_name)  # a batch DataFrame planned now, read later
    name = f"gained_{secrets.token_hex(4)}"
    query = (
        stream.select("value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()
        assert sorted(bytes(r.value) for r in spark.table(name).collect()) == [
            b"plain-1",
            b"plain-2",
        ]
        _send(url, topic_name, AvroSchema(None, schema_definition=V1), [{"id": 1}])
        with pytest.raises(Exception, match=r"planned when the topic had no schema") as failed:
            query.processAllAvailable()
            query.awaitTermination(120)  # processAllAvailable raises what failed the query
    finally:
        query.stop()
    text = str(failed.value)
    assert "SchemaChangedError" in text and topic_name in text
    assert "messages now carry schema version 0 (AVRO); the topic's schema is AVRO" in text
    assert "Restart the query" in text and "schemaMode=raw" in text
    assert spark.table(name).count() == 2  # nothing of the failed micro-batch
    with pytest.raises(Exception, match=r"load\(\) the DataFrame again") as failed:
        batch.collect()
    assert "schema version 0 (AVRO)" in str(failed.value)
    # Raw mode reads every message as bytes, the new one with its version.
    raw = read_pulsar(url, topic=topic_name, schemaMode="raw").select("value", "schemaVersion")
    rows = [(bytes(r.value), r.schemaVersion) for r in raw.collect()]
    assert rows[:2] == [(b"plain-1", None), (b"plain-2", None)]
    assert rows[2][1] == 0 and len(rows) == 3


def test_a_json_schema_given_reads_json_bytes_without_a_registered_schema(
    read_pulsar, apache_pulsar, topic_name
) -> None:
    url = apache_pulsar.service_url
    documents = [{"id": 1, "name": "a", "extra": True}, {"id": 2}, {"id": 3, "name": "é"}]
    produce(url, topic_name, [json.dumps(d).encode() for d in documents])
    with PulsarClient(url) as client:
        assert client.latest_schema(topic_name) is None
    df = read_pulsar(url, topic=topic_name, jsonSchema="id BIGINT, name STRING")
    assert df.schema["value"].dataType == T.StructType(
        [T.StructField("id", T.LongType()), T.StructField("name", T.StringType())]
    )
    rows = df.select("value.id", "value.name", "schemaVersion").collect()
    assert sorted(tuple(r) for r in rows) == [(1, "a", None), (2, None, None), (3, "é", None)]
    # Without the option the same topic reads as bytes.
    assert read_pulsar(url, topic=topic_name).schema == SPARK_SCHEMA


def test_an_avro_schema_given_resolves_every_registered_version(
    read_pulsar, apache_pulsar, topic_name
) -> None:
    """Each message is decoded with the writer schema of its own version, resolved into the
    user's: fields the writer lacks take the user's defaults, fields the user lacks go."""
    from pulsar.schema import AvroSchema

    url = apache_pulsar.service_url
    v1 = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
    v2 = {**v1, "fields": [*v1["fields"], {"name": "qty", "type": "int", "default": 1}]}
    _send(url, topic_name, AvroSchema(None, schema_definition=v1), [{"id": 1, "note": "a"}])
    _send(url, topic_name, AvroSchema(None, schema_definition=v2), [{"id": 2, "qty": 5}])
    with PulsarClient(url) as client:
        latest = client.latest_schema(topic_name)
    assert latest is not None and latest.version == 1
    users = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "qty", "type": "long", "default": 9},  # int promoted to long
            {"name": "tag", "type": "string", "default": "t"},
        ],
    }
    df = read_pulsar(url, topic=topic_name, avroSchema=json.dumps(users))
    assert df.schema["value"].dataType.names == ["id", "qty", "tag"]
    rows = sorted(tuple(r) for r in df.select("value.*", "schemaVersion").collect())
    # v1's message: no qty (the user's default 9); v2's: its own; tag: the user's default.
    assert rows == [(1, 9, "t", 0), (2, 5, "t", 1)]
