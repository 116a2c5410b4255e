"""The schema mapping, type by type: Pulsar schemas to Arrow types and Arrow types to Avro."""

from __future__ import annotations

import json
import re
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from pulsar_spark.columnar.values.arrow_types import arrow_type, primitive_schema_type
from pulsar_spark.columnar.values.avro.arrow_types import avro_arrow_type, avro_schema_for
from pulsar_spark.columnar.values.avro.schema import parse_avro
from pulsar_spark.columnar.values.errors import UnmappableSchema
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, key_value_schema
from pulsar_spark.protocol.schemas.types import SchemaType

T = SchemaType


@pytest.mark.parametrize(
    ("kind", "dtype"),
    [
        (T.NONE, pa.binary()),
        (T.BYTES, pa.binary()),
        (T.STRING, pa.string()),
        (T.BOOLEAN, pa.bool_()),
        (T.INT8, pa.int8()),
        (T.INT16, pa.int16()),
        (T.INT32, pa.int32()),
        (T.INT64, pa.int64()),
        (T.FLOAT, pa.float32()),
        (T.DOUBLE, pa.float64()),
        (T.DATE, pa.date32()),
        (T.TIME, pa.time32("ms")),
        (T.TIMESTAMP, pa.timestamp("ms", tz="UTC")),
        (T.INSTANT, pa.timestamp("us", tz="UTC")),
        (T.LOCAL_DATE, pa.date32()),
        (T.LOCAL_TIME, pa.time64("ns")),
        (T.LOCAL_DATE_TIME, pa.timestamp("us")),
    ],
)
def test_primitives(kind: SchemaType, dtype: pa.DataType) -> None:
    assert arrow_type(SchemaInfo.primitive(kind)) == dtype


def _field(kind: Any) -> pa.DataType:
    schema = {"type": "record", "name": "R", "fields": [{"name": "f", "type": kind}]}
    return arrow_type(SchemaInfo.avro(json.dumps(schema))).field("f")


@pytest.mark.parametrize(
    ("avro", "dtype", "nullable"),
    [
        ("null", pa.null(), True),
        ("boolean", pa.bool_(), False),
        ("int", pa.int32(), False),
        ("long", pa.int64(), False),
        ("float", pa.float32(), False),
        ("double", pa.float64(), False),
        ("bytes", pa.binary(), False),
        ("string", pa.string(), False),
        (["null", "string"], pa.string(), True),
        (["long", "null"], pa.int64(), True),
        (["double"], pa.float64(), False),
        (["null"], pa.null(), True),
        ({"type": "enum", "name": "E", "symbols": ["A"]}, pa.string(), False),
        ({"type": "fixed", "name": "F", "size": 4}, pa.binary(), False),
        (
            {"type": "array", "items": ["null", "int"]},
            pa.list_(pa.field("item", pa.int32())),
            False,
        ),
        (
            {"type": "map", "values": "long"},
            pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False)),
            False,
        ),
        (
            {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]},
            pa.struct([pa.field("x", pa.int32(), nullable=False)]),
            False,
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 4},
            pa.decimal128(38, 4),
            False,
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 39, "scale": 0},
            pa.decimal256(39, 0),
            False,
        ),
        (
            {
                "type": "fixed",
                "name": "D",
                "size": 8,
                "logicalType": "decimal",
                "precision": 18,
                "scale": 2,
            },
            pa.decimal128(18, 2),
            False,
        ),
        ({"type": "int", "logicalType": "date"}, pa.date32(), False),
        ({"type": "int", "logicalType": "time-millis"}, pa.time32("ms"), False),
        ({"type": "long", "logicalType": "time-micros"}, pa.time64("us"), False),
        ({"type": "long", "logicalType": "timestamp-millis"}, pa.timestamp("ms", tz="UTC"), False),
        ({"type": "long", "logicalType": "timestamp-micros"}, pa.timestamp("us", tz="UTC"), False),
        ({"type": "long", "logicalType": "timestamp-nanos"}, pa.timestamp("ns", tz="UTC"), False),
        ({"type": "long", "logicalType": "local-timestamp-millis"}, pa.timestamp("ms"), False),
        ({"type": "long", "logicalType": "local-timestamp-micros"}, pa.timestamp("us"), False),
        ({"type": "string", "logicalType": "uuid"}, pa.string(), False),
        ({"type": "fixed", "name": "U", "size": 16, "logicalType": "uuid"}, pa.binary(), False),
        # Logical types that do not fit their type are ignored, as the spec asks.
        ({"type": "string", "logicalType": "date"}, pa.string(), False),
        (
            {"type": "fixed", "name": "X", "size": 1, "logicalType": "decimal", "precision": 9},
            pa.binary(),
            False,
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 2, "scale": 3},
            pa.binary(),
            False,
        ),
    ],
)
def test_avro_types(avro: Any, dtype: pa.DataType, nullable: bool) -> None:
    field = _field(avro)
    assert (field.type, field.nullable) == (dtype, nullable)


