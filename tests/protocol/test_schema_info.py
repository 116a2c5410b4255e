"""SchemaInfo on the wire: the proto message, the KEY_VALUE layout (Java's and the C++
client's), version bytes, and the schema field of PRODUCER and SUBSCRIBE."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_spark.protocol import commands, pb
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.schemas.info import (
    KeyValueEncoding,
    SchemaInfo,
    key_value_schema,
    split_key_value,
    version_from_bytes,
    version_to_bytes,
)
from pulsar_spark.protocol.schemas.types import InvalidSchema, SchemaType

T = pb.BaseCommand
#: Types that go on the wire as proto None (client-side only in Java).
WIRE_NONE = {SchemaType.BYTES, SchemaType.AUTO, SchemaType.AUTO_PUBLISH}

properties = st.dictionaries(st.text(max_size=12), st.text(max_size=20), max_size=4)
leaf_types = st.sampled_from([t for t in SchemaType if t is not SchemaType.KEY_VALUE])
leaves = st.builds(SchemaInfo, leaf_types, st.text(max_size=12), st.binary(max_size=64), properties)
encodings = st.sampled_from(KeyValueEncoding)


def _kv(children: st.SearchStrategy[SchemaInfo]) -> st.SearchStrategy[SchemaInfo]:
    return st.builds(key_value_schema, children, children, encodings)


schemas = st.recursive(leaves, _kv, max_leaves=4)


def _wire(info: SchemaInfo) -> SchemaInfo:
    """What a schema reads back as from the wire: Java's client-side types as NONE."""
    return dataclasses.replace(info, type=SchemaType.NONE) if info.type in WIRE_NONE else info


# ---------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------


def test_every_proto_type_has_a_schema_type_and_goes_back_to_its_number() -> None:
    for name, number in pb.Schema.Type.items():
        kind = SchemaType.from_pb(number)
        assert kind.pb_value == number, name
    assert SchemaType.from_pb(pb.Schema.AutoConsume) is SchemaType.AUTO_CONSUME
    assert SchemaType.from_pb(0) is SchemaType.NONE


def test_java_negative_types_go_on_the_wire_as_java_sends_them() -> None:
    assert SchemaType.BYTES.pb_value == 0
    assert SchemaType.AUTO.pb_value == 0
    assert SchemaType.AUTO_PUBLISH.pb_value == 0
    assert SchemaType.AUTO_CONSUME.pb_value == pb.Schema.AutoConsume == 21
    assert [int(t) for t in (SchemaType.BYTES, SchemaType.AUTO_CONSUME)] == [-1, -3]


@pytest.mark.parametrize("number", [-1, 23, 99])
def test_an_unknown_type_number_is_an_error_naming_it(number: int) -> None:
    with pytest.raises(InvalidSchema, match=f"number {number}"):
        SchemaType.from_pb(number)


def test_type_names_parse_as_java_spells_them() -> None:
    assert SchemaType.parse("key_value") is SchemaType.KEY_VALUE
    assert SchemaType.parse(" AVRO ") is SchemaType.AVRO
    with pytest.raises(InvalidSchema, match="'AVRO2'"):
        SchemaType.parse("AVRO2")


def test_type_families() -> None:
    assert SchemaType.INT16.is_primitive and not SchemaType.INT16.is_struct
    assert SchemaType.LOCAL_DATE_TIME.is_primitive
    assert SchemaType.PROTOBUF_NATIVE.is_struct and not SchemaType.PROTOBUF_NATIVE.is_primitive
    assert not SchemaType.KEY_VALUE.is_primitive and not SchemaType.KEY_VALUE.is_struct
    assert SchemaType.BYTES.is_bytes and SchemaType.NONE.is_bytes
    assert not SchemaType.STRING.is_bytes


# ---------------------------------------------------------------------------
# SchemaInfo <-> proto
# ---------------------------------------------------------------------------


@given(schemas)
def test_schema_info_round_trips_through_the_proto(info: SchemaInfo) -> None:
    wire = pb.Schema.FromString(info.to_pb().SerializeToString())
    assert SchemaInfo.from_pb(wire) == _wire(info)


@given(schemas)
def test_schema_info_is_a_hashable_picklable_value(info: SchemaInfo) -> None:
    again = pickle.loads(pickle.dumps(info))
    assert again == info
    assert hash(again) == hash(info)
    assert {info: 1}[again] == 1


