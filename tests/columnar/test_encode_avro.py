"""The columnar Avro encoder against fastavro: random Arrow tables of every supported type
encoded at once equal ``fastavro.schemaless_writer`` row by row, and read back with
``schemaless_reader`` to the same values.

Hypothesis draws an Arrow struct type (strings, binary, booleans, int8 to int64,
floats, doubles, decimals, dates, timestamps with and without a time zone,
nested structs, lists, maps with string keys; any field nullable), rows for it,
and encodes the table with the schema :func:`avro_schema_json` derives. The only
bytes allowed to differ are decimals whose unscaled value is minus a power of
256 / 2: we write the fewest bytes as Java's ``BigInteger.toByteArray`` does,
fastavro one more (both read back the same number).
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.values.avro.decode import AvroPlan
from pulsar_spark.columnar.values.avro.encode import (
    AvroEncoder,
    avro_encoder,
    avro_schema_json,
    encode_avro,
    value_type,
)

UTC = datetime.timezone.utc
_WIDE = decimal.Context(prec=100)

_LEAVES: list[pa.DataType] = [
    pa.string(),
    pa.binary(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.float32(),
    pa.float64(),
    pa.decimal128(9, 2),
    pa.decimal128(38, 0),
    pa.date32(),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("us"),
]
_NAMES = st.text("abcdefgh_", min_size=1, max_size=6).map(lambda s: "f" + s)


def _types(depth: int = 2) -> st.SearchStrategy[pa.DataType]:
    leaf = st.sampled_from(_LEAVES)
    if depth == 0:
        return leaf
    inner = _types(depth - 1)
    return st.one_of(
        leaf,
        leaf,
        st.builds(lambda t, n: pa.list_(pa.field("item", t, nullable=n)), inner, st.booleans()),
        st.builds(lambda t: pa.map_(pa.string(), t), inner),
        _structs(inner),
    )


def _structs(inner: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[pa.DataType]:
    fields = st.lists(st.tuples(_NAMES, inner, st.booleans()), min_size=1, max_size=5)
    return fields.map(
        lambda fs: pa.struct(
            [pa.field(n, t, nullable=z) for n, t, z in {n: (n, t, z) for n, t, z in fs}.values()]
        )
    )


def _values(dtype: pa.DataType) -> st.SearchStrategy[Any]:
    t = pa.types
    if t.is_string(dtype):
        return st.text(max_size=12)
    if t.is_binary(dtype):
        return st.binary(max_size=12)
    if t.is_boolean(dtype):
        return st.booleans()
    if t.is_integer(dtype):
        bits = dtype.bit_width
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if t.is_float32(dtype):
        return st.floats(width=32, allow_nan=False)
    if t.is_float64(dtype):
        return st.floats(allow_nan=False)
    if t.is_decimal(dtype):
        top = 10**dtype.precision - 1
        edges = st.sampled_from([0, -1, -128, -32768, 127, 128, -(2**63), top, -top])
        return st.one_of(st.integers(-top, top), edges.filter(lambda i: abs(i) <= top)).map(
            lambda i: Decimal(i).scaleb(-dtype.scale, _WIDE)
        )
    if t.is_date(dtype):
        return st.dates()
    if t.is_timestamp(dtype):
        tz = st.just(UTC) if dtype.tz else st.none()
        return st.datetimes(timezones=tz)
    if t.is_list(dtype):
        item = _values(dtype.value_type)
        if dtype.value_field.nullable:
            item = st.none() | item
        return st.lists(item, max_size=4)
    if t.is_map(dtype):
        pairs = st.dictionaries(
            st.text(max_size=4), st.none() | _values(dtype.item_type), max_size=3
        )
        return pairs.map(lambda d: list(d.items()))
    assert t.is_struct(dtype)
    return st.fixed_dictionaries(
        {f.name: (st.none() | _values(f.type)) if f.nullable else _values(f.type) for f in dtype}
    )


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    dtype = draw(_structs(_types()))
    rows = draw(st.lists(_values(dtype), max_size=8))
    return pa.Table.from_pylist(rows, pa.schema(list(dtype)))


def _python(dtype: pa.DataType, value: Any) -> Any:
    """A value from ``to_pylist`` as fastavro takes it (maps as dicts)."""
    if value is None:
        return None
    t = pa.types
    if t.is_map(dtype):
        return {k: _python(dtype.item_type, v) for k, v in value}
    if t.is_list(dtype):
        return [_python(dtype.value_type, v) for v in value]
    if t.is_struct(dtype):
        return {f.name: _python(f.type, value[f.name]) for f in dtype}
    return value


def _fastavro_longer(dtype: pa.DataType, value: Any) -> bool:
    """Whether fastavro writes a decimal of this value in more bytes than Java does."""
    if value is None:
        return False
    t = pa.types
    if t.is_decimal(dtype):
        unscaled = int(value.scaleb(dtype.scale, _WIDE))
        java = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
        return java != (abs(unscaled).bit_length() + 8) // 8
    if t.is_map(dtype):
        return any(_fastavro_longer(dtype.item_type, v) for _, v in value)
    if t.is_list(dtype):
        return any(_fastavro_longer(dtype.value_type, v) for v in value)
    if t.is_struct(dtype):
        return any(_fastavro_longer(f.type, value[f.name]) for f in dtype)
    return False


def _fastavro(schema: Any, row: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, schema, row)
    return buf.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_random_tables_encode_as_fastavro_writes_them(table: pa.Table) -> None:
    dtype = value_type(table)
    encoder = avro_encoder(dtype)
    schema = fastavro.parse_schema(json.loads(encoder.schema))
    payloads = encoder.encode(table)
    assert payloads.null_count == 0
    assert len(payloads) == table.num_rows
    for row, got in zip(table.to_pylist(), payloads.to_pylist(), strict=True):
        expected = _python(dtype, row)
        if not _fastavro_longer(dtype, row):
            assert got == _fastavro(schema, expected)
        assert fastavro.schemaless_reader(io.BytesIO(got), schema) == expected


@settings(max_examples=30, deadline=None)
@given(tables(), st.data())
def test_slices_and_chunks_encode_as_the_whole(table: pa.Table, data: st.DataObject) -> None:
    whole = encode_avro(table).to_pylist()
    start = data.draw(st.integers(0, table.num_rows))
    part = table.slice(start)
    assert encode_avro(part).to_pylist() == whole[start:]
    chunked = pa.concat_tables([table.slice(0, start), table.slice(start)])
    assert encode_avro(chunked).to_pylist() == whole


def test_null_rows_are_null_payloads() -> None:
    dtype = pa.struct([pa.field("a", pa.int64(), False), pa.field("b", pa.string(), False)])
    values = pa.array([{"a": 1, "b": "x"}, None, {"a": -1, "b": ""}], dtype)
    out = AvroEncoder(dtype).encode(values)
    assert out.to_pylist() == [b"\x02\x02x", None, b"\x01\x00"]
    assert out.is_null().to_pylist() == [False, True, False]


def test_decimals_take_the_fewest_bytes_as_java_writes_them() -> None:
    dtype = pa.struct([pa.field("d", pa.decimal128(20, 0), nullable=False)])
    unscaled = [0, 1, -1, 127, 128, -128, -129, 255, 2**63, -(2**63), 10**20 - 1]
    table = pa.table({"d": pa.array([Decimal(u) for u in unscaled], pa.decimal128(20, 0))})
    out = AvroEncoder(dtype).encode(table).to_pylist()
    for u, got in zip(unscaled, out, strict=True):
        java = u.to_bytes(((u if u >= 0 else ~u).bit_length() + 8) // 8, "big", signed=True)
        assert got == bytes([2 * len(java)]) + java


def test_floats_keep_nan_and_signed_zero_bytes() -> None:
    table = pa.table({"d": [float("nan"), -0.0, float("inf")]})
    schema = fastavro.parse_schema(json.loads(avro_schema_json(value_type(table))))
    for got, value in zip(
        encode_avro(table).to_pylist(), table.column("d").to_pylist(), strict=True
    ):
        assert got == _fastavro(schema, {"d": value})


def test_other_arrow_types_convert_to_the_schema() -> None:
    table = pa.table(
        {
            "ns": pa.array([1_500, -1_500], pa.timestamp("ns", tz="UTC")),
            "ms": pa.array([3, -3], pa.timestamp("ms")),
            "t32": pa.array([1_000, 2], pa.time32("ms")),
            "t64": pa.array([1_999, 5], pa.time64("ns")),
            "d64": pa.array([86_400_000 * 3, -1], pa.date64()),
            "u32": pa.array([2**32 - 1, 0], pa.uint32()),
            "dict": pa.array(["a", "b"]).dictionary_encode(),
            "big": pa.array([Decimal("1.5"), Decimal("-2")], pa.decimal256(40, 1)),
            "fsb": pa.array([b"ab", b"cd"], pa.binary(2)),
            "ll": pa.array([[1], []], pa.large_list(pa.int32())),
            "fsl": pa.array([[1, 2], [3, 4]], pa.list_(pa.int8(), 2)),
            "ls": pa.array(["x", "yz"], pa.large_string()),
        }
    )
    dtype = value_type(table)
    schema_text = avro_schema_json(dtype)
    schema = fastavro.parse_schema(json.loads(schema_text))
    rows = [
        {
            "ns": datetime.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),  # 1,500 ns -> 1 us
            "ms": datetime.datetime(1970, 1, 1, 0, 0, 0, 3_000),
            "t32": datetime.time(0, 0, 1),
            "t64": datetime.time(0, 0, 0, 1),  # 1,999 ns -> 1 us
            "d64": datetime.date(1970, 1, 4),
            "u32": 2**32 - 1,
            "dict": "a",
            "big": Decimal("1.5"),
            "fsb": b"ab",
            "ll": [1],
            "fsl": [1, 2],
            "ls": "x",
        },
        {
            "ns": datetime.datetime(1969, 12, 31, 23, 59, 59, 999_998, tzinfo=UTC),  # floor
            "ms": datetime.datetime(1969, 12, 31, 23, 59, 59, 997_000),
            "t32": datetime.time(0, 0, 0, 2_000),
            "t64": datetime.time(0, 0, 0, 0),
            "d64": datetime.date(1969, 12, 31),
            "u32": 0,
            "dict": "b",
            "big": Decimal("-2.0"),
            "fsb": b"cd",
            "ll": [],
            "fsl": [3, 4],
            "ls": "yz",
        },
    ]
    out = encode_avro(table).to_pylist()
    assert out == [_fastavro(schema, row) for row in rows]


def test_the_decoder_reads_back_what_the_encoder_writes() -> None:
    table = pa.table(
        {
            "s": ["a", None, "ccc"],
            "n": pa.array([1, 2, None], pa.int64()),
            "st": pa.array([{"x": 1.5}, None, {"x": None}]),
            "l": pa.array([[1, None], [], None], pa.list_(pa.int32())),
            "ts": pa.array([1, None, -1], pa.timestamp("us", tz="UTC")),
        }
    )
    encoder = avro_encoder(value_type(table))
    decoded = AvroPlan(encoder.schema).decode(encoder.encode(table))
    assert decoded.to_pylist() == table.to_pylist()


@pytest.mark.parametrize("rows", [0, 1])
def test_empty_and_single_row_tables(rows: int) -> None:
    table = pa.table(
        {
            "a": pa.array([7] * rows, pa.int64()),
            "m": pa.array([[]] * rows, pa.map_(pa.string(), pa.int64())),
        }
    )
    assert encode_avro(table).to_pylist() == [b"\x02\x0e\x02\x00"] * rows