def test_json_schemas_map_their_avro_schema() -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "a", "type": ["null", "int"]}]}
    assert arrow_type(SchemaInfo.json(json.dumps(schema))) == pa.struct([pa.field("a", pa.int32())])


def test_enums_as_dictionaries() -> None:
    schema = SchemaInfo.avro(json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]}))
    assert arrow_type(schema, enums="dictionary") == pa.dictionary(pa.int32(), pa.string())


def test_named_types_are_found_by_full_and_short_names() -> None:
    schema = {
        "type": "record",
        "name": "Outer",
        "namespace": "com.example",
        "fields": [
            {"name": "a", "type": {"type": "fixed", "name": "Id", "size": 2}},
            {"name": "b", "type": "Id"},
            {"name": "c", "type": "com.example.Id"},
            {"name": "d", "type": {"type": "record", "name": "In", "namespace": "x", "fields": []}},
            {"name": "e", "type": "x.In"},
        ],
    }
    got = arrow_type(SchemaInfo.avro(json.dumps(schema)))
    assert [f.type for f in got] == [pa.binary()] * 3 + [pa.struct([])] * 2


def test_key_value_halves() -> None:
    info = key_value_schema(
        SchemaInfo.primitive(T.STRING),
        SchemaInfo.avro('{"type":"record","name":"V","fields":[{"name":"n","type":"long"}]}'),
        KeyValueEncoding.SEPARATED,
    )
    assert arrow_type(info) == pa.struct(
        [("key", pa.string()), ("value", pa.struct([pa.field("n", pa.int64(), nullable=False)]))]
    )


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        (
            {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]},
            "topic persistent://p/n/t, field u: a union of several non-null types (int, string)",
        ),
        (
            {
                "type": "record",
                "name": "R",
                "fields": [
                    {
                        "name": "outer",
                        "type": {
                            "type": "array",
                            "items": {
                                "type": "map",
                                "values": [
                                    "null",
                                    "long",
                                    {"type": "enum", "name": "E", "symbols": ["A"]},
                                ],
                            },
                        },
                    }
                ],
            },
            "field outer[]{}: a union of several non-null types (long, E)",
        ),
        (
            {
                "type": "record",
                "name": "Node",
                "fields": [{"name": "next", "type": ["null", "Node"]}],
            },
            "field next: record Node contains itself",
        ),
        (
            {"type": "record", "name": "R", "fields": [{"name": "a", "type": "Nope"}]},
            "field a: unknown type 'Nope'",
        ),
        ({"type": "record", "name": "R", "fields": [{"type": "int"}]}, "a field without a name"),
        ({"type": "enum", "name": "E", "symbols": ["A", "A"]}, "repeats a symbol"),
    ],
)
def test_unmappable_schemas_name_the_field_and_topic(schema: Any, text: str) -> None:
    with pytest.raises(UnmappableSchema, match=re.escape(text)):
        arrow_type(SchemaInfo.avro(json.dumps(schema)), topic="persistent://p/n/t")