def test_properties_are_copied_and_sent_sorted() -> None:
    props = {"b": "2", "a": "1"}
    info = SchemaInfo(SchemaType.AVRO, "r", b"{}", props)
    props["c"] = "3"
    assert info.properties == {"a": "1", "b": "2"}
    assert [(kv.key, kv.value) for kv in info.to_pb().properties] == [("a", "1"), ("b", "2")]


def test_java_style_constructors() -> None:
    assert SchemaInfo.primitive(SchemaType.INT32) == SchemaInfo(SchemaType.INT32, "INT32")
    assert SchemaInfo.primitive(SchemaType.STRING).name == "String"
    with pytest.raises(InvalidSchema, match="AVRO is not a primitive"):
        SchemaInfo.primitive(SchemaType.AVRO)
    definition = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    avro = SchemaInfo.avro(definition)
    assert json.loads(avro.data) == definition
    assert avro.properties == {"__alwaysAllowNull": "true", "__jsr310ConversionEnabled": "false"}
    assert SchemaInfo.json(json.dumps(definition)).type is SchemaType.JSON


# ---------------------------------------------------------------------------
# KEY_VALUE
# ---------------------------------------------------------------------------


def test_key_value_layout_of_two_primitives_is_javas() -> None:
    info = key_value_schema(
        SchemaInfo.primitive(SchemaType.STRING), SchemaInfo.primitive(SchemaType.INT32)
    )
    assert info.type is SchemaType.KEY_VALUE
    assert info.name == "KeyValue"
    assert info.data == bytes.fromhex("00000000 00000000")
    assert info.properties == {
        "key.schema.name": "String",
        "key.schema.type": "STRING",
        "key.schema.properties": "{}",
        "value.schema.name": "INT32",
        "value.schema.type": "INT32",
        "value.schema.properties": "{}",
        "kv.encoding.type": "INLINE",
    }
    assert info.describe() == "KEY_VALUE<STRING, INT32> (INLINE)"


def test_key_value_data_holds_both_halves_with_their_lengths() -> None:
    key = SchemaInfo.primitive(SchemaType.STRING)
    value = SchemaInfo.avro('{"type":"int"}')
    info = key_value_schema(key, value, KeyValueEncoding.SEPARATED)
    assert info.data == bytes.fromhex("00000000 0000000e") + b'{"type":"int"}'
    sub = json.loads(info.properties["value.schema.properties"])
    assert sub == value.properties
    assert list(sub) == sorted(sub)
    assert split_key_value(info) == (key, value, KeyValueEncoding.SEPARATED)


def test_cpp_empty_halves_are_minus_one_and_read_as_empty() -> None:
    key, value = SchemaInfo.primitive(SchemaType.STRING), SchemaInfo.avro('"int"')
    cpp = key_value_schema(key, value, empty_length=-1)
    assert cpp.data[:4] == b"\xff\xff\xff\xff"
    assert split_key_value(cpp) == (key, value, KeyValueEncoding.INLINE)
    with pytest.raises(InvalidSchema, match="empty_length"):
        key_value_schema(key, value, empty_length=1)


@given(schemas, schemas, encodings, st.sampled_from([0, -1]))
def test_key_value_split_undoes_merge(
    key: SchemaInfo, value: SchemaInfo, encoding: KeyValueEncoding, empty: int
) -> None:
    info = key_value_schema(key, value, encoding, empty_length=empty)
    assert split_key_value(info) == (key, value, encoding)
    again = SchemaInfo.from_pb(pb.Schema.FromString(info.to_pb().SerializeToString()))
    # The halves' types travel by name in the properties: BYTES stays BYTES.
    assert split_key_value(again) == (key, value, encoding)


def test_key_value_defaults_as_java_reads_them() -> None:
    # No properties at all: both halves BYTES, INLINE; bytes after the value ignored.
    bare = SchemaInfo(SchemaType.KEY_VALUE, "kv", bytes.fromhex("00000001 41 ffffffff 99"))
    key, value, encoding = split_key_value(bare)
    assert key == SchemaInfo(SchemaType.BYTES, "", b"A")
    assert value == SchemaInfo(SchemaType.BYTES)
    assert encoding is KeyValueEncoding.INLINE


