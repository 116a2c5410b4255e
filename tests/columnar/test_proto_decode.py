"""PROTOBUF_NATIVE values decoded columnar (columnar/proto_decode) against google.protobuf's
own parsing: random descriptors, random messages, evolution by field number, fuzz."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from proto_support import KINDS, build, expected, fill, normalized, random_messages, specs

from pulsar_spark.columnar.values.errors import SchemaDecodeError
from pulsar_spark.columnar.values.proto.decode import proto_plan
from pulsar_spark.columnar.values.proto.schema import parse_native

_SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check(cls: type, info: object, messages: list[object], payloads: list[bytes]) -> None:
    plan = proto_plan(info)  # type: ignore[arg-type]
    column = plan.decode(pa.array(payloads, pa.binary()))
    root = parse_native(info.data)  # type: ignore[attr-defined]
    got = [normalized(v, plan.type) for v in column.to_pylist()]
    want = [expected(cls.FromString(p), root) for p in payloads]  # type: ignore[attr-defined]
    assert _nan_named(got) == _nan_named(want)


def _nan_named(value: object) -> object:
    """``value`` with every NaN as "NaN" (NaN != NaN; a fixed64 read as a double can be one)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_named(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan_named(v) for v in value]
    return value


@_SLOW
@given(spec=specs(), syntax=st.sampled_from(["proto3", "proto2"]), data=st.data())
def test_random_messages_decode_as_protobuf_parses_them(
    spec: list[tuple[str, int, bool, str]], syntax: str, data: st.DataObject
) -> None:
    packed = data.draw(st.sampled_from([None, True, False]))
    cls, info = build(spec, syntax, packed)
    messages = random_messages(data.draw, cls, spec, syntax)
    payloads = [m.SerializeToString() for m in messages]
    # Several messages concatenated are one message (their merge), as protobuf reads it.
    payloads.append(b"".join(payloads))
    _check(cls, info, messages, payloads)


def test_a_oneof_message_member_set_again_after_another_member_starts_afresh() -> None:
    """Setting a oneof member clears the oneof: ``f7 {seconds: 1}``, then ``f8``, then an
    empty ``f7`` leave ``f7`` empty, not merged with the first (found by the property
    above)."""
    spec = [("timestamp", 7, False, "o1"), ("int32", 8, False, "o1"), ("int32", 2, False, "")]
    cls, info = build(spec, "proto3", None)
    first, between, last = cls(), cls(), cls()
    first.f7.seconds = 1
    between.f8 = 0
    last.f7.SetInParent()
    messages = [first, between, last]
    payloads = [m.SerializeToString() for m in messages]
    payloads.append(b"".join(payloads))
    _check(cls, info, messages, payloads)


@_SLOW
@given(spec=specs(), data=st.data())
def test_another_descriptor_reads_by_field_number(
    spec: list[tuple[str, int, bool, str]], data: st.DataObject
) -> None:
    """Written with one descriptor, read with another sharing some field numbers (packed
    and unpacked swapped, fields dropped and added): what protobuf reads with it."""
    writer, _ = build(spec, "proto3", data.draw(st.sampled_from([True, False])))
    kept = [f for f in spec if data.draw(st.booleans())]
    added = [(k, n + 5000, r, "") for k, n, r, _ in spec if data.draw(st.booleans())]
    # Some field numbers change type: a wire type that does not match is an unknown field.
    retyped = [
        (data.draw(st.sampled_from(KINDS)), n, r or k.startswith("map"), "")
        for k, n, r, _ in spec
        if (k, n, r, _) not in kept and data.draw(st.booleans())
    ]
    retyped = [(k, n, r or k.startswith("map"), o) for k, n, r, o in retyped]
    reader, info = build(
        kept + added + retyped, "proto3", data.draw(st.sampled_from([True, False]))
    )
    msg = writer()
    fill(data.draw, msg, spec, open_enums=True)
    payload = msg.SerializeToString()
    try:
        # protobuf cannot parse it, or parses it but refuses it as a value (its JSON form:
        # found by Hypothesis, a map entry {"": -1} read as a Timestamp has nanos -1).
        json_format.MessageToDict(reader.FromString(payload))
    except (DecodeError, json_format.Error):
        with pytest.raises(SchemaDecodeError):
            proto_plan(info).decode(pa.array([payload], pa.binary()))
        return
    _check(reader, info, [msg], [payload])