@pytest.mark.parametrize("kind", [T.AUTO_CONSUME])
def test_types_without_a_mapping(kind: SchemaType) -> None:
    with pytest.raises(
        UnmappableSchema, match=f"topic t: {kind.name} schemas have no Arrow mapping"
    ):
        arrow_type(SchemaInfo(kind, "", b"{}"), topic="t")


def test_schema_data_that_is_not_json() -> None:
    with pytest.raises(UnmappableSchema, match="the Avro schema is not JSON"):
        arrow_type(SchemaInfo(T.AVRO, "", b"{not json"))


# -- Arrow -> Avro --------------------------------------------------------------------------

WRITE_TYPES = pa.struct(
    [
        pa.field("b", pa.bool_(), nullable=False),
        pa.field("i8", pa.int8()),
        pa.field("i32", pa.int32(), nullable=False),
        pa.field("i64", pa.int64()),
        pa.field("f", pa.float32()),
        pa.field("d", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("bin", pa.binary()),
        pa.field("dec", pa.decimal128(12, 3)),
        pa.field("day", pa.date32()),
        pa.field("t_ms", pa.time32("ms")),
        pa.field("t_us", pa.time64("us")),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("ts_ms", pa.timestamp("ms", tz="UTC")),
        pa.field("local", pa.timestamp("us")),
        pa.field("tags", pa.list_(pa.string())),
        pa.field("attrs", pa.map_(pa.string(), pa.int64())),
        pa.field("inner", pa.struct([pa.field("x", pa.float64(), nullable=False)])),
        pa.field("inner2", pa.struct([pa.field("x", pa.string())])),
    ]
)


def test_arrow_types_become_avro_schemas_that_map_back() -> None:
    schema = avro_schema_for(WRITE_TYPES, name="Row", namespace="org.x")
    fastavro.parse_schema(json.loads(json.dumps(schema)))  # a valid schema (names do not clash)
    back = avro_arrow_type(parse_avro(json.dumps(schema)))
    expected = pa.struct([f.with_type(pa.int32()) if f.name == "i8" else f for f in WRITE_TYPES])
    assert back == expected


def test_nullable_fields_default_to_null() -> None:
    schema: Any = avro_schema_for(pa.struct([pa.field("a", pa.int64())]))
    assert schema == {
        "type": "record",
        "name": "topLevelRecord",
        "fields": [{"name": "a", "type": ["null", "long"], "default": None}],
    }


@pytest.mark.parametrize(
    "dtype",
    [pa.map_(pa.int32(), pa.int32()), pa.uint64(), pa.dense_union([pa.field("a", pa.int8())])],
)
def test_arrow_types_avro_cannot_hold(dtype: pa.DataType) -> None:
    with pytest.raises(UnmappableSchema, match="field v"):
        avro_schema_for(pa.struct([pa.field("v", dtype)]))


@pytest.mark.parametrize(
    ("dtype", "kind"),
    [
        (pa.string(), T.STRING),
        (pa.large_string(), T.STRING),
        (pa.binary(), T.BYTES),
        (pa.bool_(), T.BOOLEAN),
        (pa.int8(), T.INT8),
        (pa.int16(), T.INT16),
        (pa.int32(), T.INT32),
        (pa.int64(), T.INT64),
        (pa.float32(), T.FLOAT),
        (pa.float64(), T.DOUBLE),
        (pa.date32(), T.LOCAL_DATE),
        (pa.time64("us"), T.LOCAL_TIME),
        (pa.timestamp("us", tz="UTC"), T.INSTANT),
        (pa.timestamp("us"), T.LOCAL_DATE_TIME),
        (pa.struct([]), None),
        (pa.list_(pa.int8()), None),
    ],
)
def test_primitive_schema_types_of_single_columns(
    dtype: pa.DataType, kind: SchemaType | None
) -> None:
    assert primitive_schema_type(dtype) is kind