@pytest.mark.parametrize(
    ("data", "props", "match"),
    [
        (b"", {}, "ends before the key length"),
        (bytes.fromhex("00000000 000000"), {}, "ends before the value length"),
        (bytes.fromhex("00000005 4142"), {}, "key length 5 at byte 0"),
        (bytes.fromhex("fffffffe 00000000"), {}, "key length -2"),
        (bytes(8), {"kv.encoding.type": "SIDEWAYS"}, "'SIDEWAYS' is not INLINE or SEPARATED"),
        (bytes(8), {"key.schema.type": "STRNG"}, "key.schema.type 'STRNG'"),
        (bytes(8), {"value.schema.properties": "{"}, "value.schema.properties is not JSON"),
        (bytes(8), {"key.schema.properties": "[1]"}, "not a JSON object"),
    ],
)
def test_malformed_key_value_schemas_are_errors_saying_what(
    data: bytes, props: dict[str, str], match: str
) -> None:
    info = SchemaInfo(SchemaType.KEY_VALUE, "KeyValue", data, props)
    with pytest.raises(InvalidSchema, match=match):
        split_key_value(info)
    assert info.describe() == "KEY_VALUE"


def test_only_key_value_schemas_split() -> None:
    with pytest.raises(InvalidSchema, match="a AVRO schema is not KEY_VALUE"):
        split_key_value(SchemaInfo.avro('"int"'))


# ---------------------------------------------------------------------------
# Versions
# ---------------------------------------------------------------------------


@given(st.integers(-(1 << 63), (1 << 63) - 1))
@example(0)
@example(1)
def test_versions_round_trip_as_8_byte_big_endian(version: int) -> None:
    data = version_to_bytes(version)
    assert len(data) == 8
    assert int.from_bytes(data, "big", signed=True) == version
    assert version_from_bytes(data) == version


def test_version_bytes_edge_cases() -> None:
    assert version_to_bytes(1) == bytes.fromhex("0000000000000001")
    assert version_from_bytes(b"") is None
    assert version_from_bytes(bytes.fromhex("0000000000000002ff")) == 2  # as the broker reads
    with pytest.raises(InvalidSchema, match="shorter than 8 bytes"):
        version_from_bytes(b"\x00\x01")
    with pytest.raises(InvalidSchema, match="not a 64-bit"):
        version_to_bytes(1 << 63)


# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------


def _producer(schema: SchemaInfo | None) -> pb.CommandProducer:
    command = commands.producer(
        1, 2, topic="t", epoch=0, producer_name=None, user_provided_name=False, schema=schema
    )
    return command.producer


def _subscribe(schema: SchemaInfo | None) -> pb.CommandSubscribe:
    command = commands.subscribe(
        1, 2, topic="t", subscription="s", durable=False, earliest=True, schema=schema
    )
    return command.subscribe


@pytest.mark.parametrize("build", [_producer, _subscribe])
def test_producer_and_subscribe_carry_a_schema_but_not_bytes(build) -> None:
    avro = SchemaInfo.avro('{"type":"string"}')
    assert SchemaInfo.from_pb(build(avro).schema) == avro
    for absent in (None, SchemaInfo.primitive(SchemaType.BYTES), SchemaInfo(SchemaType.NONE)):
        assert not build(absent).HasField("schema")
    auto = build(SchemaInfo(SchemaType.AUTO_CONSUME, "AutoConsume"))
    assert auto.schema.type == pb.Schema.AutoConsume


def test_schema_requests_and_their_answers() -> None:
    latest = commands.get_schema(7, "persistent://t/n/x")
    assert latest.type == T.GET_SCHEMA
    assert latest.getSchema.request_id == 7
    assert not latest.getSchema.HasField("schema_version")
    versioned = commands.get_schema(8, "persistent://t/n/x", version_to_bytes(3))
    assert version_from_bytes(versioned.getSchema.schema_version) == 3
    avro = SchemaInfo.avro('"long"')
    create = commands.get_or_create_schema(9, "persistent://t/n/x", avro)
    assert create.type == T.GET_OR_CREATE_SCHEMA
    assert SchemaInfo.from_pb(create.getOrCreateSchema.schema) == avro
    assert commands.ANSWERS[T.GET_SCHEMA] == T.GET_SCHEMA_RESPONSE
    assert commands.ANSWERS[T.GET_OR_CREATE_SCHEMA] == T.GET_OR_CREATE_SCHEMA_RESPONSE
    # The rest of SUBSCRIBE is unchanged by a schema.
    sub = commands.subscribe(
        1,
        2,
        topic="t",
        subscription="s",
        durable=False,
        earliest=False,
        start_message_id=MessageId(3, 4),
        schema=avro,
    ).subscribe
    assert (sub.start_message_id.ledgerId, sub.start_message_id.entryId) == (3, 4)
