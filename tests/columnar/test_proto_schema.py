"""Protobuf schemas to Arrow types (columnar/proto_schema, proto_avro): the mapping table,
presence and defaults (proto2, proto3 optional, oneof), bad schema data, PROTOBUF
(non-native) with __PARSING_INFO__, and version checks by field number."""

from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2
from proto_support import build

from pulsar_spark.columnar.values.arrow_types import arrow_type
from pulsar_spark.columnar.values.errors import SchemaResolutionError, UnmappableSchema
from pulsar_spark.columnar.values.proto.decode import proto_plan, proto_resolve
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

FD = descriptor_pb2.FieldDescriptorProto


def test_the_mapping_table() -> None:
    kinds = ["int32", "sint32", "sfixed32", "int64", "sint64", "sfixed64", "uint32",
             "fixed32", "uint64", "fixed64", "float", "double", "bool", "string", "bytes",
             "enum", "child", "timestamp", "wrapper"]  # fmt: skip
    spec = [(k, i + 1, False, "") for i, k in enumerate(kinds)]
    spec += [("int32", 40, True, ""), ("map_str", 41, True, ""), ("map_child", 42, True, "")]
    _, info = build(spec)
    t = arrow_type(info)
    want = [pa.int32()] * 3 + [pa.int64()] * 5 + [pa.decimal128(20, 0)] * 2
    want += [pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.binary(), pa.string()]
    assert [t[i].type for i in range(16)] == want
    assert not any(t[i].nullable for i in range(16))
    child = t["f17"]
    assert child.nullable and child.type.names == ["a", "s", "r"]
    assert child.type["r"].type == pa.list_(pa.field("item", pa.int32(), False))
    assert t["f18"].type == pa.timestamp("us", tz="UTC") and t["f18"].nullable
    assert t["f19"].type == pa.int64() and t["f19"].nullable
    assert t["f40"].type == pa.list_(pa.field("item", pa.int32(), False))
    assert t["f41"].type == pa.map_(pa.string(), pa.field("value", pa.int32(), False))
    assert t["f42"].type.item_type == child.type  # map values: never null (a default)


def test_presence_and_defaults() -> None:
    cls, info = build(
        [("int32", 1, False, "?"), ("string", 2, False, "o"), ("int64", 3, False, "o")]
    )
    t = arrow_type(info)
    assert [t[i].nullable for i in range(3)] == [True, True, True]
    values = pa.array([cls().SerializeToString(), cls(f1=0, f3=0).SerializeToString()])
    assert proto_plan(info).decode(values).to_pylist() == [
        {"f1": None, "f2": None, "f3": None},
        {"f1": 0, "f2": None, "f3": 0},
    ]


def test_proto2_declared_defaults_fill_absent_fields() -> None:
    spec = [("int32", 1, False, ""), ("string", 2, False, ""), ("enum", 3, False, "")]
    _, info = build(spec, "proto2")
    data = json.loads(info.data)
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(data["fileDescriptorSet"]))
    root = fds.file[-1].message_type[1]
    root.field[0].default_value = "42"
    root.field[2].default_value = "BLUE"
    data["fileDescriptorSet"] = base64.b64encode(fds.SerializeToString()).decode()
    info = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "t", json.dumps(data).encode())
    t = arrow_type(info)
    assert [t[i].nullable for i in range(3)] == [False, True, False]
    got = proto_plan(info).decode(pa.array([b"", b"\x08\x07"])).to_pylist()
    assert got == [{"f1": 42, "f2": None, "f3": "BLUE"}, {"f1": 7, "f2": None, "f3": "BLUE"}]


def _native(fds: descriptor_pb2.FileDescriptorSet, root: str) -> SchemaInfo:
    data = {"fileDescriptorSet": base64.b64encode(fds.SerializeToString()).decode(),
            "rootMessageTypeName": root, "rootFileDescriptorName": "x.proto"}  # fmt: skip
    return SchemaInfo(SchemaType.PROTOBUF_NATIVE, "x", json.dumps(data).encode())


