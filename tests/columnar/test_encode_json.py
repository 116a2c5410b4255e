"""JSON payloads: random Arrow tables give one JSON object per row that parses to the
table's values (null fields left out, dates and times as Jackson writes java.time values,
bytes as Base64), escapes as Jackson writes them, and the official client's ``JsonSchema``
reads them."""

from __future__ import annotations

import base64
import datetime
import json
import math
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsar.schema import Array, Boolean, Double, Integer, JsonSchema, Long, Map, Record, String

from pulsar_spark.columnar.values.encode_errors import SchemaMismatch
from pulsar_spark.columnar.values.json.decode import JsonPlan
from pulsar_spark.columnar.values.json.encode import JsonEncoder, encode_json, json_encoder

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)

_LEAVES: list[pa.DataType] = [
    pa.string(),
    pa.binary(),
    pa.bool_(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(12, 3),
    pa.date32(),
    pa.timestamp("us", tz="UTC"),
]
_NAMES = st.sampled_from(["a", "b", "c", "é", 'q"', "d e"])


def _types(depth: int) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(_LEAVES)
    if depth == 0:
        return leaf
    inner = _types(depth - 1)
    return st.one_of(
        leaf,
        leaf,
        inner.map(pa.list_),
        inner.map(lambda t: pa.map_(pa.string(), t)),
        _structs(inner),
    )


def _structs(inner: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    fields = st.dictionaries(_NAMES, st.tuples(inner, st.booleans()), min_size=1, max_size=4)
    return fields.map(lambda fs: pa.struct([pa.field(n, t, z) for n, (t, z) in fs.items()]))


def _values(dtype: pa.DataType) -> st.SearchStrategy[Any]:
    t = pa.types
    if t.is_string(dtype):
        return st.text(max_size=8)
    if t.is_binary(dtype):
        return st.binary(max_size=8)
    if t.is_boolean(dtype):
        return st.booleans()
    if t.is_integer(dtype):
        bits = dtype.bit_width
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if t.is_float32(dtype):
        return st.floats(width=32)
    if t.is_float64(dtype):
        return st.floats()
    if t.is_decimal(dtype):
        return st.integers(-(10**12) + 1, 10**12 - 1).map(lambda i: Decimal(i).scaleb(-3))
    if t.is_date(dtype):
        return st.dates()
    if t.is_timestamp(dtype):
        return st.datetimes(timezones=st.just(UTC))
    if t.is_list(dtype):
        return st.lists(st.none() | _values(dtype.value_type), max_size=3)
    if t.is_map(dtype):
        pairs = st.dictionaries(
            st.text(max_size=3), st.none() | _values(dtype.item_type), max_size=3
        )
        return pairs.map(lambda d: list(d.items()))
    return st.fixed_dictionaries(
        {f.name: (st.none() | _values(f.type)) if f.nullable else _values(f.type) for f in dtype}
    )


def _expected(dtype: pa.DataType, value: Any) -> Any:
    """What the JSON text of a value parses to (floats compared apart)."""
    t = pa.types
    if value is None:
        return None
    if t.is_struct(dtype):
        return {
            f.name: _expected(f.type, value[f.name]) for f in dtype if value[f.name] is not None
        }
    if t.is_map(dtype):
        return {k: _expected(dtype.item_type, v) for k, v in value}
    if t.is_list(dtype):
        return [_expected(dtype.value_type, v) for v in value]
    if t.is_binary(dtype):
        return base64.b64encode(value).decode()
    if t.is_date(dtype):
        return [value.year, value.month, value.day]  # Jackson's LocalDate
    if t.is_timestamp(dtype):
        # Jackson's Instant: the epoch second, a dot, the nanoseconds (0.0 at the epoch)
        seconds, micros = divmod((value - EPOCH) // datetime.timedelta(microseconds=1), 10**6)
        return Decimal(f"{seconds}.{micros:06d}000")
    if t.is_float32(dtype):
        return _Float(value, np.float32)
    if t.is_float64(dtype):
        return _Float(value, np.float64)
    return value


class _Float:
    """A float that equals the JSON number read back as the column's width."""

    def __init__(self, value: float, width: type) -> None:
        self.value = value
        self.width = width

    def __eq__(self, other: object) -> bool:
        # NaN and infinities are the strings Jackson writes: "NaN", "Infinity", "-Infinity".
        finite = math.isfinite(self.value)
        if isinstance(other, str):
            return (
                not finite
                and other in {"NaN", "Infinity", "-Infinity"}
                and (
                    math.isnan(self.value) == (other == "NaN")
                    and (other == "NaN" or (self.value > 0) == (other == "Infinity"))
                )
            )
        if not finite or not isinstance(other, int | float | Decimal):
            return False
        back = self.width(float(other))
        return bool(back == self.width(self.value))

    def __repr__(self) -> str:
        return repr(self.value)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    dtype = draw(_structs(_types(2)))
    rows = draw(st.lists(_values(dtype), max_size=6))
    return pa.Table.from_pylist(rows, pa.schema(list(dtype)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_random_tables_give_json_objects_of_their_values(table: pa.Table) -> None:
    dtype = pa.struct(list(table.schema))
    payloads = json_encoder(dtype).encode(table)
    assert payloads.null_count == 0
    for row, payload in zip(table.to_pylist(), payloads.to_pylist(), strict=True):
        text = payload.decode()
        got = json.loads(text, parse_float=Decimal, parse_constant=lambda c: float(c))
        assert got == _expected(dtype, row)
        order = [f.name for f in dtype if row[f.name] is not None]
        assert list(got) == order


def test_escapes_as_jackson_writes_them() -> None:
    table = pa.table({"s": ['a"b\\c', "\n\t\r\b\f\x01\x1f", "é€😀/", ""]})
    out = [p.decode() for p in encode_json(table).to_pylist()]
    assert out == [
        '{"s":"a\\"b\\\\c"}',
        '{"s":"\\n\\t\\r\\b\\f\\u0001\\u001F"}',
        '{"s":"é€😀/"}',
        '{"s":""}',
    ]
    assert [json.loads(o)["s"] for o in out] == table.column("s").to_pylist()


def test_non_finite_floats_and_nulls() -> None:
    table = pa.table(
        {
            "a": pa.array([None, None, None], pa.int64()),
            "d": [float("nan"), float("inf"), float("-inf")],
            "n": pa.array([None, None, None], pa.null()),
            "l": [[None, 1.5], None, []],
        }
    )
    out = [p.decode() for p in encode_json(table).to_pylist()]
    assert out == [
        '{"d":"NaN","l":[null,1.5]}',
        '{"d":"Infinity"}',
        '{"d":"-Infinity","l":[]}',
    ]


def test_null_rows_are_null_payloads_and_empty_objects_stay() -> None:
    dtype = pa.struct([("a", pa.int64())])
    values = pa.array([None, {"a": None}, {"a": 1}], dtype)
    assert JsonEncoder(dtype).encode(values).to_pylist() == [None, b"{}", b'{"a":1}']


class Inner(Record):
    x = Double()


class Example(Record):
    s = String()
    i = Integer()
    n = Long()
    b = Boolean(required=True)
    tags = Array(String())
    attrs = Map(Integer())
    inner = Inner()


def test_the_official_json_schema_reads_what_we_write() -> None:
    schema = JsonSchema(Example)
    table = pa.table(
        {
            "s": ["x", None],
            "i": pa.array([1, None], pa.int32()),
            "n": pa.array([2**40, -1], pa.int64()),
            "b": [True, False],
            "tags": [["a", "b"], None],
            "attrs": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int32())),
            "inner": [{"x": 0.5}, None],
        }
    )
    dtype = pa.struct(list(table.schema))
    out = JsonEncoder(dtype, schema.schema_info().schema()).encode(table).to_pylist()
    first, second = (schema.decode(p) for p in out)
    assert (first.s, first.i, first.n, first.b, first.tags) == ("x", 1, 2**40, True, ["a", "b"])
    assert first.attrs == {"k": 1}
    assert first.inner.x == 0.5
    assert (second.s, second.i, second.n, second.b, second.attrs) == (None, None, -1, False, {})


def test_the_topic_schema_orders_fields_and_converts_units() -> None:
    writer = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "missing", "type": "int", "default": 3},
            {"name": "x", "type": {"type": "fixed", "name": "F", "size": 2}},
        ],
    }
    table = pa.table(
        {
            "x": [b"\x00\xff"],
            "e": ["B"],
            "ts": pa.array([1_500_000], pa.timestamp("us", tz="UTC")),
        }
    )
    out = encode_json(table, json.dumps(writer)).to_pylist()
    assert out == [b'{"ts":1.500000000,"e":"B","x":"AP8="}']  # an Instant, as Jackson writes it
    with pytest.raises(SchemaMismatch, match="'C' is not a symbol"):
        encode_json(table.set_column(1, "e", pa.array(["C"])), json.dumps(writer))


def test_a_mismatch_names_the_fields_and_the_json_schema() -> None:
    writer = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]}
    table = pa.table({"a": ["x"], "b": [1]})
    with pytest.raises(SchemaMismatch) as info:
        JsonEncoder(pa.struct(list(table.schema)), json.dumps(writer), topic="t1")
    assert info.value.fields == ["b", "a"]
    assert "JSON schema" in str(info.value)
    assert "topic t1" in str(info.value)


def test_the_json_decoder_reads_back_what_the_encoder_writes() -> None:
    table = pa.table(
        {
            "s": ["a", None, 'q"\n'],
            "n": pa.array([1, 2, None], pa.int64()),
            "d": [0.5, None, -1e300],
            "st": pa.array([{"x": 1.5}, None, {"x": None}]),
            "l": pa.array([[1, None], [], None], pa.list_(pa.int32())),
            "ts": pa.array([1, None, -1], pa.timestamp("us", tz="UTC")),
            "day": pa.array([0, 19_000, None], pa.date32()),
        }
    )
    encoder = json_encoder(pa.struct(list(table.schema)))
    decoded = JsonPlan(encoder.schema).decode(encoder.encode(table))
    assert decoded.to_pylist() == table.to_pylist()
