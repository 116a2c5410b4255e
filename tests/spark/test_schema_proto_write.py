"""Spark writes into PROTOBUF_NATIVE topics: encoded with the topic's schema (the official
Python client's ``ProtobufNativeSchema`` of a protoc-generated class, Java's DynamicMessage
descriptor) or with the ``protobufSchema`` option's (registered), read by the official Python
consumer and by a Java ``AUTO_CONSUME`` consumer; a DataFrame that does not fit fails before
anything is sent, naming the fields; on pulsar-lite the option writes and reads alike."""

from __future__ import annotations

import base64
import json

import pytest
from google.protobuf import descriptor_pb2
from google.protobuf.json_format import MessageToDict
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.java_client import java_consume_many, java_produce_protobuf_native
from tests.support.official import official_client
from tests.support.proto import ORDER_PROTO, compile_module, orders, produce_native


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("proto_write")
    return compile_module(directory, "write_shop", ORDER_PROTO.format(package="write_shop"))


def _consume(url: str, topic: str, cls: type, n: int) -> list:
    from pulsar import InitialPosition
    from pulsar.schema import ProtobufNativeSchema

    with official_client(url) as client:
        consumer = client.subscribe(
            topic,
            "check",
            schema=ProtobufNativeSchema(cls),
            initial_position=InitialPosition.Earliest,
        )
        got = [consumer.receive(10_000).value() for _ in range(n)]
        consumer.close()
    return got


def _write(df, url: str, topic: str, **options: str) -> None:
    writer = df.write.format("pulsar").option("service.url", url).option("topic", topic)
    writer.options(**options).mode("append").save()


def _option(shop) -> str:
    """``protobufSchema`` in its short form: the root file alone (no imports)."""
    files = descriptor_pb2.FileDescriptorSet()
    shop.DESCRIPTOR.CopyToProto(files.file.add())
    return "write_shop.Order:" + base64.b64encode(files.SerializeToString()).decode()


def test_python_consumers_read_what_spark_wrote(read_pulsar, apache_pulsar, topic_name, shop):
    """Every kind (nested, repeated, map, enum with an undeclared number, oneof, Timestamp,
    wrapper set to 0, uint64 max, bytes) read by Spark from one topic, written by Spark into
    another topic of the same schema, read by the official consumer: the same messages, under
    the topic's own schema version."""
    url = apache_pulsar.service_url
    sent = orders(shop)
    source, target = topic_name, topic_name + "-copy"
    produce_native(url, source, shop.Order, sent)
    produce_native(url, target, shop.Order, [])  # the topic and its schema, no messages
    values = read_pulsar(url, topic=source).orderBy("messageId").select("value")
    _write(values.coalesce(1), url, target)
    assert _consume(url, target, shop.Order, len(sent)) == sent
    with PulsarClient(url) as client:
        found = client.latest_schema(target)
    assert found is not None and found.version == 0  # the topic's schema, not a new one


