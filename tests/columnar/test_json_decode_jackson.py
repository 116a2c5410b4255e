"""JSON values whose dates and times are in Jackson's forms (what the Java client's JSON schema
and our encoder write) decoded columnar (:mod:`pulsar_spark.columnar.values.json.jackson`): the same
values as the value-by-value path, which batches of mixed forms still take."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from test_encode_json_time import JAVA, time_schema, time_table

from pulsar_spark.columnar.values.errors import SchemaDecodeError
from pulsar_spark.columnar.values.json.decode import JsonPlan
from pulsar_spark.columnar.values.json.encode import json_encoder
from pulsar_spark.columnar.values.json.iso_time import jackson_ticks
from pulsar_spark.columnar.values.json.jackson import integer_pattern, read_jackson

NANOS = 10**9
DAY = 86_400
#: Seconds of years 1 to 9999 (the years Python's datetime, the per-value path, takes).
FIRST, LAST = -62135596800, 253402300799
UNITS = {"ms": 10**3, "us": 10**6, "ns": NANOS}


@pytest.fixture
def columnar_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the batches decoded value by value (the fast path not taken)."""
    slow: list[int] = []
    per_value = JsonPlan._python

    def counted(self: JsonPlan, values: pa.Array, *args: Any) -> pa.Array:
        slow.append(len(values))
        return per_value(self, values, *args)

    monkeypatch.setattr(JsonPlan, "_python", counted)
    yield slow


def _record(fields: list[tuple[str, object]]) -> str:
    record = {
        "type": "record",
        "name": "R",
        "fields": [{"name": n, "type": ["null", t]} for n, t in fields],
    }
    return json.dumps(record)


def _plan(fields: list[tuple[str, object]]) -> JsonPlan:
    return JsonPlan(_record(fields))


def _logical(kind: str, logical: str) -> dict[str, str]:
    return {"type": kind, "logicalType": logical}


