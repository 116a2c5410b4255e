"""Encoding into a topic's existing Avro schema: the official Python client's ``AvroSchema``
records, defaults for fields the data lacks, unions, enums, fixed, and the errors that name
every field that does not fit (raised before anything is encoded)."""

from __future__ import annotations

import datetime
import io
import json
import pickle
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from pulsar.schema import (
    Array,
    AvroSchema,
    Boolean,
    Bytes,
    Double,
    Float,
    Integer,
    Long,
    Map,
    Record,
    String,
)

from pulsar_spark.columnar.values.avro.encode import AvroEncoder, encode_avro, value_type
from pulsar_spark.columnar.values.encode_errors import SchemaMismatch
from pulsar_spark.protocol.errors import PulsarError


class Inner(Record):
    x = Double()


class Example(Record):
    a = String()
    b = Integer()
    c = Array(String())
    m = Map(Long())
    f = Float()
    bo = Boolean(required=True)
    by = Bytes()
    inner = Inner()


def _fastavro(schema: Any, row: Any) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), row)
    return buf.getvalue()


def test_records_encode_as_the_official_clients_avro_schema() -> None:
    schema = AvroSchema(Example)
    rows = [
        {
            "a": "x",
            "b": 3,
            "c": ["q", ""],
            "m": [("k", 5)],
            "f": 1.5,
            "bo": True,
            "by": b"z",
            "inner": {"x": 2.0},
        },
        {"a": None, "b": None, "c": None, "m": None, "f": None, "bo": False, "by": None},
        {"a": "é", "b": -7, "c": [], "m": [], "f": -0.25, "bo": True, "by": b"", "inner": {}},
    ]
    dtype = pa.struct(
        [
            ("by", pa.binary()),
            ("a", pa.string()),
            ("b", pa.int32()),
            ("c", pa.list_(pa.string())),
            ("m", pa.map_(pa.string(), pa.int64())),
            ("f", pa.float32()),
            ("bo", pa.bool_()),
            ("inner", pa.struct([("x", pa.float64())])),
        ]
    )
    values = pa.array([{**r, "inner": r.get("inner")} for r in rows], dtype)
    out = AvroEncoder(dtype, schema.schema_info().schema()).encode(values)
    for row, got in zip(rows, out.to_pylist(), strict=True):
        inner = row.get("inner")
        record = Example(
            **{k: dict(v) if k == "m" and v is not None else v for k, v in row.items()},
        )
        record.inner = None if inner is None else Inner(**inner)
        assert got == schema.encode(record)
        assert schema.decode(got).a == row["a"]


_ENUM = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
_INNER = {"type": "record", "name": "S", "fields": [{"name": "q", "type": "double"}]}
_FIXED_DECIMAL = {
    "type": "fixed",
    "name": "D",
    "size": 5,
    "logicalType": "decimal",
    "precision": 9,
    "scale": 2,
}
_INT_MAP = pa.map_(pa.int32(), pa.int32())


def test_fields_the_data_lacks_take_the_schemas_defaults() -> None:
    writer = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "n", "type": "int", "default": 42},
            {"name": "s", "type": ["null", "string"], "default": None},
            {"name": "t", "type": ["string", "null"], "default": "dflt"},
            {"name": "e", "type": _ENUM, "default": "B"},
            {"name": "r", "type": _INNER, "default": {"q": 1.5}},
            {"name": "l", "type": {"type": "array", "items": "int"}, "default": [1, 2]},
            {"name": "by", "type": "bytes", "default": "\u00ff\u0000"},
        ],
    }  # fmt: skip
    table = pa.table({"id": pa.array([1, -1], pa.int64())})
    out = encode_avro(table, json.dumps(writer)).to_pylist()
    defaults = {"n": 42, "s": None, "t": "dflt", "e": "B", "r": {"q": 1.5}, "l": [1, 2]}
    for i, got in zip([1, -1], out, strict=True):
        assert got == _fastavro(writer, {"id": i, **defaults, "by": b"\xff\x00"})


def test_unions_enums_and_fixed() -> None:
    writer = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "u", "type": ["null", "int", "string"]},
            {"name": "v", "type": ["string", "null"]},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}},
            {"name": "x", "type": {"type": "fixed", "name": "F", "size": 3}},
            {"name": "dec", "type": _FIXED_DECIMAL},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        ],
    }  # fmt: skip
    table = pa.table(
        {
            "u": ["one", None],
            "v": ["x", None],
            "e": pa.array(["C", "A"]).dictionary_encode(),
            "x": [b"abc", b"\x00\x01\x02"],
            "dec": pa.array([Decimal("-1.5"), Decimal("1234567.89")], pa.decimal128(9, 2)),
            "ts": pa.array([1_234_567, -1], pa.timestamp("us", tz="UTC")),
            "day": pa.array([datetime.date(2024, 2, 29), datetime.date(1, 1, 1)]),
        }
    )
    out = encode_avro(table, json.dumps(writer)).to_pylist()
    rows = table.to_pylist()
    rows[0]["ts"] = datetime.datetime(1970, 1, 1, 0, 0, 1, 234_000, tzinfo=datetime.timezone.utc)
    rows[1]["ts"] = datetime.datetime(
        1969, 12, 31, 23, 59, 59, 999_000, tzinfo=datetime.timezone.utc
    )
    assert out == [_fastavro(writer, r) for r in rows]
    assert out[0][:2] == b"\x04\x06"  # branch 2 (string), then its length


