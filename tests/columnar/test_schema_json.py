"""JSON schema values decoded into Arrow: as the Avro decoder reads the same records.

Random Avro schemas and records (the strategies of ``test_avro_decode``) are
written both as Avro datums and as JSON objects the way Jackson writes them
(numbers for logical types, base64 for bytes, nulls sometimes left out,
sometimes pretty-printed); :class:`JsonPlan` must read the JSON into what
:class:`AvroPlan` reads from the datums. Bad values fail naming their row.
"""

from __future__ import annotations

import base64
import datetime
import io
import json
import math
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulsar.schema import Array, Double, Integer, JsonSchema, Record, String
from test_avro_decode import avro_value, ours, record_schemas

from pulsar_spark.columnar.values.arrow_types import arrow_type
from pulsar_spark.columnar.values.avro.decode import AvroPlan
from pulsar_spark.columnar.values.errors import SchemaDecodeError
from pulsar_spark.columnar.values.json.decode import JsonPlan, decode_json
from pulsar_spark.protocol.schemas.info import SchemaInfo

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def _jackson(value: Any, schema: Any, omit: bool) -> str:
    """``value`` of Avro ``schema`` as JSON text, the way Jackson writes a POJO."""
    if isinstance(schema, list):
        if value is None:
            return "null"
        branch = next(b for b in schema if b != "null")
        return _jackson(value, branch, omit)
    if isinstance(schema, str):
        schema = {"type": schema}
    kind, logical = schema["type"], schema.get("logicalType")
    if value is None:
        return "null"
    if logical == "decimal":
        return str(value)
    if logical == "date":
        return str((value - datetime.date(1970, 1, 1)).days)
    if logical in ("time-millis", "time-micros"):
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond
        return str(micros // 1000 if logical == "time-millis" else micros)
    if logical in (
        "timestamp-millis",
        "timestamp-micros",
        "local-timestamp-millis",
        "local-timestamp-micros",
    ):
        start = EPOCH if value.tzinfo else EPOCH.replace(tzinfo=None)
        micros = (value - start) // datetime.timedelta(microseconds=1)
        return str(micros // 1000 if "millis" in logical else micros)
    if kind in ("bytes", "fixed"):
        return json.dumps(base64.b64encode(value).decode())
    if kind == "array":
        return "[" + ",".join(_jackson(v, schema["items"], omit) for v in value) + "]"
    if kind == "map":
        items = (f"{json.dumps(k)}:{_jackson(v, schema['values'], omit)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if kind == "record":
        parts = [
            f"{json.dumps(f['name'])}:{_jackson(value[f['name']], f['type'], omit)}"
            for f in schema["fields"]
            if not (omit and value[f["name"]] is None)
        ]
        return "{" + ",\n ".join(parts) + "}"
    return json.dumps(value)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_schemas(), st.data(), st.booleans())
def test_reads_what_the_avro_decoder_reads(schema: Any, data: st.DataObject, omit: bool) -> None:
    records = [avro_value(data.draw, schema) for _ in range(data.draw(st.integers(0, 8)))]
    records = [r for r in records if _finite(r)]
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    datums = []
    for record in records:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, record)
        datums.append(out.getvalue())
    texts = [_jackson(r, schema, omit).encode() for r in records]
    plan = JsonPlan(json.dumps(schema))
    got = plan.decode(pa.array([*texts, None], pa.binary()))
    got.validate(full=True)
    assert got.type == plan.type
    avro = AvroPlan(json.dumps(schema))
    expected = avro.decode(pa.array([*datums, None], pa.binary()))
    assert ours(got) == ours(expected)
    typed, _ = decode_json(avro.type, pa.array([*texts, None], pa.binary()))
    typed.validate(full=True)
    assert typed.type == avro.type
    assert ours(typed) == ours(expected)


class Point(Record):
    x = Integer()
    label = String()
    score = Double()
    tags = Array(String())


def test_the_python_clients_json_schema() -> None:
    schema = JsonSchema(Point)
    points = [
        Point(x=1, label="a", score=0.5, tags=["t"]),
        Point(x=None, label="ü", score=None, tags=[]),
    ]
    values = [schema.encode(p) for p in points]
    assert b"\n" in values[0]  # pretty-printed
    plan = JsonPlan(schema.schema_info().schema())
    assert plan.decode(pa.array(values)).to_pylist() == [
        {"x": 1, "label": "a", "score": 0.5, "tags": ["t"]},
        {"x": None, "label": "ü", "score": None, "tags": []},
    ]


SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {
                "name": "price",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)


def test_jackson_layout_missing_nulls_and_unknown_fields() -> None:
    values = [
        b'{"id":1,"at":1500,"price":12.5,"note":"n"}',
        b'{"id":2,"at":0,"price":0,"extra":{"x":[1]}}',
        None,
    ]
    assert JsonPlan(SCHEMA).decode(pa.array(values)).to_pylist() == [
        {
            "id": 1,
            "at": EPOCH + datetime.timedelta(milliseconds=1500),
            "price": Decimal("12.50"),
            "note": "n",
        },
        {"id": 2, "at": EPOCH, "price": Decimal("0.00"), "note": None},
        None,
    ]


@pytest.mark.parametrize(
    ("bad", "text"),
    [
        (b'{"id":1', "not JSON"),
        (b"", "not JSON"),
        (b"  ", "not JSON"),
        (b"[1]", "a JSON list where an object is expected"),
        (b'{"id":"one","at":0,"price":1}', "does not fit the schema"),
        (b'{"id":1,"at":0,"price":1}{"id":2}', "not JSON"),
    ],
)
def test_a_value_that_does_not_decode_names_its_row(bad: bytes, text: str) -> None:
    good = b'{"id":1,"at":0,"price":1}'
    values = pa.array([good, good, bad, good, None, bad])
    with pytest.raises(SchemaDecodeError, match=text) as info:
        JsonPlan(SCHEMA, topic="t").decode(values)
    assert info.value.row == 2
    column, errors = JsonPlan(SCHEMA).decode_collect(values)
    assert column.is_null().to_pylist() == [False, False, True, False, True, True]
    assert [e is not None for e in errors.to_pylist()] == [False, False, True, False, False, True]


def test_maps_and_bytes_decode_through_python() -> None:
    schema = json.dumps(
        {
            "type": "record",
            "name": "M",
            "fields": [
                {"name": "m", "type": {"type": "map", "values": "long"}},
                {"name": "b", "type": "bytes"},
            ],
        }
    )
    plan = JsonPlan(schema)
    assert not plan.columnar
    values = pa.array([b'{"m":{"a":1,"b":2},"b":"aGk="}', b'{"m":{},"b":"not base64!"}'])
    with pytest.raises(SchemaDecodeError, match=r"row 1: .*base64"):
        plan.decode(values)
    assert plan.decode_collect(values)[0].to_pylist() == [
        {"m": [("a", 1), ("b", 2)], "b": b"hi"},
        None,
    ]


def test_decode_json_gives_the_mapped_type_itself() -> None:
    dtype = arrow_type(SchemaInfo.json(SCHEMA))
    values = pa.array([b'{"id":1,"at":0,"price":1}', b"x", None])
    column, errors = decode_json(dtype, values, collect=True)
    assert column.type == dtype
    assert column.to_pylist()[0] == {"id": 1, "at": EPOCH, "price": Decimal("1.00"), "note": None}
    assert column.is_null().to_pylist() == [False, True, True]
    assert errors is not None and errors[1].as_py().startswith("not JSON")
    with pytest.raises(SchemaDecodeError, match="row 1"):
        decode_json(dtype, values)
