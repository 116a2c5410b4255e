"""The sink's entry points: the schema registered for a DataFrame's columns, payloads for a
SchemaInfo, and KEY_VALUE payloads laid out as notes/schemas.md §4 says (INLINE lengths
with -1 for a null half, SEPARATED keys in Base64)."""

from __future__ import annotations

import base64
import io
import json
import struct

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.values.encode import (
    KeyValueEncoder,
    PayloadEncoder,
    key_value_writer_schema,
    writer_schema,
)
from pulsar_spark.columnar.values.encode_errors import SchemaMismatch
from pulsar_spark.columnar.values.errors import UnmappableSchema
from pulsar_spark.columnar.values.key_value import inline_payloads, separated_keys
from pulsar_spark.protocol.schemas.info import (
    KeyValueEncoding,
    SchemaInfo,
    key_value_schema,
    split_key_value,
)
from pulsar_spark.protocol.schemas.types import SchemaType

_RECORD = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])


@pytest.mark.parametrize(
    ("dtype", "kind"),
    [
        (pa.string(), SchemaType.STRING),
        (pa.binary(), SchemaType.BYTES),
        (pa.int32(), SchemaType.INT32),
        (pa.float64(), SchemaType.DOUBLE),
        (pa.timestamp("us", tz="UTC"), SchemaType.INSTANT),
        (pa.timestamp("us"), SchemaType.LOCAL_DATE_TIME),
        (pa.date32(), SchemaType.LOCAL_DATE),
        (_RECORD, SchemaType.AVRO),
        (pa.list_(pa.int64()), SchemaType.AVRO),
    ],
)
def test_writer_schemas(dtype: pa.DataType, kind: SchemaType) -> None:
    info = writer_schema(dtype)
    assert info.type is kind
    PayloadEncoder(dtype, info)  # what is derived fits
    if kind is SchemaType.AVRO:
        assert writer_schema(dtype, "JSON").type is SchemaType.JSON
        assert writer_schema(dtype, "JSON").data == info.data
        assert info.properties["__alwaysAllowNull"] == "true"
    else:
        assert info.data == b""


def test_payloads_for_each_schema_kind() -> None:
    rows = pa.array([{"id": 1, "name": "a"}, None, {"id": -2, "name": None}], _RECORD)
    avro = PayloadEncoder(_RECORD, writer_schema(_RECORD)).encode(rows)
    schema = fastavro.parse_schema(json.loads(writer_schema(_RECORD).data))
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, {"id": 1, "name": "a"})
    assert avro.to_pylist()[:2] == [buf.getvalue(), None]
    text = PayloadEncoder(_RECORD, writer_schema(_RECORD, "JSON")).encode(rows)
    assert text.to_pylist() == [b'{"id":1,"name":"a"}', None, b'{"id":-2}']
    ints = PayloadEncoder(pa.int64(), SchemaInfo.primitive(SchemaType.INT64))
    assert ints.encode(pa.array([1, None])).to_pylist() == [struct.pack(">q", 1), None]


def test_payload_encoders_refuse_what_they_cannot_write() -> None:
    with pytest.raises(SchemaMismatch, match="KEY_VALUE"):
        PayloadEncoder(_RECORD, key_value_writer_schema(pa.string(), _RECORD))
    protobuf = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", b"{}")
    with pytest.raises(UnmappableSchema, match="fileDescriptorSet"):
        PayloadEncoder(_RECORD, protobuf)
    with pytest.raises(SchemaMismatch, match="AUTO_CONSUME"):
        PayloadEncoder(_RECORD, SchemaInfo(SchemaType.AUTO_CONSUME, "", b""))
    latin = SchemaInfo(SchemaType.STRING, "String", b"", {"__charset": "ISO-8859-1"})
    with pytest.raises(SchemaMismatch, match="ISO-8859-1"):
        PayloadEncoder(pa.string(), latin)
    PayloadEncoder(pa.string(), SchemaInfo(SchemaType.STRING, "", b"", {"__charset": "utf-8"}))
    with pytest.raises(SchemaMismatch, match="INT32"):
        PayloadEncoder(pa.string(), SchemaInfo.primitive(SchemaType.INT32), topic="t")


def test_inline_payloads_match_the_java_layout() -> None:
    # notes §4, verified with Java: KeyValue(null, 1) with INT32 values
    keys = pa.array([None, b"k", b""], pa.binary())
    values = pa.array([struct.pack(">i", 1), None, b""], pa.binary())
    assert inline_payloads(keys, values).to_pylist() == [
        bytes.fromhex("ffffffff0000000400000001"),
        bytes.fromhex("000000016bffffffff"),
        bytes.fromhex("0000000000000000"),
    ]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.none() | st.binary(max_size=9), st.none() | st.binary(max_size=9))))
def test_inline_payloads_and_separated_keys(pairs: list[tuple[bytes | None, bytes | None]]) -> None:
    keys = pa.array([k for k, _ in pairs], pa.binary())
    values = pa.array([v for _, v in pairs], pa.binary())

    def half(b: bytes | None) -> bytes:
        return b"\xff\xff\xff\xff" if b is None else struct.pack(">i", len(b)) + b

    assert inline_payloads(keys, values).to_pylist() == [half(k) + half(v) for k, v in pairs]
    assert separated_keys(keys).to_pylist() == [
        None if k is None else base64.b64encode(k).decode() for k, _ in pairs
    ]