def test_a_map_entry_with_a_field_of_another_type_is_not_in_the_map() -> None:
    """Found by Hypothesis (another descriptor): a map<string, int32> entry read as a
    map<int64, Child> entry has a key and value of other wire types. protobuf (upb) keeps
    such an entry, or one with another field number, as unknown: it is not in the map."""
    writer, _ = build([("map_str", 1, True, ""), ("map_str", 2, True, "")]
                      + [("int32", n, False, "") for n in range(3, 9)])  # fmt: skip
    reader, info = build([("map_str", 1, True, ""), ("map_child", 2, True, "")]
                         + [("int32", n, False, "") for n in range(3, 9)])  # fmt: skip
    msg = writer()
    msg.f2[""] = 0
    msg.f1["k"] = 3
    payloads = [msg.SerializeToString()]
    assert reader.FromString(payloads[0]).f2 == {}
    _check(reader, info, [msg], payloads)
    cls, info = build([("map_child", 2, True, "")])
    payloads = [
        b"\x12\x02\x10\x00",  # value of wire type 0: not in the map
        b"\x12\x04\x08\x01\x18\x00",  # field 3: not in the map
        b"\x12\x04\x0a\x00\x12\x00",  # key of wire type 2: not in the map
        b"\x12\x02\x08\x01",  # no value: a default Child
        b"\x12\x06\x08\x01\x12\x02\x20\x01",  # field 4 inside the value: kept
        b"\x12\x04\x08\x01\x12\x00\x12\x04\x08\x01\x18\x00",  # an unknown one later
        b"\x12\x04\x08\x01\x12\x00\x12\x04\x08\x02\x18\x00\x12\x02\x08\x03",
    ]
    _check(cls, info, [], payloads)
    column = proto_plan(info).decode(pa.array(payloads, pa.binary()))
    assert [len(v["f2"]) for v in column.to_pylist()] == [0, 0, 0, 1, 1, 1, 2]


def test_nulls_empty_values_and_the_row_order_stay() -> None:
    cls, info = build([("int64", 1, False, ""), ("child", 2, False, "")])
    plan = proto_plan(info)
    one = cls(f1=7).SerializeToString()
    column = plan.decode(pa.array([None, one, b"", None], pa.binary()))
    assert column.to_pylist() == [None, {"f1": 7, "f2": None}, {"f1": 0, "f2": None}, None]


def test_a_malformed_value_names_the_row_and_field() -> None:
    cls, info = build([("string", 1, False, ""), ("int32", 2, True, "")])
    plan = proto_plan(info, topic="persistent://t/n/x")
    good = cls(f1="ok").SerializeToString()
    with pytest.raises(SchemaDecodeError) as caught:
        plan.decode(pa.array([good, b"\x0a\x05ab"], pa.binary()))
    assert caught.value.row == 1
    assert caught.value.field == "f1"
    assert "persistent://t/n/x" in str(caught.value)
    with pytest.raises(SchemaDecodeError, match="not valid UTF-8") as caught:
        plan.decode(pa.array([good, b"\x0a\x02\xff\xfe"], pa.binary()))
    assert caught.value.field == "f1"
    with pytest.raises(SchemaDecodeError, match="packed varints") as caught:
        plan.decode(pa.array([b"\x12\x02\x01\x80"], pa.binary()))
    assert caught.value.field == "f2"


