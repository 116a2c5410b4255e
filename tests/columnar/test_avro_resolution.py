"""Schema resolution in the columnar Avro decoder: data written with one schema, read as another.

Hypothesis evolves random record schemas (fields dropped, added with defaults,
promoted int -> long -> float -> double and string -> bytes, made nullable)
and checks the plan of (writer, reader) against fastavro's
``schemaless_reader(datum, writer, reader)``. Examples pin the rules one by one.
"""

from __future__ import annotations

import copy
import datetime
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_avro_decode import normal, ours, schema_and_records

from pulsar_spark.columnar.values.avro.decode import AvroPlan, avro_plan
from pulsar_spark.columnar.values.errors import (
    SchemaDecodeError,
    SchemaResolutionError,
    UnmappableSchema,
)

# Not int/long -> float: fastavro keeps such values as Python floats (doubles), where
# the reader's float holds them rounded to 32 bits (as Java does); test_promotions has them.
_PROMOTE = {"int": ["long", "double"], "long": ["double"], "float": ["double"]}
_PROMOTE["string"] = ["bytes"]
_ADDED = [
    ("long", 7),
    ("string", "x"),
    ("double", 1.5),
    ("boolean", True),
    (["null", "string"], None),
    ({"type": "array", "items": "int"}, [1, 2]),
    ({"type": "map", "values": "long"}, {"k": 3}),
    ({"type": "enum", "name": "Added", "symbols": ["A", "B"]}, "B"),
    ({"type": "record", "name": "AddedRec", "fields": [{"name": "z", "type": "int"}]}, {"z": 4}),
]


def _encode(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(copy.deepcopy(schema)), record)
    return out.getvalue()


def _fastavro(writer: Any, reader: Any, datum: bytes) -> Any:
    w = fastavro.parse_schema(copy.deepcopy(writer))
    r = fastavro.parse_schema(copy.deepcopy(reader))
    return normal(fastavro.schemaless_reader(io.BytesIO(datum), w, r))


def _ours(writer: Any, reader: Any, datums: list[bytes]) -> list[Any]:
    plan = AvroPlan(json.dumps(writer), json.dumps(reader))
    column = plan.decode(pa.array(datums, pa.binary()))
    column.validate(full=True)
    assert column.type == AvroPlan(json.dumps(reader)).type
    return ours(column)


@st.composite
def evolved(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any], list[bytes]]:
    writer, datums = draw(schema_and_records())
    reader = copy.deepcopy(writer)
    fields = []
    for field in reader["fields"]:
        change = draw(st.sampled_from(["keep", "keep", "drop", "promote", "nullable"]))
        kind = field["type"]
        if change == "drop":
            continue
        if change == "promote" and isinstance(kind, str) and kind in _PROMOTE:
            field["type"] = draw(st.sampled_from(_PROMOTE[kind]))
        elif change == "nullable" and not isinstance(kind, list) and kind != "null":
            field["type"] = ["null", kind]
        fields.append(field)
    for i, (kind, default) in enumerate(draw(st.lists(st.sampled_from(_ADDED), max_size=3))):
        kind = copy.deepcopy(kind)
        if isinstance(kind, dict) and "name" in kind:
            kind["name"] = f"{kind['name']}{i}"
        fields.insert(
            draw(st.integers(0, len(fields))), {"name": f"new{i}", "type": kind, "default": default}
        )
    reader["fields"] = fields
    return writer, reader, datums


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(evolved())
def test_reads_evolved_schemas_as_fastavro_does(case: tuple[Any, Any, list[bytes]]) -> None:
    writer, reader, datums = case
    expected = [_fastavro(writer, reader, d) for d in datums]
    assert _ours(writer, reader, datums) == expected


def _record(*fields: tuple[str, Any], **defaults: Any) -> dict[str, Any]:
    out = []
    for name, kind in fields:
        field: dict[str, Any] = {"name": name, "type": kind}
        if name in defaults:
            field["default"] = defaults[name]
        out.append(field)
    return {"type": "record", "name": "R", "fields": out}


