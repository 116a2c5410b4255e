"""ISO-8601 text in JSON values' date, time and timestamp fields (columnar/iso_time and the
JSON decoder's fallback to it), the forms Jackson gives java.time values (the Java client's JSON
schema), and NaN and infinities in float fields as the Java and Python clients write them."""

from __future__ import annotations

import datetime as dt
import json
import math
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.columnar.values.errors import SchemaDecodeError
from pulsar_spark.columnar.values.json.decode import JsonPlan
from pulsar_spark.columnar.values.json.iso_time import iso_ticks, jackson_ticks

UTC_US = pa.timestamp("us", tz="UTC")
EPOCH = dt.datetime(1970, 1, 1)


@given(st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)))
def test_isoformat_of_any_datetime_reads_back(value: dt.datetime) -> None:
    micros = (value - EPOCH) // dt.timedelta(microseconds=1)
    assert iso_ticks(value.isoformat(), pa.timestamp("us")) == micros
    assert iso_ticks(value.isoformat() + "Z", UTC_US) == micros
    assert iso_ticks(value.isoformat(), UTC_US) == micros  # no zone: UTC
    assert iso_ticks(value.isoformat(sep=" ") + "+00:00", UTC_US) == micros
    assert iso_ticks(value.isoformat(), pa.timestamp("ms")) == micros // 1000  # rounded down
    shifted = value + dt.timedelta(hours=5, minutes=30)
    assert iso_ticks(shifted.isoformat() + "+05:30", UTC_US) == micros
    assert iso_ticks(value.date().isoformat(), pa.date32()) == (value.date() - EPOCH.date()).days
    of_day = (value - value.replace(hour=0, minute=0, second=0, microsecond=0)) // dt.timedelta(
        microseconds=1
    )
    assert iso_ticks(value.time().isoformat(), pa.time64("us")) == of_day
    assert iso_ticks(value.time().isoformat(), pa.time32("ms")) == of_day // 1000


def test_nanosecond_fractions_round_down() -> None:
    assert iso_ticks("1969-12-31T23:59:59.999999999Z", UTC_US) == -1
    assert iso_ticks("1970-01-01T00:00:00.000000001Z", pa.timestamp("ns", tz="UTC")) == 1
    assert iso_ticks("23:59:59.9999", pa.time32("ms")) == 86_399_999


@pytest.mark.parametrize(
    ("text", "dtype", "reason"),
    [
        ("2024-01-02T03:04:05Z", pa.timestamp("us"), "a time with a zone"),
        ("2024-13-01", pa.date32(), "month must be in 1..12"),
        ("yesterday", UTC_US, "not an ISO-8601 timestamp"),
        ("2024-01-02T03:04:05+19:00", UTC_US, "zone offset out of range"),
        ("25:00", pa.time32("ms"), "not an ISO-8601 time"),
    ],
)
def test_bad_text_is_refused_quoting_it(text: str, dtype: pa.DataType, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as refused:
        iso_ticks(text, dtype)
    assert repr(text) in str(refused.value)


EVENT = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "n", "type": "int"},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    ],
}


def test_json_values_with_iso_text_and_numbers_in_one_batch() -> None:
    plan = JsonPlan(json.dumps(EVENT))
    values = pa.array(
        [
            b'{"n": 1, "at": 1700000000123, "day": 1}',
            b'{"n": 2, "at": "2024-01-02T03:04:05.678+01:00", "day": "1969-12-31"}',
            None,
            b'{"n": 3, "at": null, "day": 0}',
        ]
    )
    got = plan.decode(values).to_pylist()
    utc = dt.timezone.utc
    assert [None if r is None else (r["n"], r["at"], r["day"]) for r in got] == [
        (1, dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=utc), dt.date(1970, 1, 2)),
        (2, dt.datetime(2024, 1, 2, 2, 4, 5, 678000, tzinfo=utc), dt.date(1969, 12, 31)),
        None,
        (3, None, dt.date(1970, 1, 1)),
    ]
    bad = pa.array([b'{"n": 1, "at": 5, "day": 1}', b'{"n": 2, "at": "soon", "day": 1}'])
    with pytest.raises(SchemaDecodeError, match="'soon'") as failed:
        plan.decode(bad)
    assert failed.value.row == 1
    column, errors = plan.decode_collect(bad)
    assert column.to_pylist()[1] is None
    assert errors.to_pylist()[0] is None
    assert "not an ISO-8601 timestamp" in errors.to_pylist()[1]


MICROS = {
    "type": "record",
    "name": "M",
    "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
    ],
}


