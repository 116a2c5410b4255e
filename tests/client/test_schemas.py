"""The schema registry through our client: GET_SCHEMA, GET_OR_CREATE_SCHEMA, producers and
readers with a schema, against Apache Pulsar 4.0 (the official Python client and the Java
CLI on the other side), and pulsar-lite, which has no registry."""

from __future__ import annotations

import io
import time
from typing import Any

import fastavro
import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.net.capabilities import BrokerKind
from pulsar_spark.client.net.connection import Connection
from pulsar_spark.client.retry import Action, classify
from pulsar_spark.protocol import pb
from pulsar_spark.protocol.errors import IncompatibleSchemaError, TopicNotFoundError
from pulsar_spark.protocol.schemas.info import (
    KeyValueEncoding,
    SchemaInfo,
    key_value_schema,
    split_key_value,
)
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.apache_dist import KV_VALUE, java_produce_key_value
from tests.support.official import official_client

T = pb.BaseCommand

V1 = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"]}],
}
V2 = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "qty", "type": "int", "default": 1},
    ],
}
#: ``id`` as a string: neither old nor new readers can resolve it (FULL refuses it).
CLASHING = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "string"}]}


def _avro(definition: dict[str, Any], record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(definition), record)
    return out.getvalue()


def _records() -> Any:
    """Record classes of the official client (imported when a test needs them)."""
    from pulsar.schema import Integer, Record, String

    class Order(Record):
        id = Integer()
        note = String()

    return Order


