"""The columnar Avro decoder against fastavro: random schemas, random records, and broken bytes.

Hypothesis draws a record schema (nested records, arrays, maps, unions with
null, enums, fixed, decimals, the date/time logical types, uuid), records
for it, encodes them with fastavro's ``schemaless_writer`` and checks that
:class:`AvroPlan` decodes all of them at once into what fastavro's
``schemaless_reader`` reads back, one by one. Truncated values must raise
:class:`SchemaDecodeError` (every strict prefix of a datum is too short);
bit flips must raise it or decode, never raise anything else; and the
collect mode keeps the good rows while nulling the broken ones.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import uuid
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.values.avro.decode import AvroPlan
from pulsar_spark.columnar.values.errors import SchemaDecodeError

UTC = datetime.timezone.utc
_LEAVES = [
    "null",
    "boolean",
    "int",
    "long",
    "float",
    "double",
    "bytes",
    "string",
    "date",
    "time-millis",
    "time-micros",
    "timestamp-millis",
    "timestamp-micros",
    "local-timestamp-millis",
    "local-timestamp-micros",
    "uuid",
    "decimal",
    "fixed",
    "fixed-decimal",
    "enum",
]
_LOGICAL_BASE = {
    "date": "int",
    "time-millis": "int",
    "time-micros": "long",
    "timestamp-millis": "long",
    "timestamp-micros": "long",
    "local-timestamp-millis": "long",
    "local-timestamp-micros": "long",
    "uuid": "string",
}
field_names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)


class _Names:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"


def _leaf(draw: st.DrawFn, names: _Names) -> Any:
    kind = draw(st.sampled_from(_LEAVES))
    if kind in _LOGICAL_BASE:
        return {"type": _LOGICAL_BASE[kind], "logicalType": kind}
    if kind == "decimal":
        precision = draw(st.integers(1, 40))
        scale = draw(st.integers(0, precision))
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale}
    if kind == "fixed":
        return {"type": "fixed", "name": names("F"), "size": draw(st.integers(0, 20))}
    if kind == "fixed-decimal":
        size = draw(st.integers(1, 20))
        most = len(str(2 ** (8 * size - 1) - 1)) - 1
        precision = draw(st.integers(1, most))
        return {
            "type": "fixed",
            "name": names("D"),
            "size": size,
            "logicalType": "decimal",
            "precision": precision,
            "scale": draw(st.integers(0, precision)),
        }
    if kind == "enum":
        count = draw(st.integers(1, 5))
        return {"type": "enum", "name": names("E"), "symbols": [f"S{i}" for i in range(count)]}
    return kind


def _schema(draw: st.DrawFn, names: _Names, depth: int) -> Any:
    choice = draw(st.integers(0, 9)) if depth < 2 else 0
    if choice <= 4:
        return _leaf(draw, names)
    if choice == 5:
        return draw_record(draw, names, depth + 1)
    if choice == 6:
        return {"type": "array", "items": _schema(draw, names, depth + 1)}
    if choice == 7:
        return {"type": "map", "values": _schema(draw, names, depth + 1)}
    inner = _schema(draw, names, depth + 1)
    if inner == "null" or isinstance(inner, list):
        return inner
    return ["null", inner] if choice == 8 else [inner, "null"]


def draw_record(draw: st.DrawFn, names: _Names, depth: int = 0) -> dict[str, Any]:
    fnames = draw(st.lists(field_names, min_size=1, max_size=6, unique=True))
    return {
        "type": "record",
        "name": names("R"),
        "fields": [{"name": n, "type": _schema(draw, names, depth)} for n in fnames],
    }


@st.composite
def record_schemas(draw: st.DrawFn) -> dict[str, Any]:
    return draw_record(draw, _Names())


def avro_value(draw: st.DrawFn, schema: Any) -> Any:
    if isinstance(schema, list):
        branch = draw(st.sampled_from(schema))
        return avro_value(draw, branch)
    if isinstance(schema, str):
        schema = {"type": schema}
    kind, logical = schema["type"], schema.get("logicalType")
    if logical == "decimal":
        precision, scale = schema["precision"], schema["scale"]
        unscaled = draw(st.integers(-(10**precision) + 1, 10**precision - 1))
        return Decimal(unscaled).scaleb(-scale, decimal.Context(prec=100))
    simple = {
        "date": st.dates(),
        "time-millis": st.times().map(
            lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000)
        ),
        "time-micros": st.times(),
        "timestamp-millis": st.datetimes(timezones=st.just(UTC)),
        "timestamp-micros": st.datetimes(timezones=st.just(UTC)),
        "local-timestamp-millis": st.datetimes(),
        "local-timestamp-micros": st.datetimes(),
        "uuid": st.uuids().map(str),
    }
    if logical in simple:
        return draw(simple[logical])
    plain = {
        "null": st.none(),
        "boolean": st.booleans(),
        "int": st.integers(-(2**31), 2**31 - 1),
        "long": st.integers(-(2**63), 2**63 - 1),
        "float": st.floats(width=32, allow_nan=False),
        "double": st.floats(allow_nan=False),
        "bytes": st.binary(max_size=20),
        "string": st.text(max_size=12),
    }
    if kind in plain:
        return draw(plain[kind])
    if kind == "fixed":
        return draw(st.binary(min_size=schema["size"], max_size=schema["size"]))
    if kind == "enum":
        return draw(st.sampled_from(schema["symbols"]))
    if kind == "array":
        return [avro_value(draw, schema["items"]) for _ in range(draw(st.integers(0, 4)))]
    if kind == "map":
        keys = draw(st.lists(st.text(max_size=5), max_size=4, unique=True))
        return {k: avro_value(draw, schema["values"]) for k in keys}
    assert kind == "record", schema
    return {f["name"]: avro_value(draw, f["type"]) for f in schema["fields"]}


@st.composite
def schema_and_records(draw: st.DrawFn) -> tuple[dict[str, Any], list[bytes]]:
    schema = draw(record_schemas())
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    records = [avro_value(draw, schema) for _ in range(draw(st.integers(0, 12)))]
    datums = []
    for record in records:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        datums.append(out.getvalue())
    return schema, datums


def reference(schema: dict[str, Any], datum: bytes) -> Any:
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    return normal(fastavro.schemaless_reader(io.BytesIO(datum), parsed, None))


def normal(value: Any) -> Any:
    """fastavro's and Arrow's Python values in one form: maps as dicts, uuids as text."""
    if isinstance(value, dict):
        return {k: normal(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {k: normal(v) for k, v in value}
        return [normal(v) for v in value]
    if isinstance(value, uuid.UUID):
        return str(value)
    return value


def _maps_as_dicts(value: Any, dtype: pa.DataType) -> Any:
    """Arrow map values (lists of pairs) as dicts, guided by the type."""
    if value is None:
        return None
    if pa.types.is_map(dtype):
        return {k: _maps_as_dicts(v, dtype.item_type) for k, v in value}
    if pa.types.is_struct(dtype):
        return {f.name: _maps_as_dicts(value[f.name], f.type) for f in dtype}
    if pa.types.is_list(dtype):
        return [_maps_as_dicts(v, dtype.value_type) for v in value]
    return value


def ours(column: pa.Array) -> list[Any]:
    return [_maps_as_dicts(v, column.type) for v in column.to_pylist()]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_and_records())
def test_decodes_as_fastavro_reads(case: tuple[dict[str, Any], list[bytes]]) -> None:
    schema, datums = case
    plan = AvroPlan(json.dumps(schema))
    column = plan.decode(pa.array([*datums, None], pa.binary()))
    column.validate(full=True)
    assert column.type == plan.type
    expected = [normal(reference(schema, d)) for d in datums] + [None]
    assert ours(column) == expected


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_and_records(), st.data())
def test_every_truncation_raises_a_decode_error(
    case: tuple[dict[str, Any], list[bytes]], data: st.DataObject
) -> None:
    schema, datums = case
    if not datums:
        return
    plan = AvroPlan(json.dumps(schema))
    row = data.draw(st.integers(0, len(datums) - 1))
    datum = datums[row]
    for cut in range(len(datum)):
        broken = [*datums[:row], datum[:cut], *datums[row + 1 :]]
        with pytest.raises(SchemaDecodeError) as info:
            plan.decode(pa.array(broken, pa.binary()))
        assert info.value.row <= row


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_and_records(), st.data())
def test_bit_flips_decode_or_raise_a_decode_error(
    case: tuple[dict[str, Any], list[bytes]], data: st.DataObject
) -> None:
    schema, datums = case
    datums = [d for d in datums if d]
    if not datums:
        return
    flips = data.draw(
        st.lists(
            st.tuples(st.integers(0, len(datums) - 1), st.integers(0, 10**6), st.integers(0, 7)),
            min_size=1,
            max_size=4,
        )
    )
    broken = [bytearray(d) for d in datums]
    for row, at, bit in flips:
        broken[row][at % len(broken[row])] ^= 1 << bit
    values = pa.array([bytes(b) for b in broken], pa.binary())
    plan = AvroPlan(json.dumps(schema))
    try:
        column = plan.decode(values)
    except SchemaDecodeError:
        pass
    else:
        column.validate()
    # The collect mode never raises, and keeps the rows that decode as they decode alone.
    collected, errors = plan.decode_collect(values)
    assert len(collected) == len(errors) == len(broken)
    for row, datum in enumerate(broken):
        alone = pa.array([bytes(datum)], pa.binary())
        try:
            expected = plan.decode(alone)
        except SchemaDecodeError as exc:
            assert errors[row].as_py() == exc.text()
            assert not collected[row].is_valid
        else:
            assert errors[row].as_py() is None
            # Arrow's text: dates beyond Python's and NaNs compare as they print.
            assert collected.slice(row, 1).to_string() == expected.to_string()


def test_an_error_names_row_field_and_topic() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "a", "type": "long"},
            {
                "name": "inner",
                "type": {
                    "type": "record",
                    "name": "I",
                    "fields": [{"name": "s", "type": "string"}],
                },
            },
        ],
    }
    plan = AvroPlan(json.dumps(schema), topic="persistent://public/default/t")
    good = b"\x02\x04hi"
    with pytest.raises(SchemaDecodeError) as info:
        plan.decode(pa.array([good, good, b"\x02\x08hi"], pa.binary()))
    err = info.value
    assert (err.row, err.field, err.topic) == (2, "inner.s", "persistent://public/default/t")
    assert str(err).startswith("topic persistent://public/default/t, field inner.s: row 2: ")
    named = err.at(message_id="1:2:-1:-1", schema_version=3)
    assert "message 1:2:-1:-1 (schema version 3)" in str(named)


def test_enums_as_dictionaries_of_the_reader_symbols() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}}
        ],
    }
    plan = AvroPlan(json.dumps(schema), enums="dictionary")
    column = plan.decode(pa.array([b"\x04", b"\x00", None]))
    enum = column.field("e")
    assert enum.type == pa.dictionary(pa.int32(), pa.string())
    assert enum.dictionary.to_pylist() == ["A", "B", "C"]
    assert column.to_pylist() == [{"e": "C"}, {"e": "A"}, None]


def test_the_python_clients_avro_schema() -> None:
    from pulsar.schema import AvroSchema, Boolean, Double, Long, Record, String

    class Order(Record):
        id = Long()
        item = String()
        price = Double()
        paid = Boolean()

    schema = AvroSchema(Order)
    orders = [
        Order(id=1, item="book", price=9.5, paid=True),
        Order(id=None, item=None, price=None, paid=None),
    ]
    plan = AvroPlan(schema.schema_info().schema())  # pretty-printed, fields ["null", T]
    got = plan.decode(pa.array([schema.encode(o) for o in orders])).to_pylist()
    assert got == [
        {"id": 1, "item": "book", "price": 9.5, "paid": True},
        {"id": None, "item": None, "price": None, "paid": False},  # Boolean() is not nullable
    ]
