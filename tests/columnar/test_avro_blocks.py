"""Arrays and maps written in several blocks (some with a negative count and a byte size),
and inputs of every Arrow layout: sliced, chunked, large binary, strings.

fastavro writes an array as one block; other writers (Java's buffered encoders)
cut them into several, and may give a block's byte size. These datums are laid
out by hand from items fastavro encodes alone.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.values.avro.decode import AvroPlan
from pulsar_spark.columnar.values.errors import SchemaDecodeError

ITEMS: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "long": ("long", st.integers(-(2**63), 2**63 - 1)),
    "string": ("string", st.text(max_size=6)),
    "double": ("double", st.floats(allow_nan=False)),
    "boolean": ("boolean", st.booleans()),
    "fixed": ({"type": "fixed", "name": "F", "size": 3}, st.binary(min_size=3, max_size=3)),
    "record": (
        {
            "type": "record",
            "name": "P",
            "fields": [{"name": "x", "type": "float"}, {"name": "y", "type": "double"}],
        },
        st.builds(
            lambda x, y: {"x": x, "y": y},
            st.integers(-100, 100).map(float),
            st.floats(allow_nan=False),
        ),
    ),
    "nullable": (["null", "int"], st.none() | st.integers(-5, 5)),
}


def _long(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag > 0x7F:
        out.append(zigzag & 0x7F | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _item(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(json.dumps(schema))), value)
    return out.getvalue()


def _blocks(encoded: list[bytes], cuts: list[int], sized: list[bool]) -> bytes:
    """Items in blocks of ``cuts`` sizes (the rest in a last block), each with its byte
    size when ``sized``, then the zero count."""
    out = bytearray()
    at = 0
    sizes = [c for c in cuts if c] + [len(encoded)]
    for number, size in enumerate(sizes):
        chunk = encoded[at : at + size]
        at += len(chunk)
        if not chunk:
            continue
        body = b"".join(chunk)
        if sized[number % len(sized)]:
            out += _long(-len(chunk)) + _long(len(body)) + body
        else:
            out += _long(len(chunk)) + body
    return bytes(out + b"\x00")


@st.composite
def block_cases(draw: st.DrawFn) -> tuple[Any, list[bytes], list[Any]]:
    name = draw(st.sampled_from(sorted(ITEMS)))
    item, values = ITEMS[name]
    as_map = draw(st.booleans())
    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {
                "name": "a",
                "type": {"type": "map", "values": item}
                if as_map
                else {"type": "array", "items": item},
            },
            {"name": "after", "type": "int"},
        ],
    }
    rows, expected = [], []
    for _ in range(draw(st.integers(0, 6))):
        items = draw(st.lists(values, max_size=12))
        keys = draw(
            st.lists(st.text(max_size=3), min_size=len(items), max_size=len(items), unique=True)
        )
        encoded = [_item(item, v) for v in items]
        if as_map:
            encoded = [_item("string", k) + e for k, e in zip(keys, encoded, strict=True)]
        cuts = draw(st.lists(st.integers(0, 4), max_size=4))
        sized = draw(st.lists(st.booleans(), min_size=1, max_size=3))
        tail = draw(st.integers(-(2**31), 2**31 - 1))
        rows.append(_blocks(encoded, cuts, sized) + _long(tail))
        value = dict(zip(keys, items, strict=True)) if as_map else items
        expected.append({"a": value, "after": tail})
    return schema, rows, expected


@settings(max_examples=200, deadline=None)
@given(block_cases())
def test_blocks_read_as_the_items_they_hold(case: tuple[Any, list[bytes], list[Any]]) -> None:
    schema, rows, expected = case
    plan = AvroPlan(json.dumps(schema))
    column = plan.decode(pa.array(rows, pa.binary()))
    column.validate(full=True)
    got = column.to_pylist()
    if schema["fields"][0]["type"]["type"] == "map":
        got = [{"a": dict(r["a"]), "after": r["after"]} for r in got]
    assert got == expected
    # fastavro reads the same bytes the same way.
    parsed = fastavro.parse_schema(json.loads(json.dumps(schema)))
    assert [fastavro.schemaless_reader(io.BytesIO(r), parsed, None) for r in rows] == expected
    # Skipped (the reader drops the field), the blocks are jumped over by their sizes.
    reader = {"type": "record", "name": "R", "fields": [{"name": "after", "type": "int"}]}
    skipped = AvroPlan(json.dumps(schema), json.dumps(reader)).decode(pa.array(rows, pa.binary()))
    assert skipped.to_pylist() == [{"after": e["after"]} for e in expected]


def test_a_block_count_beyond_the_bytes_left_fails() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": {"type": "array", "items": "long"}}],
    }
    plan = AvroPlan(json.dumps(schema))
    with pytest.raises(SchemaDecodeError, match="a block of 1000000000 items in 2 bytes") as info:
        plan.decode(pa.array([b"\x02\x02\x00", _long(10**9) + b"\x02\x02"]))
    assert (info.value.row, info.value.field) == (1, "a")


def test_long_arrays_of_few_records() -> None:
    schema = {
        "type": "record",
        "name": "R",
        "fields": [{"name": "a", "type": {"type": "array", "items": "string"}}],
    }
    items = [str(i) for i in range(5000)]
    datum = _blocks([_item("string", s) for s in items], [1000, 3000], [False, True])
    got = AvroPlan(json.dumps(schema)).decode(pa.array([datum, b"\x00", datum]))
    assert got.to_pylist() == [{"a": items}, {"a": []}, {"a": items}]


SIMPLE = json.dumps(
    {
        "type": "record",
        "name": "R",
        "fields": [{"name": "s", "type": "string"}, {"name": "n", "type": "long"}],
    }
)
ROWS = [_item(json.loads(SIMPLE), {"s": f"v{i}", "n": i}) for i in range(10)]
EXPECTED = [{"s": f"v{i}", "n": i} for i in range(10)]


@pytest.mark.parametrize(
    "values",
    [
        pa.array(ROWS, pa.binary()).slice(3, 5),
        pa.array(ROWS, pa.large_binary()).slice(3, 5),
        pa.chunked_array([pa.array(ROWS[3:5]), pa.array(ROWS[5:8])]),
        pa.array([r.decode() for r in ROWS], pa.string()).slice(3, 5),  # ASCII datums
    ],
)
def test_inputs_of_every_layout(values: pa.Array | pa.ChunkedArray) -> None:
    assert AvroPlan(SIMPLE).decode(values).to_pylist() == EXPECTED[3:8]


def test_empty_inputs() -> None:
    plan = AvroPlan(SIMPLE)
    assert plan.decode(pa.array([], pa.binary())).to_pylist() == []
    assert plan.decode(pa.array([None, None], pa.binary())).to_pylist() == [None, None]
    column, errors = plan.decode_collect(pa.array([b""], pa.binary()))
    assert column.to_pylist() == [None]
    assert errors.to_pylist() == ["field s: a varint runs past the end of the value"]
