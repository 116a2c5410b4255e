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
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, key_value_schema
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.proto import (
    ORDER_PROTO,
    compile_module,
    message_classes,
    order_row,
    orders,
    produce_native,
)

EVOLVE = """
syntax = "proto3";
package evolve;
message Order {{ int64 id = 1; string name = 2; {more} }}
"""


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("proto")
    return compile_module(directory, "spark_shop", ORDER_PROTO.format(package="spark_shop"))


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
    produce_native(url, topic_name, shop.Order, sent)
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


def test_a_user_given_protobuf_schema_on_pulsar_lite(read_pulsar, pulsar_lite, topic_name, shop):
    """pulsar-lite has no registry: ``protobufSchema`` (``pkg.Msg:<base64 set>``, the
    well-known imports taken from protobuf's own copies) types the bytes of producers
    that never registered one."""
    import base64

    from google.protobuf import descriptor_pb2

    url = pulsar_lite.service_url
    sent = orders(shop)
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for msg in sent:
            producer.send(msg.SerializeToString())
    files = descriptor_pb2.FileDescriptorSet()
    shop.DESCRIPTOR.CopyToProto(files.file.add())
    option = "spark_shop.Order:" + base64.b64encode(files.SerializeToString()).decode()
    df = read_pulsar(url, topic=topic_name, protobufSchema=option)
    rows = df.orderBy("messageId").select("value.*", "schemaVersion").collect()
    got = [r.asDict(recursive=True) for r in rows]
    assert [g.pop("schemaVersion") for g in got] == [None] * len(sent)
    assert got == [_as_read(order_row(m)) for m in sent]


def test_a_stream_reads_the_struct(spark, apache_pulsar, topic_name, shop, tmp_path) -> None:
    url = apache_pulsar.service_url
    sent = orders(shop)
    produce_native(url, topic_name, shop.Order, sent)
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
    produce_native(url, topic_name, v1, [v1(id=1, name="old")])
    produce_native(url, topic_name, v2, [v2(id=2, name="new", qty=5, notes=["n"])])
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["value"].dataType.names == ["id", "name", "qty", "notes"]
    rows = sorted(tuple(r) for r in df.select("value.*", "schemaVersion").collect())
    # v1's message: no qty or notes, their defaults (protobuf's rule, by number).
    assert rows == [(1, "old", 0, [], 0), (2, "new", 5, ["n"], 1)]


def test_a_stream_fails_on_a_version_that_retypes_a_field(spark, apache_pulsar, tmp_path):
    namespace = f"public/proto-{secrets.token_hex(4)}"
    admin = apache_pulsar.admin
    admin.create_namespace(namespace)
    admin.request("PUT", f"namespaces/{namespace}/schemaCompatibilityStrategy", "ALWAYS_COMPATIBLE")
    topic = f"persistent://{namespace}/orders"
    url = apache_pulsar.service_url
    (v1,) = message_classes(tmp_path, "retype1", EVOLVE.format(more=""), "evolve.Order")
    clash_text = 'syntax = "proto3"; package evolve; message Order { string id = 1; }'
    (clash,) = message_classes(tmp_path, "retype2", clash_text, "evolve.Order")
    produce_native(url, topic, v1, [v1(id=1)])
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
        .load()
    )
    assert stream.schema["value"].dataType.names == ["id", "name"]
    produce_native(url, topic, clash, [clash(id="x")])
    query = (
        stream.select("value.id")
        .writeStream.format("memory")
        .queryName(f"retype_{secrets.token_hex(4)}")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match=r"schema version 1") as failed:
        query.awaitTermination(180)
    text = str(failed.value)
    assert "field id = 1: int64 in the query's schema, string in the messages" in text
    assert "Restart the query" in text


def test_values_that_do_not_decode(read_pulsar, apache_pulsar, topic_name, shop) -> None:
    url = apache_pulsar.service_url
    produce_native(url, topic_name, shop.Order, [shop.Order(id=1)])
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


# -- without a broker: versions, the option, planning with a user schema ----------------


def _info(cls: type) -> SchemaInfo:
    from pulsar.schema.schema_protobuf import _build_schema_definition

    data = json.dumps(_build_schema_definition(cls.DESCRIPTOR)).encode()
    return SchemaInfo(SchemaType.PROTOBUF_NATIVE, "Order", data)


def _batch(values: list[bytes], versions: list[int | None]):
    import pyarrow as pa

    from pulsar_spark.columnar import ROW_SCHEMA

    n = len(values)
    columns = {f.name: pa.nulls(n, f.type) for f in ROW_SCHEMA}
    columns["value"] = pa.array(values, pa.binary())
    columns["messageId"] = pa.array([f"1:{i}:-1:-1" for i in range(n)])
    columns["schemaVersion"] = pa.array(versions, pa.int64())
    return pa.RecordBatch.from_arrays([columns[f.name] for f in ROW_SCHEMA], names=ROW_SCHEMA.names)