@pytest.mark.parametrize(
    ("writer_type", "reader_type", "value", "expected"),
    [
        ("int", "long", -5, -5),
        ("int", "float", 3, 3.0),
        ("int", "double", 2**31 - 1, 2147483647.0),
        ("long", "float", 2**40, float(2**40)),
        ("long", "double", -(2**53), float(-(2**53))),
        ("float", "double", 0.5, 0.5),
        ("string", "bytes", "ü", "ü".encode()),
        ("bytes", "string", "ü".encode(), "ü"),
        ("int", ["null", "long"], 9, 9),
        (["null", "int"], ["null", "long"], None, None),
        (["int", "null"], "long", 4, 4),
    ],
)
def test_promotions(writer_type: Any, reader_type: Any, value: Any, expected: Any) -> None:
    writer = _record(("v", writer_type))
    reader = _record(("v", reader_type))
    datum = _encode(writer, {"v": value})
    assert _ours(writer, reader, [datum]) == [{"v": expected}]
    assert _fastavro(writer, reader, datum) == {"v": expected}


def test_fields_added_with_defaults_removed_and_renamed_by_alias() -> None:
    writer = _record(("id", "long"), ("gone", "string"), ("old_name", "int"))
    reader = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "new_name", "type": "int", "aliases": ["old_name"]},
            {"name": "added", "type": ["null", "string"], "default": None},
            {"name": "score", "type": "double", "default": 2.5},
        ],
    }
    datum = _encode(writer, {"id": 1, "gone": "x" * 300, "old_name": 7})
    assert (
        _ours(writer, reader, [datum, datum])
        == [{"id": 1, "new_name": 7, "added": None, "score": 2.5}] * 2
    )


def test_defaults_of_logical_types_are_their_underlying_values() -> None:
    # fastavro leaves these defaults as they are written; the specification gives them
    # as the underlying value (the unscaled bytes, the day number...).
    writer = _record(("id", "int"))
    reader = _record(
        ("id", "int"),
        ("price", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}),
        ("day", {"type": "int", "logicalType": "date"}),
        ("at", {"type": "long", "logicalType": "timestamp-millis"}),
        price="\u0001\u0000",
        day=1,
        at=1500,
    )
    got = AvroPlan(json.dumps(writer), json.dumps(reader)).decode(
        pa.array([_encode(writer, {"id": 1})])
    )
    assert got.to_pylist() == [
        {
            "id": 1,
            "price": Decimal("2.56"),
            "day": datetime.date(1970, 1, 2),
            "at": datetime.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=datetime.timezone.utc),
        }
    ]


def test_skipped_fields_of_every_kind() -> None:
    skipped = [
        ("a", {"type": "array", "items": {"type": "map", "values": "string"}}),
        (
            "b",
            ["null", {"type": "record", "name": "S", "fields": [{"name": "x", "type": "float"}]}],
        ),
        ("c", {"type": "fixed", "name": "F", "size": 3}),
        ("d", {"type": "enum", "name": "E", "symbols": ["P", "Q"]}),
        ("e", ["int", "string", "null"]),
        ("f", "boolean"),
        ("g", {"type": "array", "items": "double"}),
    ]
    writer = _record(*skipped, ("kept", "string"))
    reader = _record(("kept", "string"))
    record = {
        "a": [{"k": "v"}, {}],
        "b": {"x": 1.5},
        "c": b"abc",
        "d": "Q",
        "e": "text",
        "f": True,
        "g": [1.0, 2.0],
        "kept": "yes",
    }
    assert _ours(writer, reader, [_encode(writer, record)]) == [{"kept": "yes"}]