def test_dead_letters_null_the_bad_rows_and_say_why() -> None:
    cls, info = build([("string", 1, False, ""), ("child", 2, False, "")])
    plan = proto_plan(info)
    good = cls(f1="ok").SerializeToString()
    column, errors = plan.decode_collect(
        pa.array([good, b"\x12\x03\x08", b"\x0b", good], pa.binary())
    )
    assert column.to_pylist()[0] == {"f1": "ok", "f2": None}
    assert column.to_pylist()[1:3] == [None, None]
    assert column.to_pylist()[3] == column.to_pylist()[0]
    texts = errors.to_pylist()
    assert texts[0] is None and texts[3] is None
    assert "field f2" in texts[1]
    assert "group" in texts[2] or "invalid" in texts[2]


@settings(max_examples=300, deadline=None)
@given(payload=st.binary(max_size=40), seed=st.sampled_from([0, 1]))
def test_random_bytes_decode_or_raise_our_error(payload: bytes, seed: int) -> None:
    spec = [
        [("int32", 1, True, ""), ("child", 2, False, ""), ("string", 3, False, "")],
        [("map_child", 1, True, ""), ("fixed64", 2, True, ""), ("enum", 4, False, "o")],
    ][seed]
    cls, info = _FUZZ.setdefault(seed, build(spec))
    plan = proto_plan(info)
    try:
        column = plan.decode(pa.array([payload], pa.binary()))
    except SchemaDecodeError:
        return
    # What we read, protobuf reads too, and alike.
    msg = cls.FromString(payload)
    assert normalized(column.to_pylist()[0], plan.type) == expected(msg, parse_native(info.data))


_FUZZ: dict[int, tuple[type, object]] = {}


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_few_long_messages_read_field_by_field_alike(data: st.DataObject) -> None:
    """Past 64 steps with at most 8 messages left, the walk reads one field at a time."""
    spec = [("string", 1, True, ""), ("sint64", 2, True, ""), ("child", 3, True, ""),
            ("int32", 4, False, "")]  # fmt: skip
    cls, info = _LONG.setdefault(0, build(spec, "proto2", False))
    messages = []
    for _ in range(data.draw(st.integers(1, 3))):
        msg = cls(f4=data.draw(st.integers(-5, 5)))
        msg.f1.extend(data.draw(st.lists(st.text(max_size=3), min_size=40, max_size=90)))
        msg.f2.extend(data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40)))
        for a in data.draw(st.lists(st.integers(0, 9), max_size=20)):
            msg.f3.add(a=a)
        messages.append(msg)
    payloads = [m.SerializeToString() for m in messages] + [b""] * 20
    _check(cls, info, messages, payloads)
    broken = payloads[0] + b"\x0a\x09ab"  # a last string cut short
    with pytest.raises(SchemaDecodeError, match="runs past the end") as caught:
        proto_plan(info).decode(pa.array([payloads[0], broken], pa.binary()))
    assert (caught.value.row, caught.value.field) == (1, "f1")


_LONG: dict[int, tuple[type, object]] = {}


def test_a_map_entry_read_as_a_timestamp_with_negative_nanos_is_an_error() -> None:
    """Found by Hypothesis (another descriptor): a map<string, int32> entry {"": -1} read as a
    repeated Timestamp is Timestamp(seconds=0, nanos=-1): protobuf parses it, refuses it as a
    value; the decoder fails naming the field and the row instead of passing it on."""
    writer, _ = build([("map_str", 4, True, "")])
    reader, info = build([("timestamp", 4, True, "")])
    msg = writer()
    msg.f4[""] = -1
    payload = msg.SerializeToString()
    with pytest.raises(json_format.Error, match="Timestamp is not valid"):
        json_format.MessageToDict(reader.FromString(payload))
    with pytest.raises(SchemaDecodeError, match=r"f4\[\]: row 0: .*out of range"):
        proto_plan(info).decode(pa.array([payload], pa.binary()))
