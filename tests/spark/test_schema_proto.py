"""PROTOBUF_NATIVE topics read by Spark on Apache Pulsar: ``value`` is the message's struct.

Messages of the official Python client's ``ProtobufNativeSchema`` (a class generated
with protoc at test time), read in batch and as a stream; two versions of a message
read in one query by field number; values that do not decode (fail, dead letters);
KEY_VALUE with a PROTOBUF_NATIVE value half."""

from __future__ import annotations

import datetime as dt
import json
import secrets
import struct
from decimal import Decimal

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.schema_info import (
    KeyValueEncoding,
    SchemaInfo,
    SchemaType,
    key_value_schema,
)
from tests.support.official import official_client
from tests.support.proto import ORDER_PROTO, compile_module, message_classes, order_row, orders

EVOLVE = """
syntax = "proto3";
package evolve;
message Order {{ int64 id = 1; string name = 2; {more} }}
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("proto")
    return compile_module(directory, "spark_shop", ORDER_PROTO.format(package="spark_shop"))


def _produce(url: str, topic: str, cls: type, messages: list) -> None:
    from pulsar.schema import ProtobufNativeSchema

    with official_client(url) as client:
        producer = client.create_producer(topic, schema=ProtobufNativeSchema(cls))
        for msg in messages:
            producer.send(msg)
        producer.close()


def _as_read(row: dict) -> dict:
    """An order as Spark gives it: naive UTC timestamps (session time zone UTC), binary as
    bytearray."""
    created = row["created"]
    return {
        **row,
        "created": None if created is None else created.replace(tzinfo=None),
        "blob": bytearray(row["blob"]),
    }


def test_official_messages_read_as_a_struct(read_pulsar, apache_pulsar, topic_name, shop) -> None:
    url = apache_pulsar.service_url
    sent = orders(shop)
    _produce(url, topic_name, shop.Order, sent)
    df = read_pulsar(url, topic=topic_name)
    value = df.schema["value"].dataType
    assert isinstance(value, T.StructType)
    assert value["address"].dataType == T.StructType(
        [T.StructField("city", T.StringType(), False), T.StructField("zip", T.IntegerType(), False)]
    )
    assert value["tags"].dataType == T.ArrayType(T.StringType(), False)
    assert value["attrs"].dataType == T.MapType(T.StringType(), T.LongType(), False)
    assert value["created"].dataType == T.TimestampType()
    assert value["big"].dataType == T.DecimalType(20, 0)
    assert value["status"].dataType == T.StringType()
    rows = df.orderBy("messageId").select("value.*", "schemaVersion").collect()
    got = [r.asDict(recursive=True) for r in rows]
    assert [g.pop("schemaVersion") for g in got] == [0] * len(sent)
    assert got == [_as_read(order_row(m)) for m in sent]
    assert got[0]["big"] == Decimal(2**64 - 1)
    assert got[0]["created"] == dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    assert got[2]["status"] == "7"
    # Nested fields select like any struct's.
    names = df.where(F.col("value.address.city") == "Paris").select("value.name").collect()
    assert [r.name for r in names] == ["tea"]


def test_a_stream_reads_the_struct(spark, apache_pulsar, topic_name, shop, tmp_path) -> None:
    url = apache_pulsar.service_url
    sent = orders(shop)
    _produce(url, topic_name, shop.Order, sent)
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic_name)
        .option("startingOffsets", "earliest")
        .load()
    )
    assert stream.schema["value"].dataType["stops"].dataType.elementType.names == ["city", "zip"]
    table = f"proto_{secrets.token_hex(4)}"
    query = (
        stream.select("value.id", "value.card", F.size("value.stops").alias("stops"))
        .writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None
    rows = sorted(tuple(r) for r in spark.table(table).collect())
    assert rows == [(0, None, 0), (1, "visa", 2), (2, None, 0), (4, None, 0)]


def test_two_versions_read_by_field_number(read_pulsar, apache_pulsar, topic_name, tmp_path):
    url = apache_pulsar.service_url
    (v1,) = message_classes(tmp_path, "evolve1", EVOLVE.format(more=""), "evolve.Order")
    more = "int32 qty = 3; repeated string notes = 4;"
    (v2,) = message_classes(tmp_path, "evolve2", EVOLVE.format(more=more), "evolve.Order")
    _produce(url, topic_name, v1, [v1(id=1, name="old")])
    _produce(url, topic_name, v2, [v2(id=2, name="new", qty=5, notes=["n"])])
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["value"].dataType.names == ["id", "name", "qty", "notes"]
    rows = sorted(tuple(r) for r in df.select("value.*", "schemaVersion").collect())
    # v1's message: no qty or notes, their defaults (protobuf's rule, by number).
    assert rows == [(1, "old", 0, [], 0), (2, "new", 5, ["n"], 1)]


def test_values_that_do_not_decode(read_pulsar, apache_pulsar, topic_name, shop) -> None:
    url = apache_pulsar.service_url
    _produce(url, topic_name, shop.Order, [shop.Order(id=1)])
    with PulsarClient(url) as client:
        info = client.latest_schema(topic_name).info
        with client.create_producer(topic_name, schema=info) as producer:
            producer.send(b"\x12\x05ab")  # name: 5 bytes announced, 2 there
            producer.send(shop.Order(id=3).SerializeToString())
    dead = read_pulsar(url, topic=topic_name, decodeErrorMode="deadLetter")
    rows = dead.orderBy("messageId").select("value.id", "decodeError").collect()
    assert [r.id for r in rows] == [1, None, 3]
    assert rows[0].decodeError is None and rows[2].decodeError is None
    assert rows[1].decodeError.startswith("field name: ")
    with pytest.raises(Exception, match=r"message \S+ \(schema version 0\)") as failed:
        read_pulsar(url, topic=topic_name).select("value.id").collect()
    assert "field name" in str(failed.value)


def test_key_value_with_a_protobuf_value(read_pulsar, apache_pulsar, topic_name, shop) -> None:
    from pulsar.schema.schema_protobuf import _build_schema_definition

    url = apache_pulsar.service_url
    definition = json.dumps(_build_schema_definition(shop.Order.DESCRIPTOR))
    value = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "Order", definition.encode())
    info = key_value_schema(SchemaInfo.primitive(SchemaType.STRING), value, KeyValueEncoding.INLINE)
    with PulsarClient(url) as client, client.create_producer(topic_name, schema=info) as producer:
        for key, msg in (("a", shop.Order(id=1, tags=["t"])), ("b", shop.Order(id=2))):
            body = msg.SerializeToString()
            producer.send(struct.pack(">i", 1) + key.encode() + struct.pack(">i", len(body)) + body)
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["key"].dataType == T.StringType()
    rows = sorted(tuple(r) for r in df.select("key", "value.id", "value.tags").collect())
    assert rows == [("a", 1, ["t"]), ("b", 2, [])]