@settings(max_examples=60, deadline=None)
@given(st.data(), st.sampled_from(["ms", "us", "ns"]), st.integers(1, 40))
def test_random_values_our_encoder_writes_read_back_columnar(
    data: st.DataObject, unit: str, rows: int
) -> None:
    per = UNITS[unit]
    low, high = (FIRST, LAST) if unit != "ns" else (-(2**63) // NANOS + 1, 2**63 // NANOS - 2)
    ticks = data.draw(
        st.lists(st.one_of(st.none(), st.integers(low * per, high * per)), min_size=rows)
    )
    of_day = data.draw(st.lists(st.none() | st.integers(0, DAY * 10**6 - 1), min_size=rows))
    days = data.draw(st.lists(st.none() | st.integers(FIRST // DAY, LAST // DAY), min_size=rows))
    n = min(len(ticks), len(of_day), len(days))
    table = pa.table(
        {
            "at": pa.array(ticks[:n], pa.timestamp(unit, "UTC")),
            "local": pa.array(ticks[:n], pa.timestamp(unit)),
            "day": pa.array(days[:n], pa.date32()),
            "time": pa.array(of_day[:n], pa.time64("us")),
            "ms": pa.array([None if t is None else t // 1000 for t in of_day[:n]], pa.time32("ms")),
        }
    )
    logical = {"ms": "millis", "us": "micros", "ns": "nanos"}[unit]
    schema = [
        ("at", _logical("long", f"timestamp-{logical}")),
        ("local", _logical("long", f"local-timestamp-{logical}")),
        ("day", _logical("int", "date")),
        ("time", _logical("long", "time-micros")),
        ("ms", _logical("int", "time-millis")),
    ]
    plan = _plan(schema)
    payloads = json_encoder(pa.struct(list(table.schema)), _record(schema)).encode(table)
    storage = plan._read(payloads, plan.jackson_schema)
    assert storage is not None  # columnar, whole seconds included:
    assert read_jackson(storage, plan.type, payloads) is not None
    back = plan.decode(payloads)
    assert back.to_pylist() == table.to_pylist()
    assert back.type == pa.struct([pa.field(f.name, f.type) for f in table.schema])


def test_the_java_clients_texts_read_columnar(columnar_only: list[int]) -> None:
    moments = [m for m in JAVA if FIRST <= m[0] <= LAST]
    table = time_table(moments, "ns", "us")
    schema = time_schema("timestamp-nanos", "local-timestamp-nanos", "time-micros")
    payloads = pa.array([JAVA[m].encode() for m in moments], pa.binary())
    back = JsonPlan(schema).decode(payloads)
    for name in ("at", "local", "day", "time"):
        want = table.column(name).combine_chunks()
        assert back.field(name).cast(want.type).equals(want), name
    assert not columnar_only


#: One moment in each form a producer may write it, per field (t: 1704164645.678 s).
FORMS = {
    "at": ["1704164645678000", '"2024-01-02T03:04:05.678Z"', "1704164645.678000000"],
    "local": ["1704164645678", '"2024-01-02T03:04:05.678"', "[2024,1,2,3,4,5,678000000]"],
    "day": ["19724", '"2024-01-02"', "[2024,1,2]"],
    "time": ["11045678", '"03:04:05.678"', "[3,4,5,678000000]"],
}
MIXED = _plan(
    [
        ("at", _logical("long", "timestamp-micros")),
        ("local", _logical("long", "local-timestamp-millis")),
        ("day", _logical("int", "date")),
        ("time", _logical("int", "time-millis")),
    ]
)
WANT = {
    "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc),
    "local": dt.datetime(2024, 1, 2, 3, 4, 5, 678000),
    "day": dt.date(2024, 1, 2),
    "time": dt.time(3, 4, 5, 678000),
}


@settings(max_examples=100, deadline=None)
@given(st.lists(st.fixed_dictionaries({k: st.integers(0, 3) for k in FORMS}), min_size=1))
def test_batches_of_mixed_forms_read_the_same_values(picks: list[dict[str, int]]) -> None:
    """Numbers, ISO text, Jackson's forms and nulls, in any mix: the values of each form."""
    texts = [
        "{" + ",".join(f'"{k}":{FORMS[k][i]}' for k, i in pick.items() if i < 3) + "}"
        for pick in picks
    ]
    back = MIXED.decode(pa.array([t.encode() for t in texts], pa.binary())).to_pylist()
    for pick, row in zip(picks, back, strict=True):
        assert row == {k: WANT[k] if i < 3 else None for k, i in pick.items()}


@pytest.mark.parametrize(
    "integer",
    [
        '"at":1704164645000000',
        '"at" : -1704164645000000 ',
        '"\\u0061t":1704164645000000',
        '"\\u0061\\u0074":1704164645000000',
    ],
)
def test_integers_among_whole_second_decimals_are_the_schemas_ticks(integer: str) -> None:
    """1704164645.000000000 and 1704164645000000 parse to the same decimal: the integer is
    found in the text (its key in any JSON spelling) and read as microseconds."""
    texts = [
        '{"at":1704164645.000000000,"day":[2024,1,2]}',
        "{" + integer + ',"day":[2024,1,2]}',
        '{"at":0.0,"day":[1970,1,1]}',
    ]
    plan = _plan([("at", _logical("long", "timestamp-micros")), ("day", _logical("int", "date"))])
    back = plan.decode(pa.array([t.encode() for t in texts], pa.binary())).to_pylist()
    second = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    micros = abs(json.loads("{" + integer + "}").popitem()[1])
    assert micros == 1704164645000000
    sign = -1 if "-" in integer else 1
    assert [r["at"] for r in back] == [
        second,
        dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + sign * (second - _EPOCH_UTC),
        _EPOCH_UTC,
    ]


_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def test_the_integer_pattern_matches_keys_in_any_spelling() -> None:
    pattern = integer_pattern(["at", 'd"í/🙂'])
    texts = [
        b'{"at":1}',
        b'{"\\u0041t":1}',  # another key (A)
        '{"d\\"í\\/🙂":-2}'.encode(),
        b'{"d\\u0022\\u00ED/\\ud83d\\uDE42" :3}',
        b'{"at":1.5}',
        b'{"at":"1"}',
        b'{"x":{"at":7}}',  # any depth: the fast path is left when in doubt
    ]
    got = pa.compute.match_substring_regex(pa.array(texts, pa.binary()), pattern).to_pylist()
    assert got == [True, False, True, True, False, False, True]


def test_nested_records_and_lists_read_columnar(columnar_only: list[int]) -> None:
    inner = {
        "type": "record",
        "name": "In",
        "fields": [
            {"name": "at", "type": _logical("long", "timestamp-millis")},
            {"name": "days", "type": {"type": "array", "items": _logical("int", "date")}},
            {
                "name": "ats",
                "type": {"type": "array", "items": _logical("long", "timestamp-micros")},
            },
        ],
    }
    plan = _plan([("in", inner), ("list", {"type": "array", "items": "In"})])
    one = '{"at":1.500000000,"days":[[2024,2,29],[1,1,1]],"ats":[-1.999999999,2.5]}'
    texts = [f'{{"in":{one},"list":[{one},{one}]}}', '{"in":null}', "{}"]
    back = plan.decode(pa.array([t.encode() for t in texts], pa.binary())).to_pylist()
    value = {
        "at": _EPOCH_UTC + dt.timedelta(seconds=1.5),
        "days": [dt.date(2024, 2, 29), dt.date(1, 1, 1)],
        "ats": [
            _EPOCH_UTC - dt.timedelta(microseconds=1),
            _EPOCH_UTC + dt.timedelta(seconds=2.5),
        ],
    }
    empty = {"in": None, "list": None}
    assert back == [{"in": value, "list": [value, value]}, empty, empty]
    assert not columnar_only


@pytest.mark.parametrize(
    ("field", "logical", "bad"),
    [
        ("day", "date", "[2023,2,29]"),
        ("day", "date", "[2024,1]"),
        ("day", "date", "[10000,1,1]"),
        ("time", "time-millis", "[24,0]"),
        ("time", "time-millis", "[1,2,3,1000000000]"),
        ("local", "local-timestamp-micros", "[2024,1,2,3]"),
        ("local", "local-timestamp-micros", "[2024,1,2,3,60]"),
        ("local", "local-timestamp-micros", "[2024,1,2,3,4,null]"),
        ("at", "timestamp-nanos", "9300000000.000000000"),
    ],
)
def test_a_value_out_of_range_names_its_row(field: str, logical: str, bad: str) -> None:
    kind = "int" if logical in ("date", "time-millis") else "long"
    plan = _plan([(field, _logical(kind, logical))])
    good = {"day": "[2024,1,2]", "time": "[3,4]", "local": "[2024,1,2,3,4]", "at": "1.5"}[field]
    texts = [f'{{"{field}":{good}}}'] * 3 + [f'{{"{field}":{bad}}}']
    with pytest.raises(SchemaDecodeError, match=r"row 3") as info:
        plan.decode(pa.array([t.encode() for t in texts], pa.binary()))
    said = str(info.value)
    assert ("Jackson writes" in said and bad.split(",")[0] in said.replace(" ", "")) or (
        field == "at" and "too large" in said
    )
    column, errors = plan.decode_collect(pa.array([t.encode() for t in texts], pa.binary()))
    assert errors.to_pylist()[:3] == [None] * 3 and errors[3].as_py()
    assert column.to_pylist()[3] is None and column.null_count == 1


@pytest.mark.parametrize("text", ["-0.5", "-1.5", "1E-9", "1.20E-7", "-1.999999999", "0.0"])
def test_decimal_seconds_read_as_the_per_value_path_reads_them(
    text: str, columnar_only: list[int]
) -> None:
    for unit, logical in (("ms", "millis"), ("us", "micros"), ("ns", "nanos")):
        plan = _plan([("at", _logical("long", f"timestamp-{logical}"))])
        back = plan.decode(pa.array([f'{{"at":{text}}}'.encode()], pa.binary()))
        dtype = pa.timestamp(unit, "UTC")
        want = jackson_ticks(Decimal(text), dtype)
        assert back.field("at").cast(pa.int64()).to_pylist() == [want], unit
    assert not columnar_only


def test_a_plan_reads_numbers_after_jacksons_forms_and_back() -> None:
    plan = _plan([("at", _logical("long", "timestamp-micros")), ("day", _logical("int", "date"))])
    jackson = pa.array([b'{"at":1.000001000,"day":[1970,1,2]}'] * 2, pa.binary())
    numbers = pa.array([b'{"at":1000001,"day":1}'] * 2, pa.binary())
    want = [{"at": _EPOCH_UTC + dt.timedelta(microseconds=1000001), "day": dt.date(1970, 1, 2)}] * 2
    for batch in (numbers, jackson, jackson, numbers, jackson):
        assert plan.decode(batch).to_pylist() == want


def test_encoded_tables_of_every_unit_read_back(columnar_only: list[int]) -> None:
    moments = [(1704164645, 678000000), (-1, 999999000), (0, 0), (FIRST, 0), (LAST, 999000000)]
    for unit in ("ms", "us"):
        table = time_table(moments, unit, "ms" if unit == "ms" else "us")
        encoder = json_encoder(pa.struct(list(table.schema)))
        assert JsonPlan(encoder.schema).decode(encoder.encode(table)).to_pylist() == (
            table.to_pylist()
        )
    assert not columnar_only


def _per_value(plan: JsonPlan, values: pa.Array) -> tuple[pa.Array, dict[int, str]]:
    """What the value-by-value path makes of ``values`` (no nulls), and its errors."""
    errors: dict[int, str] = {}
    rows = np.arange(len(values))
    return plan._python(values, rows, errors, True), errors


_DECIMALS = st.builds(
    lambda sign, whole, digits: f"{sign}{whole}.{digits}",
    st.sampled_from(["", "-"]),
    st.integers(0, 9 * 10**9),
    st.text("0123456789", min_size=1, max_size=9),
) | st.builds(
    lambda sign, whole, digits, exp: f"{sign}{whole}.{digits}{exp}",
    st.sampled_from(["", "-"]),
    st.integers(0, 10**12),
    st.text("0123456789", min_size=1, max_size=12),
    st.sampled_from(["", "E-9", "E-3", "E+2", "e1"]),
)
_ANY = st.lists(st.integers(-2, 70) | st.sampled_from([1000, 999999999, 10**9, 2024, 9999]))
_DAYS = st.tuples(st.integers(1, 9999), st.integers(1, 12), st.integers(1, 28))
_CLOCK = st.tuples(
    st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), st.integers(0, 10**9 - 1)
)
_TIMES = st.builds(lambda c, n: list(c)[:n], _CLOCK, st.integers(2, 4))
_LOCALS = st.builds(lambda d, c, n: [*d, *c][:n], _DAYS, _CLOCK, st.integers(5, 7))
_VALID = st.tuples(_DECIMALS, _LOCALS, _DAYS.map(list), _TIMES)
_SOME = st.tuples(_DECIMALS, _LOCALS | _ANY, _DAYS.map(list) | _ANY, _TIMES | _ANY)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_VALID, min_size=1, max_size=12) | st.lists(_SOME, min_size=1, max_size=12),
    st.sampled_from(["millis", "micros", "nanos"]),
)
def test_any_jackson_shaped_batch_reads_as_the_per_value_path(
    rows: list[tuple[str, list[int], list[int], list[int]]], unit: str
) -> None:
    """Decimal seconds of any size and digits, arrays of any length and fields, valid or
    not: the plan gives the per-value path's values, or its errors."""
    plan = _plan(
        [
            ("at", _logical("long", f"timestamp-{unit}")),
            ("local", _logical("long", f"local-timestamp-{unit}")),
            ("day", _logical("int", "date")),
            ("time", _logical("long", "time-micros")),
        ]
    )
    texts = [
        json.dumps({"local": local, "day": day, "time": time})[:-1] + f', "at": {at}}}'
        for at, local, day, time in rows
    ]
    values = pa.array([t.encode() for t in texts], pa.binary())
    column, errors = plan.decode_collect(values)
    want, want_errors = _per_value(plan, values)
    event("columnar" if plan._jackson(values) is not None else "per value")
    if want_errors:  # a batch with a bad value goes per value: the same rows fail
        assert {i for i, e in enumerate(errors.to_pylist()) if e} == set(want_errors)
    assert column.equals(want)  # (years past 9999 too: no Python datetimes)