def test_key_value_schemas_and_payloads() -> None:
    info = key_value_writer_schema(pa.string(), _RECORD, KeyValueEncoding.SEPARATED)
    halves = split_key_value(info)
    assert halves.key.type is SchemaType.STRING
    assert halves.value.type is SchemaType.AVRO
    assert json.loads(halves.value.data)["name"] == "value"
    assert halves.encoding is KeyValueEncoding.SEPARATED
    keys = pa.array(["k1", None])
    values = pa.array([{"id": 1, "name": None}, None], _RECORD)
    separated = KeyValueEncoder(pa.string(), _RECORD, info).encode(keys, values)
    assert separated.keys is not None
    assert separated.keys.to_pylist() == [b"k1", None]
    assert separated.payloads.to_pylist() == [b"\x02\x00", None]
    inline = KeyValueEncoder(pa.string(), _RECORD, key_value_writer_schema(pa.string(), _RECORD))
    pairs = inline.encode(keys, values)
    assert pairs.keys is None
    assert pairs.payloads.to_pylist() == [
        bytes.fromhex("000000026b31") + bytes.fromhex("000000020200"),
        bytes.fromhex("ffffffffffffffff"),
    ]


def test_key_value_records_are_named() -> None:
    """The value's record takes recordName and recordNamespace (the key's is ``key``, in
    the same namespace); without them, ``key`` and ``value`` as before."""
    named = key_value_writer_schema(
        _RECORD, _RECORD, KeyValueEncoding.INLINE, name="Order", namespace="com.example"
    )
    halves = split_key_value(named)
    key, value = json.loads(halves.key.data), json.loads(halves.value.data)
    assert (key["name"], key["namespace"]) == ("key", "com.example")
    assert (value["name"], value["namespace"]) == ("Order", "com.example")
    plain = split_key_value(key_value_writer_schema(_RECORD, _RECORD, struct="JSON"))
    assert plain.value.type is SchemaType.JSON
    assert [json.loads(h.data)["name"] for h in (plain.key, plain.value)] == ["key", "value"]
    assert "namespace" not in json.loads(plain.value.data)


def test_protobuf_native_values_are_encoded() -> None:
    from google.protobuf import descriptor_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    file = fds.file.add(name="o.proto", package="o", syntax="proto3")
    order = file.message_type.add(name="Order")
    fd = descriptor_pb2.FieldDescriptorProto
    order.field.add(name="id", number=1, type=fd.TYPE_INT64, label=fd.LABEL_OPTIONAL)
    order.field.add(name="name", number=2, type=fd.TYPE_STRING, label=fd.LABEL_OPTIONAL)
    data = {
        "fileDescriptorSet": base64.b64encode(fds.SerializeToString()).decode(),
        "rootMessageTypeName": "o.Order",
        "rootFileDescriptorName": "o.proto",
    }
    info = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", json.dumps(data).encode())
    values = pa.array([{"id": 150, "name": "x"}, None, {"id": 0, "name": None}], _RECORD)
    with pytest.raises(SchemaMismatch) as caught:
        PayloadEncoder(_RECORD, info).encode(values)
    assert caught.value.fields == ["name"]  # proto3 string: no presence, no null
    values = pa.array([{"id": 150, "name": "x"}, None, {"id": 0, "name": ""}], _RECORD)
    assert PayloadEncoder(_RECORD, info).encode(values).to_pylist() == [
        bytes.fromhex("089601") + b"\x12\x01x",
        None,
        b"",
    ]
    kv = key_value_schema(SchemaInfo.primitive(SchemaType.STRING), info)
    pairs = KeyValueEncoder(pa.string(), _RECORD, kv).encode(pa.array(["k"]), values.slice(0, 1))
    value = bytes.fromhex("089601") + b"\x12\x01x"
    assert pairs.payloads.to_pylist() == [b"\x00\x00\x00\x01k\x00\x00\x00\x06" + value]


def test_key_value_mismatches_name_the_half() -> None:
    info = key_value_writer_schema(pa.int32(), _RECORD)
    with pytest.raises(SchemaMismatch) as key_error:
        KeyValueEncoder(pa.string(), _RECORD, info, topic="t")
    assert key_error.value.fields == ["key"]
    other = pa.struct([("id", pa.string())])
    with pytest.raises(SchemaMismatch) as value_error:
        KeyValueEncoder(pa.int32(), other, info)
    assert value_error.value.fields == ["value.id"]  # name: nullable, default null
    with pytest.raises(SchemaMismatch, match="has no key and value"):
        KeyValueEncoder(pa.int32(), _RECORD, writer_schema(_RECORD))
    encoder = KeyValueEncoder(pa.int32(), _RECORD, info)
    with pytest.raises(SchemaMismatch) as null_error:
        encoder.encode(pa.array([1], pa.int32()), pa.array([{"id": None, "name": "x"}], _RECORD))
    assert null_error.value.fields == ["value.id"]