def test_bad_schema_data_is_unmappable_naming_the_topic() -> None:
    cases = {
        b"not json": "not JSON with a base64 fileDescriptorSet",
        b'{"fileDescriptorSet": "%%%", "rootMessageTypeName": "a.B"}': "base64",
    }
    for data, text in cases.items():
        with pytest.raises(UnmappableSchema, match=text) as caught:
            arrow_type(SchemaInfo(SchemaType.PROTOBUF_NATIVE, "x", data), topic="t9")
        assert caught.value.topic == "t9"
    empty = descriptor_pb2.FileDescriptorSet()
    with pytest.raises(UnmappableSchema, match=r"has no message type a\.B"):
        arrow_type(_native(empty, "a.B"))
    lonely = descriptor_pb2.FileDescriptorProto(name="x.proto", package="a", syntax="proto3")
    lonely.dependency.append("other/dep.proto")
    with pytest.raises(UnmappableSchema, match=r"lacks the file other/dep\.proto"):
        arrow_type(_native(descriptor_pb2.FileDescriptorSet(file=[lonely]), "a.B"))


def test_well_known_files_left_out_of_the_set_are_protobufs_own() -> None:
    _, info = build([("timestamp", 1, False, "")])
    data = json.loads(info.data)
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(data["fileDescriptorSet"]))
    alone = descriptor_pb2.FileDescriptorSet(file=[fds.file[-1]])
    assert arrow_type(_native(alone, "t.Root")) == arrow_type(info)


def test_groups_and_recursion_are_unmappable_naming_the_field() -> None:
    f = descriptor_pb2.FileDescriptorProto(name="x.proto", package="a", syntax="proto2")
    node = f.message_type.add(name="Node")
    node.field.add(name="v", number=1, type=FD.TYPE_INT32, label=FD.LABEL_OPTIONAL)
    node.field.add(name="kids", number=2, type=FD.TYPE_MESSAGE, type_name=".a.Node",
                   label=FD.LABEL_REPEATED)  # fmt: skip
    grouped = f.message_type.add(name="G")
    grouped.nested_type.add(name="Inner")
    grouped.field.add(name="inner", number=1, type=FD.TYPE_GROUP, type_name=".a.G.Inner",
                      label=FD.LABEL_OPTIONAL)  # fmt: skip
    fds = descriptor_pb2.FileDescriptorSet(file=[f])
    with pytest.raises(UnmappableSchema, match="recursive") as caught:
        arrow_type(_native(fds, "a.Node"), topic="t1")
    assert (caught.value.field, caught.value.topic) == ("kids", "t1")
    with pytest.raises(UnmappableSchema, match="groups") as caught:
        arrow_type(_native(fds, "a.G"))
    assert caught.value.field == "inner"


def _parsing_info(*fields: tuple[int, str, str, str]) -> SchemaInfo:
    avro = {"type": "record", "name": "M", "namespace": "p", "fields": []}
    entries = [{"number": n, "name": name, "type": kind, "label": label, "definition": None}
               for n, name, kind, label in fields]  # fmt: skip
    return SchemaInfo(SchemaType.PROTOBUF, "", json.dumps(avro).encode(),
                      {"__PARSING_INFO__": json.dumps(entries)})  # fmt: skip


def test_protobuf_schemas_with_parsing_info_decode_by_field_number() -> None:
    info = _parsing_info(
        (1, "id", "INT64", "LABEL_OPTIONAL"),
        (3, "tags", "STRING", "LABEL_REPEATED"),
        (2, "flag", "BOOL", "LABEL_OPTIONAL"),
    )
    assert arrow_type(info).names == ["id", "tags", "flag"]
    value = b"\x08\x96\x01\x1a\x01x\x1a\x00\x10\x01"
    assert proto_plan(info).decode(pa.array([value, b""])).to_pylist() == [
        {"id": 150, "tags": ["x", ""], "flag": True},
        {"id": 0, "tags": [], "flag": False},
    ]
    with pytest.raises(UnmappableSchema, match="only the top level") as caught:
        arrow_type(_parsing_info((1, "child", "MESSAGE", "LABEL_OPTIONAL")), topic="t2")
    assert caught.value.field == "child"
    bare = SchemaInfo(SchemaType.PROTOBUF, "", b'{"type": "record", "name": "M", "fields": []}')
    with pytest.raises(UnmappableSchema, match="no __PARSING_INFO__"):
        arrow_type(bare)


def test_versions_whose_field_types_changed_do_not_resolve() -> None:
    _, v1 = build([("int64", 1, False, ""), ("child", 2, False, "")])
    _, v2 = build([("int32", 1, False, ""), ("child", 2, False, ""), ("string", 3, False, "")])
    proto_resolve(proto_plan(v1), proto_plan(v2))  # int64 -> int32, a field added: fine
    _, clash = build([("string", 1, False, "")])
    with pytest.raises(SchemaResolutionError, match="field number 1 is string") as caught:
        proto_resolve(proto_plan(v1), proto_plan(clash))
    assert caught.value.field == "f1"