@pytest.fixture
def count_schema_requests(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """GET_SCHEMA requests our connections send, counted."""
    sent: list[int] = []
    request = Connection.request

    def counting(self: Connection, command: pb.BaseCommand, **kwargs: Any) -> Any:
        if command.type == T.GET_SCHEMA:
            sent.append(command.getSchema.request_id)
        return request(self, command, **kwargs)

    monkeypatch.setattr(Connection, "request", counting)
    return sent


# ---------------------------------------------------------------------------
# Reading schemas the official client registered
# ---------------------------------------------------------------------------


def test_schemas_of_official_python_producers_read_as_it_reads_them(
    apache_pulsar, topic_name
) -> None:
    from pulsar.schema import AvroSchema, BytesSchema, JsonSchema, StringSchema

    order = _records()
    cases = {
        "avro": (AvroSchema(order), order(id=1, note="a"), SchemaType.AVRO),
        "json": (JsonSchema(order), order(id=2, note="b"), SchemaType.JSON),
        "string": (StringSchema(), "text", SchemaType.STRING),
    }
    with official_client(apache_pulsar.service_url) as official:
        topics = {}
        for name, (schema, value, _) in [*cases.items(), ("bytes", (BytesSchema(), b"x", None))]:
            topics[name] = f"{topic_name}-{name}"
            producer = official.create_producer(topics[name], schema=schema)
            producer.send(value)
            producer.close()
        with PulsarClient(apache_pulsar.service_url) as client:
            for name, (_, _, kind) in cases.items():
                theirs = official._client.get_schema_info(topics[name], -1)
                ours = client.latest_schema(topics[name])
                assert ours is not None, name
                assert ours.version == 0
                assert ours.info.type is kind is SchemaType[theirs.schema_type().name]
                # The broker names a schema after its topic (the C++ client drops it).
                assert ours.info.name == topics[name].removeprefix("persistent://")
                assert ours.info.data == theirs.schema().encode()
                assert client.get_schema(topics[name], 0) == ours.info
            # The Python client's BytesSchema registers nothing: no schema, as it sees it.
            assert client.get_schema(topics["bytes"]) is None
            caps = client._lookup.pool.service().capabilities
            assert caps.kind is BrokerKind.PULSAR
            assert caps.server_version.startswith("Pulsar Server")
            assert caps.schema_registry and caps.get_or_create_schema


def test_a_partitioned_topic_has_one_schema_for_every_partition(apache_pulsar, topic_name) -> None:
    apache_pulsar.admin.create_partitioned_topic(topic_name, 3)
    with PulsarClient(apache_pulsar.service_url) as client:
        with client.create_producer(topic_name, schema=SchemaInfo.avro(V1)) as producer:
            assert producer.schema_version == 0
            producer.send(_avro(V1, {"id": 1, "note": None}))
        base = client.get_schema(topic_name)
        assert base is not None
        assert base.type is SchemaType.AVRO
        assert client.get_schema(f"{topic_name}-partition-2") == base


def test_versions_count_from_zero_and_each_is_asked_once(
    apache_pulsar, topic_name, count_schema_requests
) -> None:
    with PulsarClient(apache_pulsar.service_url) as client:
        with client.create_producer(topic_name, schema=SchemaInfo.avro(V1)) as first:
            assert first.schema_version == 0
        with client.create_producer(topic_name, schema=SchemaInfo.avro(V2)) as second:
            assert second.schema_version == 1
        with client.create_producer(topic_name, schema=SchemaInfo.avro(V1)) as again:
            assert again.schema_version == 0  # an existing schema keeps its version
        latest = client.latest_schema(topic_name)
        assert latest is not None
        assert latest.version == 1
        assert fastavro.parse_schema(_json(latest.info.data)) == fastavro.parse_schema(V2)
        v0 = client.get_schema(topic_name, 0)
        assert v0 is not None
        assert _json(v0.data) == V1
        assert client.get_schema(topic_name, 2) is None
        asked = len(count_schema_requests)
        assert client.get_schema(topic_name, 0) == v0
        assert client.get_schema(topic_name, 1) == latest.info  # cached by the latest
        assert len(count_schema_requests) == asked
        assert client.latest_schema(topic_name) == latest  # the latest is always asked
        assert len(count_schema_requests) == asked + 1


def _json(data: bytes) -> Any:
    import json

    return json.loads(data)


def test_topics_without_a_schema_have_none(apache_pulsar, topic_name) -> None:
    with PulsarClient(apache_pulsar.service_url) as client:
        assert client.get_schema(topic_name) is None  # no such topic
        with client.create_producer(topic_name) as producer:
            assert producer.schema_version is None
            producer.send(b"raw")
        assert client.get_schema(topic_name) is None
        with client.create_producer(
            topic_name, schema=SchemaInfo.primitive(SchemaType.BYTES)
        ) as producer:
            assert producer.schema_version is None  # BYTES is not sent
        assert client.get_schema(topic_name) is None


# ---------------------------------------------------------------------------
# Writing with a schema
# ---------------------------------------------------------------------------


def test_our_avro_producer_is_read_by_the_official_avro_consumer(
    apache_pulsar, topic_name, caplog
) -> None:
    from pulsar.schema import AvroSchema

    order = _records()
    definition = order.schema()
    with official_client(apache_pulsar.service_url) as official:
        consumer = official.subscribe(topic_name, "check", schema=AvroSchema(order))
        with PulsarClient(apache_pulsar.service_url) as client:
            with client.create_producer(topic_name, schema=SchemaInfo.avro(definition)) as p:
                assert p.schema_version == 0
                for i in range(3):
                    p.send(_avro(definition, {"id": i, "note": f"n{i}" if i else None}))
            registered = client.get_schema(topic_name)
        got = [consumer.receive(10_000) for _ in range(3)]
        # Decoded with the writer schema the client fetches by the message's version.
        values = [(m.value().id, m.value().note) for m in got]
        consumer.close()
    assert "Failed to decode" not in caplog.text
    assert registered is not None
    assert _json(registered.data) == definition
    assert values == [(0, None), (1, "n1"), (2, "n2")]
    # Every message carries the producer's schema version, as the Java client's do.
    assert {m.schema_version() for m in got} == {"\x00" * 8}


def test_an_incompatible_schema_is_refused_naming_the_topic_and_type(
    apache_pulsar, topic_name
) -> None:
    with PulsarClient(apache_pulsar.service_url) as client:
        with client.create_producer(topic_name, schema=SchemaInfo.avro(V1)) as producer:
            producer.send(_avro(V1, {"id": 7, "note": None}))
        with pytest.raises(IncompatibleSchemaError) as refused:
            client.create_producer(topic_name, schema=SchemaInfo.avro(CLASHING))
        assert f"producer on {topic_name} with schema AVRO:" in str(refused.value)
        assert refused.value.code == pb.IncompatibleSchema
        assert classify(refused.value) is Action.FATAL
        with pytest.raises(IncompatibleSchemaError, match=f"{topic_name} with schema STRING"):
            client.create_producer(topic_name, schema=SchemaInfo.primitive(SchemaType.STRING))
        with pytest.raises(IncompatibleSchemaError, match=f"reader on {topic_name} with schema"):
            list(client.read_batches(topic_name, schema=SchemaInfo.avro(CLASHING)))
        # A reader whose schema the topic's can be read into subscribes and reads.
        rows = [
            r
            for b in client.read_batches(topic_name, schema=SchemaInfo.avro(V1))
            for r in b.to_pylist()
        ]
        assert [r["value"] for r in rows] == [_avro(V1, {"id": 7, "note": None})]
        assert client.latest_schema(topic_name).version == 0  # nothing was registered


def test_get_or_create_schema_registers_once_and_checks_compatibility(
    apache_pulsar, topic_name
) -> None:
    with PulsarClient(apache_pulsar.service_url) as client:
        with pytest.raises(TopicNotFoundError, match=f"schema for {topic_name} with schema AVRO"):
            client.get_or_create_schema(topic_name, SchemaInfo.avro(V1))
        apache_pulsar.admin.create_topic(topic_name)
        assert client.get_or_create_schema(topic_name, SchemaInfo.avro(V1)) == 0
        assert client.get_or_create_schema(topic_name, SchemaInfo.avro(V1)) == 0
        assert client.get_or_create_schema(topic_name, SchemaInfo.avro(V2)) == 1
        with pytest.raises(IncompatibleSchemaError, match=f"{topic_name} with schema AVRO"):
            client.get_or_create_schema(topic_name, SchemaInfo.avro(CLASHING))
        assert client.get_or_create_schema(topic_name, SchemaInfo(SchemaType.BYTES)) is None
        assert client.latest_schema(topic_name).version == 1


# ---------------------------------------------------------------------------
# KEY_VALUE as the Java client writes it
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["inline", "separated"])
def test_key_value_schema_and_messages_of_the_java_client(
    apache_pulsar, topic_name, encoding: str
) -> None:
    java_produce_key_value(apache_pulsar.service_url, topic_name, encoding)
    with PulsarClient(apache_pulsar.service_url) as client:
        found = client.latest_schema(topic_name)
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert found is not None
    info = found.info
    assert info.type is SchemaType.KEY_VALUE
    value_data = KV_VALUE.encode()
    assert info.data == bytes.fromhex("00000000") + len(value_data).to_bytes(4, "big") + value_data
    key, value, kv_encoding = split_key_value(info)
    assert kv_encoding is KeyValueEncoding[encoding.upper()]
    assert key == SchemaInfo.primitive(SchemaType.STRING)
    assert (value.type, value.data, value.properties) == (SchemaType.AVRO, value_data, {})
    # Our layout of the same halves is the Java client's, byte for byte.
    again = key_value_schema(key, value, kv_encoding, name=info.name)
    assert again == info
    avro_five = _avro(_json(value_data), {"n": 5})
    assert len(rows) == 1
    if kv_encoding is KeyValueEncoding.INLINE:
        assert rows[0]["key"] is None
        assert rows[0]["value"] == b"\x00\x00\x00\x07the-key\x00\x00\x00\x01" + avro_five
    else:
        assert rows[0]["key"] == b"the-key"  # base64 in the message, decoded
        assert rows[0]["value"] == avro_five


# ---------------------------------------------------------------------------
# pulsar-lite: no registry
# ---------------------------------------------------------------------------


def test_pulsar_lite_has_no_registry_and_is_not_waited_for(pulsar_lite, topic_name) -> None:
    with PulsarClient(pulsar_lite.service_url, operation_timeout=20) as client:
        with client.create_producer(topic_name, schema=SchemaInfo.avro(V1)) as producer:
            assert producer.schema_version is None  # accepted, no version kept
            producer.send(_avro(V1, {"id": 1, "note": None}))
        started = time.monotonic()
        assert client.get_schema(topic_name) is None
        assert client.get_schema(topic_name, 0) is None
        assert client.latest_schema(topic_name) is None
        assert client.get_or_create_schema(topic_name, SchemaInfo.avro(V1)) is None
        assert time.monotonic() - started < 1.0
        conn = client._lookup.pool.service()
        assert conn.capabilities.kind is BrokerKind.LITE
        assert not conn.capabilities.schema_registry
        rows = [
            r
            for b in client.read_batches(topic_name, schema=SchemaInfo.avro(V1))
            for r in b.to_pylist()
        ]
        assert [r["value"] for r in rows] == [_avro(V1, {"id": 1, "note": None})]
