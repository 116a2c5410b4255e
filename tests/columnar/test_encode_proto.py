"""Arrow values encoded as protobuf messages (columnar/encode_proto) against google.protobuf:
random descriptors and messages round-trip (protobuf's bytes, our read, our write: the same
bytes, or the same message where protobuf's map order is its own), other Arrow types that
fit, and what does not fit, named."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proto_support import Spec, build, random_messages, specs

from pulsar_spark.columnar.values.encode_errors import SchemaMismatch
from pulsar_spark.columnar.values.errors import UnmappableSchema
from pulsar_spark.columnar.values.proto.decode import proto_plan
from pulsar_spark.columnar.values.proto.encode import ProtoEncoder, native_writer_schema
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

_SLOW = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _micros(msg: Any, spec: Spec) -> None:
    """Timestamps cut to the microsecond (what reads keep of them)."""
    for kind, number, repeated, _ in spec:
        if kind != "timestamp":
            continue
        field = getattr(msg, f"f{number}")
        for ts in field if repeated else [field]:
            if ts.nanos % 1000:
                ts.nanos -= ts.nanos % 1000


@_SLOW
@given(spec=specs(), syntax=st.sampled_from(["proto3", "proto2"]), data=st.data())
def test_random_messages_round_trip_to_protobufs_bytes(
    spec: Spec, syntax: str, data: st.DataObject
) -> None:
    packed = data.draw(st.sampled_from([None, True, False]))
    cls, info = build(spec, syntax, packed)
    messages = random_messages(data.draw, cls, spec, syntax)
    for msg in messages:
        _micros(msg, spec)
    payloads = [m.SerializeToString() for m in messages]
    plan = proto_plan(info)
    column = plan.decode(pa.array([*payloads, None], pa.binary()))
    ours = ProtoEncoder(column.type, info).encode(column)
    assert ours.is_null().to_pylist() == [False] * len(payloads) + [True]
    written = ours.to_pylist()[:-1]
    for msg, want, got in zip(messages, payloads, written, strict=True):
        assert cls.FromString(got) == msg
        if not any(kind.startswith("map") for kind, *_ in spec):
            assert got == want  # the very bytes protobuf serializes
    # And our own reader reads back what it read.
    assert plan.decode(ours).to_pylist() == column.to_pylist()
    # A slice (offsets in every child) encodes as its rows do.
    assert ProtoEncoder(column.type, info).encode(column.slice(1)).to_pylist() == [
        *written[1:],
        None,
    ]


_ORDER = [
    ("int32", 1, False, ""),
    ("uint32", 2, False, ""),
    ("uint64", 3, False, "?"),
    ("enum", 4, True, ""),
    ("timestamp", 5, False, ""),
    ("wrapper", 6, False, ""),
    ("string", 7, False, "o1"),
    ("bytes", 8, False, "o1"),
    ("child", 9, False, ""),
    ("map_str", 10, True, ""),
    ("fixed64", 11, False, ""),
    ("sfixed32", 12, False, ""),
]


def test_other_arrow_types_that_fit() -> None:
    """Wider integers, decimals, enum numbers, dictionaries, large and view strings,
    timestamps of any unit and zone: protobuf reads the values given."""
    cls, info = build(_ORDER)
    ts = dt.datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=dt.timezone.utc)
    table = pa.table(
        {
            "f1": pa.array([-5, 7], pa.int64()),
            "f2": pa.array([Decimal(4_000_000_000), Decimal(0)], pa.decimal128(12, 0)),
            "f3": pa.array([2**64 - 1, None], pa.uint64()),
            "f4": pa.array([[5, 0], []], pa.list_(pa.int8())),
            "f5": pa.array([ts, None], pa.timestamp("ns", "Europe/Paris")),
            "f6": pa.array([0, None], pa.int16()),
            "f7": pa.array(["x", None], pa.large_string()).dictionary_encode(),
            "f8": pa.array([None, b"\x00"], pa.binary(1)),
            "f9": pa.array([{"a": 3, "s": "é", "r": [-1]}, None]),
            "f10": pa.array([[("k", 1)], []], pa.map_(pa.string_view(), pa.int64())),
            "f11": pa.array([2**63, 1], pa.uint64()),
            "f12": pa.array([-1, 2**31 - 1], pa.int64()),
        }
    )
    out = ProtoEncoder(pa.struct(list(table.schema)), info).encode(table).to_pylist()
    first, second = (cls.FromString(v) for v in out)
    assert (first.f1, first.f2, first.f3, list(first.f4)) == (-5, 4_000_000_000, 2**64 - 1, [5, 0])
    assert first.f5.seconds == -2 and first.f5.nanos == 500_000_000
    assert first.HasField("f6") and first.f6.value == 0
    assert first.WhichOneof("o1") == "f7" and first.f7 == "x"
    assert (first.f9.a, first.f9.s, list(first.f9.r)) == (3, "é", [-1])
    assert dict(first.f10) == {"k": 1} and first.f11 == 2**63 and first.f12 == -1
    assert not second.HasField("f3") and not second.HasField("f5") and not second.HasField("f6")
    assert second.WhichOneof("o1") == "f8" and second.f8 == b"\x00"
    assert not second.HasField("f9") and second.f12 == 2**31 - 1
    # Enum names, and for an open enum a number as text (how reads give undeclared ones).
    enum = pa.table({"f4": pa.array([["GREEN", "7", "RED"]])})
    (payload,) = ProtoEncoder(pa.struct(list(enum.schema)), info).encode(enum).to_pylist()
    assert list(cls.FromString(payload).f4) == [1, 7, 0]


def _misfit(spec: Spec, table: pa.Table, syntax: str = "proto3") -> SchemaMismatch:
    _, info = build(spec, syntax)
    with pytest.raises(SchemaMismatch) as caught:
        ProtoEncoder(pa.struct(list(table.schema)), info, topic="persistent://t/n/x").encode(table)
    assert "persistent://t/n/x" in str(caught.value)
    return caught.value


def test_what_does_not_fit_is_named_before_encoding() -> None:
    spec = [("int32", 1, False, ""), ("child", 2, False, ""), ("timestamp", 3, False, "")]
    table = pa.table(
        {
            "f1": pa.array(["1"]),
            "f2": pa.array([{"a": 1, "zz": 2}]),
            "f3": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("us")),
            "extra": pa.array([1]),
        }
    )
    error = _misfit(spec, table)
    assert error.fields == ["extra", "f1", "f2.zz", "f3"]
    text = str(error)
    assert "not a field of t.Root" in text and "not a field of t.Child" in text
    assert "string does not fit int32" in text and "without a time zone" in text
    assert "PROTOBUF_NATIVE" in text
    # A proto2 required field must be there.
    _, info = build([("int64", 1, False, "")], "proto2")
    files = json.loads(info.data)
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(files["fileDescriptorSet"]))
    root = next(m for m in fds.file[-1].message_type if m.name == "Root")
    root.field[0].label = descriptor_pb2.FieldDescriptorProto.LABEL_REQUIRED
    root.field.add(name="g", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    files["fileDescriptorSet"] = base64.b64encode(fds.SerializeToString()).decode()
    required = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", json.dumps(files).encode())
    with pytest.raises(SchemaMismatch, match="required") as caught:
        ProtoEncoder(pa.struct([("g", pa.string())]), required)
    assert caught.value.fields == ["f1"]
    enc = ProtoEncoder(pa.struct([("f1", pa.int64())]), required)
    with pytest.raises(SchemaMismatch, match="a required field cannot be null") as caught:
        enc.encode(pa.table({"f1": pa.array([1, None], pa.int64())}))
    assert caught.value.fields == ["f1"]


@pytest.mark.parametrize(
    ("spec", "column", "field", "match"),
    [
        ([("int32", 1, False, "")], pa.array([None, 1], pa.int32()), "f1", "no presence"),
        ([("int32", 1, False, "")], pa.array([2**31], pa.int64()), "f1", "out of the range"),
        ([("uint32", 1, False, "")], pa.array([-1], pa.int64()), "f1", "out of the range"),
        ([("uint64", 1, False, "")], pa.array([Decimal(2**64)], pa.decimal128(38, 0)), "f1",
         "out of the range"),
        ([("enum", 1, False, "")], pa.array(["PINK"]), "f1", "not a name or number"),
        ([("int32", 1, True, "")], pa.array([[1, None]]), "f1[]", "elements cannot be null"),
        ([("int32", 1, True, "")], pa.array([None], pa.list_(pa.int32())), "f1", "no null list"),
        ([("map_str", 1, True, "")], pa.array([[("k", None)]], pa.map_(pa.string(), pa.int32())),
         "f1{}", "map values cannot be null"),
        ([("timestamp", 1, False, "")],
         pa.array([dt.datetime(1, 1, 1)], pa.timestamp("s", "UTC")).cast(pa.int64()).cast(
             pa.timestamp("s", "UTC")), "", ""),
    ],
)  # fmt: skip
def test_values_that_do_not_fit_are_named(
    spec: Spec, column: pa.Array, field: str, match: str
) -> None:
    if not field:  # year 1 fits; a second before it does not
        _, info = build(spec)
        early = pa.array([column[0].value - 1], pa.int64()).cast(pa.timestamp("s", "UTC"))
        ProtoEncoder(pa.struct([("f1", column.type)]), info).encode(pa.table({"f1": column}))
        with pytest.raises(SchemaMismatch, match="Timestamp's range"):
            ProtoEncoder(pa.struct([("f1", early.type)]), info).encode(pa.table({"f1": early}))
        return
    error = _misfit(spec, pa.table({"f1": column}))
    assert error.fields == [field]
    assert match in str(error)


def test_a_closed_enum_and_a_oneof_set_twice() -> None:
    error = _misfit([("enum", 1, False, "")], pa.table({"f1": pa.array([7], pa.int32())}), "proto2")
    assert "closed" in str(error) and error.fields == ["f1"]
    error = _misfit([("enum", 1, False, "")], pa.table({"f1": pa.array(["7"])}), "proto2")
    assert "not a name of the enum" in str(error)
    both = pa.table({"f1": pa.array([1, 2], pa.int64()), "f2": pa.array(["a", None])})
    error = _misfit([("int64", 1, False, "o"), ("string", 2, False, "o")], both)
    assert error.fields == ["o"] and "1 row set more than one member" in str(error)


def test_the_root_file_name_is_filled_in_for_registration() -> None:
    _, info = build([("int64", 1, False, "")])
    data = json.loads(info.data)
    name = data.pop("rootFileDescriptorName")
    bare = SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", json.dumps(data).encode())
    assert json.loads(native_writer_schema(bare).data)["rootFileDescriptorName"] == name
    assert native_writer_schema(info) is info
    # The google/protobuf/ files it imports are added (Java builds descriptors from the set).
    fds = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(data["fileDescriptorSet"]))
    alone = descriptor_pb2.FileDescriptorSet(file=[fds.file[-1]])
    short = {**data, "fileDescriptorSet": base64.b64encode(alone.SerializeToString()).decode()}
    short["rootFileDescriptorName"] = name
    done = native_writer_schema(
        SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", json.dumps(short).encode())
    )
    got = json.loads(done.data)
    full = descriptor_pb2.FileDescriptorSet.FromString(base64.b64decode(got["fileDescriptorSet"]))
    assert sorted(f.name for f in full.file) == sorted(f.name for f in fds.file)
    assert got["rootFileDescriptorName"] == name
    data["rootMessageTypeName"] = "t.Nope"
    with pytest.raises(UnmappableSchema, match=r"t\.Nope"):
        native_writer_schema(SchemaInfo(SchemaType.PROTOBUF_NATIVE, "", json.dumps(data).encode()))


def test_protobuf_with_parsing_info_writes_every_value_unpacked() -> None:
    """PROTOBUF (Java's ``Schema.PROTOBUF``): the top-level fields of ``__PARSING_INFO__``,
    every non-null value written (proto2 readers keep a set default), unpacked."""
    cls, _ = build([("int64", 1, False, ""), ("string", 2, False, ""), ("int32", 3, True, "")])
    entries = [
        {"number": 1, "name": "f1", "type": "INT64", "label": "LABEL_OPTIONAL"},
        {"number": 2, "name": "f2", "type": "STRING", "label": "LABEL_OPTIONAL"},
        {"number": 3, "name": "f3", "type": "INT32", "label": "LABEL_REPEATED"},
    ]
    info = SchemaInfo(
        SchemaType.PROTOBUF,
        "",
        b'{"type":"record","name":"Root","fields":[]}',
        {"__PARSING_INFO__": json.dumps(entries)},
    )
    table = pa.table({"f1": [0, 5], "f2": ["", "x"], "f3": [[1, 2], []]})
    out = ProtoEncoder(pa.struct(list(table.schema)), info).encode(table).to_pylist()
    assert out[0] == bytes.fromhex("0800120018011802")
    assert cls.FromString(out[1]) == cls(f1=5, f2="x")


_ARROW_INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(),
               pa.uint32(), pa.uint64(), pa.decimal128(20, 0)]  # fmt: skip
_INT_KINDS = ["int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
              "sfixed32", "sfixed64"]  # fmt: skip


def _bounds(dtype: pa.DataType) -> tuple[int, int]:
    if pa.types.is_decimal(dtype):
        return -(2**64), 2**64
    bits = dtype.bit_width
    if pa.types.is_signed_integer(dtype):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(_INT_KINDS), min_size=1, max_size=5),
    types=st.lists(st.sampled_from(_ARROW_INTS), min_size=5, max_size=5),
    optional=st.booleans(),
    data=st.data(),
)
def test_random_integer_columns_of_any_arrow_type(
    kinds: list[str], types: list[pa.DataType], optional: bool, data: st.DataObject
) -> None:
    """Any Arrow integer type (and decimal) into any integer field: the values protobuf
    reads are the column's, or the write fails naming the field of the first value out of
    the field's range; a null is an absent field where the field has presence."""
    from pulsar_spark.columnar.values.proto.encode_values import RANGES

    spec = [(k, i + 1, False, "?" if optional else "") for i, k in enumerate(kinds)]
    cls, info = build(spec)
    columns, wanted, fits = {}, [], True
    for (kind, number, _, _), dtype in zip(spec, types, strict=False):
        lo, hi = _bounds(dtype)
        values = data.draw(st.lists(st.integers(lo, hi) | st.none(), min_size=3, max_size=3))
        if not optional:
            values = [0 if v is None else v for v in values]
        arrow = [Decimal(v) if v is not None and pa.types.is_decimal(dtype) else v for v in values]
        columns[f"f{number}"] = pa.array(arrow, dtype)
        low, high = RANGES[kind]
        if fits and any(v is not None and not low <= v <= high for v in values):
            fits, first_bad = False, f"f{number}"
        wanted.append(values)
    table = pa.table(columns)
    encoder = ProtoEncoder(pa.struct(list(table.schema)), info)
    if not fits:
        with pytest.raises(SchemaMismatch, match="out of the range") as caught:
            encoder.encode(table)
        assert caught.value.fields == [first_bad]
        return
    for row, payload in enumerate(encoder.encode(table).to_pylist()):
        msg = cls.FromString(payload)
        for (_, number, _, _), values in zip(spec, wanted, strict=False):
            value = values[row]
            name = f"f{number}"
            if value is None:
                assert not msg.HasField(name)
            else:
                assert getattr(msg, name) == value