def test_java_consumers_read_what_spark_wrote(spark, read_pulsar, apache_pulsar, topic_name, shop):
    """Into a topic whose schema a Java producer registered (a DynamicMessage descriptor
    built in Java), and into a new topic under the ``protobufSchema`` option's schema (which
    Spark registers, its google/protobuf imports added): Java's AUTO_CONSUME decodes every
    message with the topic's descriptors."""
    url = apache_pulsar.service_url
    java_topic, option_topic = topic_name, topic_name + "-option"
    java_produce_protobuf_native(url, java_topic, [{"id": "1", "name": "java"}])
    value_type = read_pulsar(url, topic=java_topic).schema["value"].dataType
    rows = [
        {
            "id": -(2**63), "name": "é", "score": -0.0, "tags": [3, -1], "item": {"sku": "s",
            "qty": 0}, "status": "DONE", "ok": True, "blob": b"\x00", "at": None,
        },
        {
            "id": 0, "name": "", "score": 0.0, "tags": [], "item": None, "status": "NEW",
            "ok": False, "blob": b"", "at": None,
        },
    ]  # fmt: skip
    schema = T.StructType([T.StructField("value", value_type)])
    _write(spark.createDataFrame([(r,) for r in rows], schema).coalesce(1), url, java_topic)
    sent = orders(shop)
    produce_native(url, topic_name + "-source", shop.Order, sent)
    values = read_pulsar(url, topic=topic_name + "-source").orderBy("messageId").select("value")
    _write(values.coalesce(1), url, option_topic, protobufSchema=_option(shop))
    with PulsarClient(url) as client:
        registered = client.latest_schema(option_topic)
    assert registered is not None and registered.info.type is SchemaType.PROTOBUF_NATIVE
    assert json.loads(registered.info.data)["rootFileDescriptorName"] == "write_shop.proto"
    got = java_consume_many(
        url, {java_topic: ("PROTOBUF_NATIVE", 3), option_topic: ("PROTOBUF_NATIVE", len(sent))}
    )
    java_values = [r["value"] for r in got[java_topic]]
    assert java_values == [
        {"id": "1", "name": "java"},
        {"id": str(-(2**63)), "name": "é", "score": -0.0, "tags": [3, -1],
         "item": {"sku": "s"}, "status": "DONE", "ok": True, "blob": "AA=="},
        {},  # every field at its default: nothing written, as protobuf writes it
    ]  # fmt: skip
    assert [r["schemaVersion"] for r in got[java_topic]] == [0, 0, 0]
    want = [MessageToDict(m, preserving_proto_field_name=True) for m in sent]
    assert [r["value"] for r in got[option_topic]] == want


def test_a_dataframe_that_does_not_fit_fails_before_sending(
    spark, read_pulsar, apache_pulsar, topic_name, shop
):
    url = apache_pulsar.service_url
    produce_native(url, topic_name, shop.Order, [])
    value = T.StructType(
        [
            T.StructField("id", T.StringType()),
            T.StructField("name", T.StringType()),
            T.StructField("colour", T.StringType()),
        ]
    )
    df = spark.createDataFrame(
        [(("1", "tea", "red"),)], T.StructType([T.StructField("value", value)])
    )
    with pytest.raises(Exception, match="PROTOBUF_NATIVE") as failed:
        _write(df, url, topic_name)
    text = str(failed.value)
    assert topic_name in text
    assert "id: a column of type" in text and "does not fit int64" in text
    assert "colour: not a field of write_shop.Order" in text
    # A value the message cannot hold (a null where proto3 has no presence) fails the write
    # too, and nothing reaches the topic.
    nulls = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType())])
    rows = spark.createDataFrame([((1, None),)], T.StructType([T.StructField("value", nulls)]))
    with pytest.raises(Exception, match="name") as failed:
        _write(rows, url, topic_name)
    assert "no presence" in str(failed.value)
    assert read_pulsar(url, topic=topic_name).count() == 0


def test_protobuf_schema_writes_and_reads_on_pulsar_lite(
    spark, read_pulsar, pulsar_lite, topic_name, shop
):
    """pulsar-lite has no registry: the option's message encodes the writes and decodes the
    reads; the bytes are protobuf's own."""
    url = pulsar_lite.service_url
    sent = orders(shop)
    with PulsarClient(url) as client, client.create_producer(topic_name + "-src") as producer:
        for msg in sent:
            producer.send(msg.SerializeToString())
    option = _option(shop)
    source = read_pulsar(url, topic=topic_name + "-src", protobufSchema=option)
    values = source.orderBy("messageId").select("value")
    _write(values.coalesce(1), url, topic_name, protobufSchema=option)
    raw = read_pulsar(url, topic=topic_name, schemaMode="raw").orderBy("messageId")
    assert [shop.Order.FromString(bytes(r.value)) for r in raw.select("value").collect()] == sent
    back = read_pulsar(url, topic=topic_name, protobufSchema=option).orderBy("messageId")
    assert back.select("value").collect() == values.collect()