def test_a_version_whose_field_changed_type_says_what_changed(tmp_path) -> None:
    from pulsar_spark.spark.errors import SchemaChangedError
    from pulsar_spark.spark.read_schema import ReadSchema, row_schema
    from pulsar_spark.spark.value_decode import ValueDecoder

    (v1,) = message_classes(tmp_path, "units1", EVOLVE.format(more=""), "evolve.Order")
    more = "int32 qty = 3;"
    (v2,) = message_classes(tmp_path, "units2", EVOLVE.format(more=more), "evolve.Order")
    clash_text = 'syntax = "proto3"; package evolve; message Order { string id = 1; }'
    (clash,) = message_classes(tmp_path, "units3", clash_text, "evolve.Order")
    versions = [_info(v1), _info(v2), _info(clash)]
    reader = versions[1]
    arrow = row_schema(reader, dead_letter=False)
    read = ReadSchema(reader, "topic t, schema version 1", 1, False, arrow)
    decode = ValueDecoder(read, "t", lambda v: versions[v], stream=True)
    out = decode(_batch([v1(id=1, name="a").SerializeToString(), b"\x18\x05"], [0, 1]))
    assert out.column("value").to_pylist() == [
        {"id": 1, "name": "a", "qty": 0},
        {"id": 0, "name": "", "qty": 5},
    ]
    with pytest.raises(SchemaChangedError) as failed:
        decode(_batch([clash(id="x").SerializeToString()], [2]))
    text = str(failed.value)
    assert "schema version 2 cannot be read as the query's schema" in text
    assert "field id = 1: int64 in the query's schema, string in the messages" in text
    assert "field qty = 3 removed (read as its default)" in text
    assert "Restart the query" in text


def test_the_protobuf_schema_option_and_planning_with_it(tmp_path) -> None:
    import base64

    from pulsar_spark.spark.errors import PulsarOptionError
    from pulsar_spark.spark.options.parse import parse_options
    from pulsar_spark.spark.options.schema import protobuf_schema
    from pulsar_spark.spark.read_schema import plan_read_schema

    (v2,) = message_classes(tmp_path, "opt", EVOLVE.format(more="int32 qty = 3;"), "evolve.Order")
    data = json.loads(_info(v2).data)
    given = protobuf_schema("protobufSchema", json.dumps(data))
    short = protobuf_schema("protobufSchema", f"evolve.Order:{data['fileDescriptorSet']}")
    assert json.loads(given.data)["rootMessageTypeName"] == "evolve.Order"
    assert json.loads(short.data)["fileDescriptorSet"] == data["fileDescriptorSet"]
    bad = {
        "": "is empty",
        "evolve.Order": "expected",
        '{"rootMessageTypeName": "a.B"}': "has no fileDescriptorSet",
        f"evolve.Nope:{data['fileDescriptorSet']}": "has no message type",
        "a.B:" + base64.b64encode(b"\xff\xff").decode(): "PROTOBUF_NATIVE schema data",
    }
    for text, reason in bad.items():
        with pytest.raises(PulsarOptionError, match=reason) as caught:
            protobuf_schema("protobufSchema", text)
        assert "protobufSchema" in str(caught.value)

    options = parse_options(
        {"service.url": "pulsar://localhost:6650", "topic": "t", "protobufSchema": json.dumps(data)}
    )
    assert options.protobuf_schema == given
    with pytest.raises(PulsarOptionError, match="protobufSchema"):
        parse_options({"service.url": "pulsar://x:6650", "topic": "t", "protobufSchema": "{}"})
    with pytest.raises(PulsarOptionError, match="cannot be combined"):
        parse_options(
            {
                "service.url": "pulsar://x:6650",
                "topic": "t",
                "protobufSchema": json.dumps(data),
                "jsonSchema": "id BIGINT",
            }
        )

    class NoRegistry:
        def latest_schema(self, topic: str) -> None:
            return None

    plan = plan_read_schema(NoRegistry(), options, ["t"])  # type: ignore[arg-type]
    assert plan.user_given and plan.origin == "option protobufSchema"
    assert plan.arrow.field("value").type.names == ["id", "name", "qty"]


def test_protobuf_schemas_with_field_numbers(read_pulsar, apache_pulsar, topic_name, shop) -> None:
    """PROTOBUF (not native): an Avro schema and, in ``__PARSING_INFO__``, the top-level
    field numbers, as the Java client's Schema.PROTOBUF registers them."""
    url = apache_pulsar.service_url
    avro = {
        "type": "record",
        "name": "Order",
        "namespace": "spark_shop",
        "fields": [
            {"name": "id", "type": "long", "default": 0},
            {"name": "name", "type": "string", "default": ""},
            {"name": "tags", "type": {"type": "array", "items": "string"}, "default": []},
        ],
    }
    parsing = [
        {"number": 1, "name": "id", "type": "INT64", "label": "LABEL_OPTIONAL", "definition": None},
        {"number": 2, "name": "name", "type": "STRING", "label": "LABEL_OPTIONAL",
         "definition": None},
        {"number": 4, "name": "tags", "type": "STRING", "label": "LABEL_REPEATED",
         "definition": None},
    ]  # fmt: skip
    info = SchemaInfo(
        SchemaType.PROTOBUF,
        "Order",
        json.dumps(avro).encode(),
        {"__PARSING_INFO__": json.dumps(parsing)},
    )
    with PulsarClient(url) as client, client.create_producer(topic_name, schema=info) as producer:
        for msg in (shop.Order(id=1, name="a", tags=["x"], price=3.0), shop.Order(id=2)):
            producer.send(msg.SerializeToString())  # price (3) is not in the schema: skipped
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["value"].dataType.names == ["id", "name", "tags"]
    rows = sorted(tuple(r) for r in df.select("value.*").collect())
    assert rows == [(1, "a", ["x"]), (2, "", [])]