def test_skips_blocks_by_their_byte_size() -> None:
    # An array of two strings in one block with a negative count and its size.
    writer = _record(("a", {"type": "array", "items": "string"}), ("k", "int"))
    reader = _record(("k", "int"))
    datum = bytes([0x03, 0x08, 0x02, ord("x"), 0x02, ord("y"), 0x00, 0x0A])
    assert _fastavro(writer, writer, datum) == {"a": ["x", "y"], "k": 5}
    assert _ours(writer, reader, [datum]) == [{"k": 5}]
    assert _ours(writer, writer, [datum]) == [{"a": ["x", "y"], "k": 5}]


def test_enum_symbols_map_by_name_and_fall_back_to_the_default() -> None:
    writer = _record(("e", {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}))
    reader = _record(
        ("e", {"type": "enum", "name": "E", "symbols": ["C", "A", "Z"], "default": "Z"})
    )
    datums = [_encode(writer, {"e": s}) for s in "ABC"]
    assert _ours(writer, reader, datums) == [{"e": "A"}, {"e": "Z"}, {"e": "C"}]


def test_an_enum_symbol_the_reader_lacks_without_default_fails_the_value() -> None:
    writer = _record(("e", {"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    reader = _record(("e", {"type": "enum", "name": "E", "symbols": ["A"]}))
    plan = AvroPlan(json.dumps(writer), json.dumps(reader))
    good, bad = _encode(writer, {"e": "A"}), _encode(writer, {"e": "B"})
    assert plan.decode(pa.array([good])).to_pylist() == [{"e": "A"}]
    with pytest.raises(SchemaDecodeError, match="row 1: an enum symbol") as info:
        plan.decode(pa.array([good, bad]))
    assert info.value.field == "e"


def test_a_null_for_a_field_that_cannot_be_null_fails_the_value() -> None:
    writer = _record(("v", ["null", "int"]))
    reader = _record(("v", "int"))
    plan = AvroPlan(json.dumps(writer), json.dumps(reader))
    values, errors = plan.decode_collect(
        pa.array([_encode(writer, {"v": 1}), _encode(writer, {"v": None})])
    )
    assert values.to_pylist() == [{"v": 1}, None]
    assert errors.to_pylist() == [None, "field v: a null value for a field that cannot be null"]


@pytest.mark.parametrize(
    ("writer", "reader", "text"),
    [
        (
            _record(("v", "long")),
            _record(("v", "int")),
            "field v: the writer's long cannot be read as int",
        ),
        (
            _record(("v", "string")),
            _record(("v", "long")),
            "the writer's string cannot be read as long",
        ),
        (
            _record(("v", "int")),
            _record(("v", "int"), ("w", "int")),
            "field w: the reader schema has a field",
        ),
        (
            _record(("v", "int")),
            _record(("v", "int"), ("w", "int"), w="seven"),
            'field w: the default "seven" does not fit',
        ),
        (
            _record(("f", {"type": "fixed", "name": "F", "size": 2})),
            _record(("f", {"type": "fixed", "name": "F", "size": 3})),
            "a fixed of 2 bytes cannot be read as one of 3",
        ),
    ],
)
def test_schemas_that_do_not_resolve_fail_when_planned(writer: Any, reader: Any, text: str) -> None:
    with pytest.raises(SchemaResolutionError, match=text) as info:
        AvroPlan(json.dumps(writer), json.dumps(reader), topic="t")
    assert str(info.value).startswith("topic t, field ")


def test_plans_are_cached_per_schema_pair() -> None:
    writer = json.dumps(_record(("v", "int")))
    reader = json.dumps(_record(("v", "long")))
    assert avro_plan(writer, reader) is avro_plan(writer, reader)
    assert avro_plan(writer) is not avro_plan(writer, reader)


def test_a_recursive_writer_is_refused() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "Node"]}],
    }
    with pytest.raises(UnmappableSchema, match="contains itself"):
        AvroPlan(json.dumps(node), json.dumps(_record(("v", "int"))))
