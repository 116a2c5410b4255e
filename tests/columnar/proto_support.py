"""Random protobuf descriptors and messages for the PROTOBUF_NATIVE decoder tests, and the
reference: a message parsed by google.protobuf turned into what our mapping promises."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    timestamp_pb2,
    wrappers_pb2,
)
from hypothesis import strategies as st

from pulsar_spark.columnar.values.proto.schema import ProtoField, ProtoMessage
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType

FD = descriptor_pb2.FieldDescriptorProto
SCALARS = [
    "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
    "sfixed32", "sfixed64", "float", "double", "bool", "string", "bytes",
]  # fmt: skip
KINDS = [*SCALARS, "enum", "child", "timestamp", "wrapper", "map_str", "map_child"]
_DEPS = [timestamp_pb2, wrappers_pb2]
#: Fields of a random message: (kind, number, repeated, oneof: "", "?" proto3 optional, a name).
Spec = list[tuple[str, int, bool, str]]
_counter = [0]


def _file(module: Any) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(proto)
    return proto


def build(
    spec: list[tuple[str, int, bool, str]], syntax: str = "proto3", packed: bool | None = None
) -> tuple[type, SchemaInfo]:
    """A message class ``t.Root`` and its PROTOBUF_NATIVE SchemaInfo. ``spec``: (kind,
    number, repeated, oneof or "" or "?" for proto3 optional) per field, named f<number>."""
    _counter[0] += 1
    fdp = descriptor_pb2.FileDescriptorProto(
        name=f"t{_counter[0]}.proto", package="t", syntax=syntax
    )
    fdp.dependency.extend(["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"])
    fdp.enum_type.add(name="Color").value.extend(
        [
            descriptor_pb2.EnumValueDescriptorProto(name="RED", number=0),
            descriptor_pb2.EnumValueDescriptorProto(name="GREEN", number=1),
            descriptor_pb2.EnumValueDescriptorProto(name="BLUE", number=5),
        ]
    )
    child = fdp.message_type.add(name="Child")
    child.field.add(name="a", number=1, type=FD.TYPE_INT64, label=FD.LABEL_OPTIONAL)
    child.field.add(name="s", number=2, type=FD.TYPE_STRING, label=FD.LABEL_OPTIONAL)
    child.field.add(name="r", number=3, type=FD.TYPE_SINT32, label=FD.LABEL_REPEATED)
    root = fdp.message_type.add(name="Root")
    oneofs: dict[str, int] = {}
    optionals = []
    for kind, number, repeated, oneof in spec:
        f = root.field.add(name=f"f{number}", number=number)
        f.label = FD.LABEL_REPEATED if repeated else FD.LABEL_OPTIONAL
        if kind in SCALARS:
            f.type = getattr(FD, f"TYPE_{kind.upper()}")
            if repeated and packed is not None and kind not in ("string", "bytes"):
                f.options.packed = packed
        elif kind == "enum":
            f.type, f.type_name = FD.TYPE_ENUM, ".t.Color"
        elif kind == "child":
            f.type, f.type_name = FD.TYPE_MESSAGE, ".t.Child"
        elif kind == "timestamp":
            f.type, f.type_name = FD.TYPE_MESSAGE, ".google.protobuf.Timestamp"
        elif kind == "wrapper":
            f.type, f.type_name = FD.TYPE_MESSAGE, ".google.protobuf.Int64Value"
        else:
            entry = root.nested_type.add(name=f"F{number}Entry")
            entry.options.map_entry = True
            key_type = FD.TYPE_STRING if kind == "map_str" else FD.TYPE_INT64
            entry.field.add(name="key", number=1, type=key_type, label=FD.LABEL_OPTIONAL)
            value = entry.field.add(name="value", number=2, label=FD.LABEL_OPTIONAL)
            if kind == "map_str":
                value.type = FD.TYPE_INT32
            else:
                value.type, value.type_name = FD.TYPE_MESSAGE, ".t.Child"
            f.type, f.type_name, f.label = (
                FD.TYPE_MESSAGE,
                f".t.Root.F{number}Entry",
                FD.LABEL_REPEATED,
            )
        if oneof == "?" and syntax == "proto3" and not repeated:
            f.proto3_optional = True
            optionals.append(f)
        elif oneof and oneof != "?" and not repeated:
            f.oneof_index = oneofs.setdefault(oneof, len(oneofs))
    for name in oneofs:
        root.oneof_decl.add(name=name)
    for f in optionals:
        f.oneof_index = len(root.oneof_decl)
        root.oneof_decl.add(name="_" + f.name)
    pool = descriptor_pool.DescriptorPool()
    files = [_file(m) for m in _DEPS] + [fdp]
    for proto in files:
        pool.Add(proto)
    cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("t.Root"))
    fds = descriptor_pb2.FileDescriptorSet(file=files)
    data = {
        "fileDescriptorSet": base64.b64encode(fds.SerializeToString()).decode(),
        "rootMessageTypeName": "t.Root",
        "rootFileDescriptorName": fdp.name,
    }
    return cls, SchemaInfo(SchemaType.PROTOBUF_NATIVE, "t", json.dumps(data).encode())


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    """Random fields: distinct numbers (none reserved), any kind, maps repeated."""
    numbers = draw(
        st.lists(st.integers(1, 3000).filter(lambda n: not 19000 <= n < 20000), min_size=1,
                 max_size=8, unique=True)
    )  # fmt: skip
    out = []
    for number in numbers:
        kind = draw(st.sampled_from(KINDS))
        repeated = kind.startswith("map") or draw(st.booleans())
        oneof = "" if repeated else draw(st.sampled_from(["", "", "?", "o1", "o2"]))
        out.append((kind, number, repeated, oneof))
    return out


def scalar_values(kind: str) -> st.SearchStrategy[Any]:
    bits = {"int32": 32, "sint32": 32, "sfixed32": 32, "int64": 64, "sint64": 64, "sfixed64": 64}
    if kind in bits:
        return st.integers(-(2 ** (bits[kind] - 1)), 2 ** (bits[kind] - 1) - 1)
    if kind in ("uint32", "fixed32"):
        return st.integers(0, 2**32 - 1)
    if kind in ("uint64", "fixed64"):
        return st.integers(0, 2**64 - 1)
    if kind == "float":
        return st.floats(width=32, allow_nan=False)
    if kind == "double":
        return st.floats(allow_nan=False)
    if kind == "bool":
        return st.booleans()
    if kind == "string":
        return st.text(max_size=8)
    return st.binary(max_size=8)


def random_messages(draw: Any, cls: type, spec: Spec, syntax: str) -> list[Any]:
    """1 to 5 messages of ``cls`` with random values (:func:`fill`; enum numbers outside
    the enum in proto3, whose enums are open)."""
    messages = []
    for _ in range(draw(st.integers(1, 5))):
        msg = cls()
        fill(draw, msg, spec, open_enums=syntax == "proto3")
        messages.append(msg)
    return messages


def fill(draw: Any, msg: Any, spec: Spec, open_enums: bool) -> None:
    """Set random values on ``msg`` (draw: Hypothesis' ``data.draw``)."""
    enums = st.sampled_from([0, 1, 5]) | (st.integers(-3, 9) if open_enums else st.nothing())
    for kind, number, repeated, _ in spec:
        name = f"f{number}"
        if not draw(st.booleans()):
            continue
        field = getattr(msg, name)
        if kind == "map_str":
            for k, v in draw(
                st.dictionaries(st.text(max_size=4), scalar_values("int32"), max_size=3)
            ).items():
                field[k] = v
            continue
        if kind == "map_child":
            for k in draw(st.lists(scalar_values("int64"), max_size=3)):
                _child(draw, field[k])
            continue
        count = draw(st.integers(0, 4)) if repeated else 1
        for _ in range(count):
            if kind in SCALARS or kind == "enum":
                value = draw(enums if kind == "enum" else scalar_values(kind))
                if repeated:
                    field.append(value)
                else:
                    setattr(msg, name, value)
                continue
            target = field.add() if repeated else field
            if kind == "child":
                _child(draw, target)
                if not repeated:
                    target.SetInParent()
            elif kind == "timestamp":
                target.seconds = draw(st.integers(-62135596800, 253402300799))
                target.nanos = draw(st.integers(0, 999_999_999))
            else:
                target.value = draw(scalar_values("int64"))
                target.SetInParent()


def _child(draw: Any, child: Any) -> None:
    if draw(st.booleans()):
        child.a = draw(scalar_values("int64"))
    if draw(st.booleans()):
        child.s = draw(scalar_values("string"))
    child.r.extend(draw(st.lists(scalar_values("sint32"), max_size=3)))


def expected(msg: Any, message: ProtoMessage) -> dict[str, Any]:
    """What our decoder promises for a message protobuf parsed."""
    return {f.name: _value(msg, f) for f in message.fields}


def _value(msg: Any, f: ProtoField) -> Any:
    raw = getattr(msg, f.name)
    if f.kind == "map":
        assert f.message is not None
        value_field = next(x for x in f.message.fields if x.number == 2)
        return {k: _one(v, value_field) for k, v in raw.items()}
    if f.repeated:
        return [_one(v, f) for v in raw]
    if f.presence and not msg.HasField(f.name):
        return None
    return _one(raw, f)


def _one(v: Any, f: ProtoField) -> Any:
    if f.kind == "enum":
        return dict((n, name) for n, name in reversed(f.enum)).get(v, str(v))
    if f.kind in ("uint64", "fixed64"):
        return Decimal(v)
    if f.kind == "timestamp":
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        return epoch + dt.timedelta(seconds=v.seconds, microseconds=v.nanos // 1000)
    if f.kind == "wrapper":
        return v.value
    if f.kind == "message":
        assert f.message is not None
        return expected(v, f.message)
    return v


def normalized(value: Any, dtype: pa.DataType) -> Any:
    """A decoded value with maps as dicts and timestamps in UTC (for comparison)."""
    if value is None:
        return None
    if pa.types.is_map(dtype):
        return {k: normalized(v, dtype.item_type) for k, v in value}
    if pa.types.is_list(dtype):
        return [normalized(v, dtype.value_type) for v in value]
    if pa.types.is_struct(dtype):
        return {f.name: normalized(value[f.name], f.type) for f in dtype}
    if pa.types.is_timestamp(dtype):
        return value.astimezone(dt.timezone.utc)
    return value
