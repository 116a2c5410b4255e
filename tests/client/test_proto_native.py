"""PROTOBUF_NATIVE through our client on Apache Pulsar: messages of the official Python
client's ``ProtobufNativeSchema`` (a class generated with protoc at test time), their
schema from the registry, their values decoded columnar, compared field by field."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar.values.arrow_types import arrow_type
from pulsar_spark.columnar.values.errors import UnmappableSchema
from pulsar_spark.columnar.values.proto.decode import proto_plan
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.official import official_client
from tests.support.proto import ORDER_PROTO, compile_module, order_row, orders


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("proto")
    return compile_module(directory, "client_shop", ORDER_PROTO.format(package="client_shop"))


def _normalized(row: dict) -> dict:
    return {**row, "attrs": dict(row["attrs"])}


def test_official_protobuf_native_messages_read_field_by_field(
    apache_pulsar, topic_name, shop
) -> None:
    from pulsar.schema import ProtobufNativeSchema

    sent = orders(shop)
    with official_client(apache_pulsar.service_url) as official:
        producer = official.create_producer(topic_name, schema=ProtobufNativeSchema(shop.Order))
        for msg in sent:
            producer.send(msg)
        producer.close()
    with PulsarClient(apache_pulsar.service_url) as client:
        latest = client.latest_schema(topic_name)
        assert latest is not None and latest.version == 0
        info = latest.info
        assert info.type is SchemaType.PROTOBUF_NATIVE
        data = json.loads(info.data)
        assert data["rootMessageTypeName"] == "client_shop.Order"
        assert data["rootFileDescriptorName"] == "client_shop.proto"
        plan = proto_plan(info, topic=topic_name)
        assert arrow_type(info) == plan.type
        batches = list(client.read_batches(topic_name, schema=info))
    values = pa.concat_arrays([b.column("value") for b in batches])
    versions = pa.concat_arrays([b.column("schemaVersion") for b in batches]).to_pylist()
    assert versions == [0] * len(sent)
    got = [_normalized(row) for row in plan.decode(values).to_pylist()]
    assert got == [order_row(msg) for msg in sent]
    # The types, as promised by the mapping.
    t = plan.type
    assert t["id"].type == pa.int64() and not t["id"].nullable
    address = [pa.field("city", pa.string(), False), pa.field("zip", pa.int32(), False)]
    assert t["address"].type == pa.struct(address)
    assert t["address"].nullable
    assert t["attrs"].type == pa.map_(pa.string(), pa.field("value", pa.int64(), False))
    assert t["created"].type == pa.timestamp("us", tz="UTC")
    assert t["discount"].type == pa.int64() and t["discount"].nullable
    assert t["big"].type == pa.decimal128(20, 0)
    assert t["status"].type == pa.string()
    assert t["card"].nullable and t["account"].nullable


def test_a_schema_without_arrow_type_names_field_and_topic(tmp_path) -> None:
    """A recursive message (the broker stores it; reading it typed is refused)."""
    from tests.support.proto import message_classes

    text = 'syntax = "proto3"; package rec; message Node { int32 v = 1; Node next = 2; }'
    (node,) = message_classes(tmp_path, "rec", text, "rec.Node")
    from pulsar.schema.schema_protobuf import _build_schema_definition

    data = json.dumps(_build_schema_definition(node.DESCRIPTOR)).encode()
    info = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "rec", data)
    with pytest.raises(UnmappableSchema, match=r"topic t1, field next: message rec.Node"):
        arrow_type(info, topic="t1")