def test_write_plans_name_records_and_take_the_protobuf_option(shop) -> None:
    """No broker: under keyValueEncoding, recordName/recordNamespace name the value's
    record (the key's is ``key``); protobufSchema plans a PROTOBUF_NATIVE write whose
    schema is complete for registration, and refuses a DataFrame that does not fit."""
    import pyarrow as pa

    from pulsar_spark.protocol.schemas.info import split_key_value
    from pulsar_spark.spark.errors import PulsarWriteError
    from pulsar_spark.spark.options.parse import parse_options
    from pulsar_spark.spark.write_schema import plan_write

    topic = "persistent://public/default/plans"
    record = pa.struct([("id", pa.int64()), ("name", pa.string())])

    def options(**extra: str):
        return parse_options({"service.url": "pulsar://127.0.0.1:1", "topic": topic, **extra})

    named = plan_write(
        topic,
        record,
        record,
        options(keyValueEncoding="separated", recordName="Order", recordNamespace="com.x"),
        None,
    )
    assert named.schema is not None and named.key_value
    halves = split_key_value(named.schema)
    names = [json.loads(h.data)["name"] for h in (halves.key, halves.value)]
    assert names == ["key", "Order"]
    assert json.loads(halves.value.data)["namespace"] == "com.x"
    default = plan_write(topic, record, record, options(keyValueEncoding="inline"), None)
    assert default.schema is not None
    halves = split_key_value(default.schema)
    assert [json.loads(h.data)["name"] for h in (halves.key, halves.value)] == ["key", "value"]
    plan = plan_write(topic, record, None, options(protobufSchema=_option(shop)), None)
    assert plan.schema is not None and plan.schema.type is SchemaType.PROTOBUF_NATIVE
    data = json.loads(plan.schema.data)
    assert data["rootFileDescriptorName"] == "write_shop.proto"
    files = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(data["fileDescriptorSet"]))
    assert "google/protobuf/timestamp.proto" in {f.name for f in files.file}
    wrong = pa.struct([("id", pa.string())])
    with pytest.raises(PulsarWriteError, match="protobufSchema option") as failed:
        plan_write(topic, wrong, None, options(protobufSchema=_option(shop)), None)
    assert "id: a column of type string does not fit int64" in str(failed.value)


def test_key_value_topics_with_a_protobuf_value_half(
    spark, read_pulsar, apache_pulsar, topic_name, shop
) -> None:
    """A KEY_VALUE topic (STRING key, PROTOBUF_NATIVE value, SEPARATED) takes a ``key``
    and a struct ``value``; Java's AUTO_CONSUME reads both halves, Spark reads them back."""
    from pulsar.schema.schema_protobuf import _build_schema_definition

    from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, key_value_schema

    url = apache_pulsar.service_url
    definition = json.dumps(_build_schema_definition(shop.Order.DESCRIPTOR))
    half = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "Order", definition.encode())
    info = key_value_schema(
        SchemaInfo.primitive(SchemaType.STRING), half, KeyValueEncoding.SEPARATED
    )
    with PulsarClient(url) as client:
        client.create_producer(topic_name, schema=info).close()
    sent = orders(shop)
    produce_native(url, topic_name + "-src", shop.Order, sent)
    source = read_pulsar(url, topic=topic_name + "-src").orderBy("messageId")
    pairs = source.selectExpr("cast(value.id as string) as key", "value")
    _write(pairs.coalesce(1), url, topic_name)
    (got,) = java_consume_many(url, {topic_name: ("AUTO_CONSUME", len(sent))}).values()
    want = [MessageToDict(m, preserving_proto_field_name=True) for m in sent]
    assert [r["value"] for r in got] == [
        {"key": str(m.id), "value": w} for m, w in zip(sent, want, strict=True)
    ]
    back = read_pulsar(url, topic=topic_name).orderBy("messageId").select("key", "value")
    assert back.collect() == pairs.collect()