@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
            st.booleans(),
        ),
        min_size=1,
        max_size=30,
    )
)
def test_numbers_and_iso_text_decode_alike(rows: list[tuple[dt.datetime, bool]]) -> None:
    """Each value's times as numbers or as ISO-8601 text (chosen per row): the same column."""
    plan = JsonPlan(json.dumps(MICROS))
    values = []
    for when, as_text in rows:
        micros = (when - EPOCH) // dt.timedelta(microseconds=1)
        millis = micros // 1000
        if as_text:
            stamp = when.replace(microsecond=when.microsecond // 1000 * 1000)
            record = {"at": when.isoformat() + "Z", "local": stamp.isoformat()}
        else:
            record = {"at": micros, "local": millis}
        values.append(json.dumps(record).encode())
    got = plan.decode(pa.array(values))
    ats = [(w - EPOCH) // dt.timedelta(microseconds=1) for w, _ in rows]
    assert got.field("at").cast(pa.int64()).to_pylist() == ats
    assert got.field("local").cast(pa.int64()).to_pylist() == [a // 1000 for a in ats]


def test_json_floats_nan_and_infinities_as_java_and_python_write_them() -> None:
    plan = JsonPlan(
        json.dumps(
            {
                "type": "record",
                "name": "R",
                "fields": [
                    {"name": "x", "type": "double"},
                    {"name": "f", "type": ["null", "float"]},
                ],
            }
        )
    )
    values = pa.array(
        [
            b'{"x": "NaN", "f": "-Infinity"}',  # Jackson (Java's JSON schema)
            b'{"x": Infinity, "f": NaN}',  # json.dumps (Python's JsonSchema)
            b'{"x": 2}',
            b'{"x": "nan"}',  # not a spelling either writes
        ]
    )
    column, errors = plan.decode_collect(values)
    rows = column.to_pylist()
    assert math.isnan(rows[0]["x"]) and rows[0]["f"] == float("-inf")
    assert rows[1]["x"] == float("inf") and math.isnan(rows[1]["f"])
    assert rows[2] == {"x": 2.0, "f": None}
    assert rows[3] is None
    assert errors.to_pylist()[:3] == [None, None, None]
    assert "does not fit the schema" in errors.to_pylist()[3]


@given(
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    st.integers(0, 999),
)
def test_jackson_forms_of_java_time_values(when: dt.datetime, nano_rest: int) -> None:
    """Jackson's JavaTimeModule: an Instant as epoch second '.' nanoseconds (nine digits),
    dates and local date-times as arrays of fields (zeros at the end left out)."""
    micros = (when - EPOCH) // dt.timedelta(microseconds=1)
    seconds, micro = divmod(micros, 1_000_000)
    nanos = micro * 1000 + nano_rest
    written = Decimal(f"{seconds}.{nanos:09d}")  # as Jackson writes it, sign and all
    assert jackson_ticks(written, UTC_US) == micros
    assert jackson_ticks(written, pa.timestamp("ns", tz="UTC")) == seconds * 10**9 + nanos
    day = [when.year, when.month, when.day]
    assert jackson_ticks(day, pa.date32()) == (when.date() - EPOCH.date()).days
    fields = [*day, when.hour, when.minute, when.second, when.microsecond * 1000]
    while len(fields) > 5 and fields[-1] == 0:
        fields.pop()
    assert jackson_ticks(fields, pa.timestamp("us")) == micros
    clock = [when.hour, when.minute, when.second, when.microsecond * 1000]
    assert jackson_ticks(clock, pa.time64("us")) == micros % 86_400_000_000


def test_jackson_forms_that_are_not_times() -> None:
    assert jackson_ticks(Decimal("1.5"), pa.timestamp("us")) is None  # a local timestamp
    assert jackson_ticks([2024, 1], pa.date32()) is None
    assert jackson_ticks(["2024", 1, 2], pa.date32()) is None
    with pytest.raises(ValueError, match=r"\[2024, 2, 30\]"):
        jackson_ticks([2024, 2, 30], pa.date32())
    with pytest.raises(ValueError, match="as Jackson writes them"):
        jackson_ticks([12, 0, 0, 1_000_000_000], pa.time64("ns"))


def test_a_java_pojo_json_value_decodes() -> None:
    """What the Java client's Schema.JSON(Event.class) writes for Instant, LocalDate and
    LocalDateTime fields (the schema: timestamp-micros, date, local-timestamp-millis)."""
    schema = {
        "type": "record",
        "name": "Event",
        "fields": [
            {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
            {"name": "day", "type": ["null", {"type": "int", "logicalType": "date"}]},
            {
                "name": "local",
                "type": ["null", {"type": "long", "logicalType": "local-timestamp-millis"}],
            },
        ],
    }
    values = pa.array(
        [
            b'{"at":-1.999999999,"day":[1969,12,31],"local":[2024,1,2,3,4,5,678000000]}',
            b'{"at":0.0,"day":[1,1,1],"local":[2024,1,2,3,4]}',
            b"{}",
        ]
    )
    rows = JsonPlan(json.dumps(schema)).decode(values).to_pylist()
    utc = dt.timezone.utc
    assert rows == [
        {
            "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=utc),
            "day": dt.date(1969, 12, 31),
            "local": dt.datetime(2024, 1, 2, 3, 4, 5, 678000),
        },
        {
            "at": dt.datetime(1970, 1, 1, tzinfo=utc),
            "day": dt.date(1, 1, 1),
            "local": dt.datetime(2024, 1, 2, 3, 4),
        },
        {"at": None, "day": None, "local": None},
    ]