def _mismatch(values: pa.Table | pa.Array, writer: object) -> SchemaMismatch:
    with pytest.raises(SchemaMismatch) as info:
        AvroEncoder(value_type(values), json.dumps(writer), topic="persistent://t/n/x").encode(
            values
        )
    return info.value


_RECORD = {
    "type": "record",
    "name": "R",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "address",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "A",
                    "fields": [{"name": "city", "type": "string"}, {"name": "zip", "type": "int"}],
                },
            ],
        },
    ],
}


def test_every_field_that_does_not_fit_is_named() -> None:
    table = pa.table(
        {
            "id": pa.array(["1"]),  # a string for a long
            "tags": pa.array([[1]]),  # int64 items for strings
            "extra": pa.array([1]),  # not in the schema
            "address": pa.array([{"city": "x", "zip": 2**40}]),  # int64 for an int
            # name: missing, without a default
        }
    )
    error = _mismatch(table, _RECORD)
    assert error.fields == ["extra", "id", "name", "tags[]", "address.zip"]
    text = str(error)
    assert "persistent://t/n/x" in text
    assert "AVRO" in text
    assert "extra: not a field of R" in text
    assert "name: missing from the data, and the schema gives no default" in text
    assert "a column of type string does not fit long" in text
    assert isinstance(error, PulsarError)
    assert isinstance(error, ValueError)
    assert not error.retriable


def test_a_mismatch_raises_before_anything_is_encoded() -> None:
    with pytest.raises(SchemaMismatch):
        AvroEncoder(pa.struct([("id", pa.string())]), json.dumps(_RECORD))


@pytest.mark.parametrize(
    ("column", "writer_type", "field", "words"),
    [
        (pa.array([1, None], pa.int64()), "long", "v", "1 null value but the schema has no null"),
        (pa.array(["A", "Z"]), {"type": "enum", "name": "E", "symbols": ["A"]}, "v", "'Z'"),
        (pa.array([b"ab"]), {"type": "fixed", "name": "F", "size": 3}, "v", "2 bytes"),
        (
            pa.array([Decimal("123.45")], pa.decimal128(5, 2)),
            {"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 2},
            "v",
            "does not fit decimal128(3, 2)",
        ),
        (
            pa.array([[1, None]], pa.list_(pa.int32())),
            {"type": "array", "items": "int"},
            "v[]",
            "null",
        ),
    ],
)
def test_values_that_do_not_fit_name_their_field(
    column: pa.Array, writer_type: object, field: str, words: str
) -> None:
    writer = {"type": "record", "name": "R", "fields": [{"name": "v", "type": writer_type}]}
    error = _mismatch(pa.table({"v": column}), writer)
    assert error.fields == [field]
    assert words in str(error)
    assert "persistent://t/n/x" in str(error)


@pytest.mark.parametrize(
    ("column", "writer_type", "words"),
    [
        (
            pa.array([1], pa.timestamp("us")),
            {"type": "long", "logicalType": "timestamp-micros"},
            "the schema's timestamps have a time zone",
        ),
        (
            pa.array([1], pa.timestamp("us", tz="UTC")),
            {"type": "long", "logicalType": "local-timestamp-micros"},
            "the schema's timestamps have no time zone",
        ),
        (pa.array([[(1, 2)]], _INT_MAP), {"type": "map", "values": "int"}, "keys are strings"),
        (pa.array([None], pa.null()), "string", "only null values"),
        (pa.array([1.5]), "float", "does not fit float"),
        (pa.array([b"abcd"], pa.binary(4)), {"type": "fixed", "name": "F", "size": 3}, "not 3"),
        (pa.array([1]), ["null", "string", "boolean"], "no branch fits"),
    ],
)  # fmt: skip
def test_types_that_do_not_fit(column: pa.Array, writer_type: object, words: str) -> None:
    writer = {"type": "record", "name": "R", "fields": [{"name": "v", "type": writer_type}]}
    error = _mismatch(pa.table({"v": column}), writer)
    assert error.fields == ["v"]
    assert words in str(error)


def test_the_error_survives_pickling() -> None:
    error = _mismatch(pa.table({"x": [1]}), _RECORD)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is SchemaMismatch
    assert str(again) == str(error)
    assert again.fields == error.fields


def test_a_nullable_field_without_nulls_fits_a_schema_without_null() -> None:
    table = pa.table({"id": pa.array([5], pa.int64()), "name": ["n"], "tags": [["t"]]})
    writer = {**_RECORD, "fields": [*_RECORD["fields"][:3]]}  # type: ignore[misc]
    out = encode_avro(table, json.dumps(writer)).to_pylist()
    assert out == [_fastavro(writer, {"id": 5, "name": "n", "tags": ["t"]})]
