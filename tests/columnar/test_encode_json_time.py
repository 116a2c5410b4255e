"""JSON text of dates, times and timestamps (:mod:`pulsar_spark.columnar.values.json.encode_time`):
byte for byte what the Java client's JSON schema (Jackson 2.17 in Pulsar 4.0.8) writes for
the ``java.time`` field Pulsar's reflection maps to each logical type, and read back by our
JSON decoder."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.values.encode_errors import SchemaMismatch
from pulsar_spark.columnar.values.json.decode import JsonPlan
from pulsar_spark.columnar.values.json.encode import encode_json, json_encoder

NANOS = 10**9
DAY = 86_400

#: (epoch second, nanosecond) -> what ``Schema.JSON(Pojo.class).encode`` wrote (Pulsar
#: 4.0.8, captured with a POJO of Instant at, LocalDate day, LocalDateTime local, LocalTime
#: time, every field built from ``LocalDateTime.ofEpochSecond(second, nano, UTC)``).
JAVA = {
    (1704164645, 678000000): (
        '{"at":1704164645.678000000,"day":[2024,1,2],'
        '"local":[2024,1,2,3,4,5,678000000],"time":[3,4,5,678000000]}'
    ),
    (0, 0): '{"at":0.0,"day":[1970,1,1],"local":[1970,1,1,0,0],"time":[0,0]}',
    (-1, 999999999): (
        '{"at":-1.999999999,"day":[1969,12,31],'
        '"local":[1969,12,31,23,59,59,999999999],"time":[23,59,59,999999999]}'
    ),
    (-1, 0): (
        '{"at":-1.000000000,"day":[1969,12,31],"local":[1969,12,31,23,59,59],"time":[23,59,59]}'
    ),
    (0, 1000): (
        '{"at":0.000001000,"day":[1970,1,1],"local":[1970,1,1,0,0,0,1000],"time":[0,0,0,1000]}'
    ),
    (0, 1): '{"at":1E-9,"day":[1970,1,1],"local":[1970,1,1,0,0,0,1],"time":[0,0,0,1]}',
    (0, 120): '{"at":1.20E-7,"day":[1970,1,1],"local":[1970,1,1,0,0,0,120],"time":[0,0,0,120]}',
    (0, 999999): (
        '{"at":0.000999999,"day":[1970,1,1],"local":[1970,1,1,0,0,0,999999],"time":[0,0,0,999999]}'
    ),
    (1704164645, 0): (
        '{"at":1704164645.000000000,"day":[2024,1,2],"local":[2024,1,2,3,4,5],"time":[3,4,5]}'
    ),
    (
        -62198755200,
        0,
    ): '{"at":-62198755200.000000000,"day":[-1,1,1],"local":[-1,1,1,0,0],"time":[0,0]}',
    (253402300800, 1000): (
        '{"at":253402300800.000001000,"day":[10000,1,1],'
        '"local":[10000,1,1,0,0,0,1000],"time":[0,0,0,1000]}'
    ),
    (-1, 500000000): (
        '{"at":-1.500000000,"day":[1969,12,31],'
        '"local":[1969,12,31,23,59,59,500000000],"time":[23,59,59,500000000]}'
    ),
    (5, 10): '{"at":5.000000010,"day":[1970,1,1],"local":[1970,1,1,0,0,5,10],"time":[0,0,5,10]}',
}


def time_schema(at: str, local: str, time: str) -> str:
    def field(name: str, kind: str, logical: str) -> dict[str, object]:
        return {"name": name, "type": ["null", {"type": kind, "logicalType": logical}]}

    fields = [
        field("at", "long", at),
        field("day", "int", "date"),
        field("local", "long", local),
        field("time", "long" if time == "time-micros" else "int", time),
    ]
    return json.dumps({"type": "record", "name": "T", "fields": fields})


def time_table(moments: list[tuple[int, int]], unit: str, time_unit: str) -> pa.Table:
    per = {"ms": 1000, "us": 10**6, "ns": NANOS}[unit]
    ticks = [s * per + n * per // NANOS for s, n in moments]
    time_per = {"ms": 1000, "us": 10**6, "ns": NANOS}[time_unit]
    time_type = pa.time32(time_unit) if time_unit == "ms" else pa.time64(time_unit)
    return pa.table(
        {
            "at": pa.array(ticks, pa.timestamp(unit, "UTC")),
            "day": pa.array([s // DAY for s, _ in moments], pa.date32()),
            "local": pa.array(ticks, pa.timestamp(unit)),
            "time": pa.array(
                [(s % DAY) * time_per + n * time_per // NANOS for s, n in moments], time_type
            ),
        }
    )


@pytest.mark.parametrize(
    ("unit", "at", "local", "time_unit", "time"),
    [
        ("ns", "timestamp-nanos", "local-timestamp-nanos", "ns", "time-micros"),
        ("us", "timestamp-micros", "local-timestamp-micros", "us", "time-micros"),
        ("us", "timestamp-micros", "local-timestamp-millis", "ms", "time-millis"),
        ("ms", "timestamp-millis", "local-timestamp-micros", "us", "time-micros"),
    ],
)
def test_values_are_the_java_clients_text(
    unit: str, at: str, local: str, time_unit: str, time: str
) -> None:
    """Every moment the schema's units and Arrow's hold exactly is written as Java did."""
    finest = 1 if "nanos" in at else 1000 if "millis" not in at + local + time else 10**6
    if time == "time-micros":
        finest = max(finest, 1000)
    moments = [m for m in JAVA if m[1] % finest == 0]
    if unit == "ns":
        moments = [m for m in moments if abs(m[0]) < 2**63 // NANOS]
    table = time_table(moments, unit, time_unit)
    out = [p.decode() for p in encode_json(table, time_schema(at, local, time)).to_pylist()]
    assert out == [JAVA[m] for m in moments]
    assert len(moments) >= 5


def test_nanoseconds_of_a_time_micros_field_are_cut_to_microseconds() -> None:
    table = time_table([(0, 999999)], "ns", "ns")
    schema = time_schema("timestamp-nanos", "local-timestamp-nanos", "time-micros")
    (out,) = encode_json(table, schema).to_pylist()
    assert json.loads(out)["time"] == [0, 0, 0, 999000]  # rounded down, as Java converts


def _reference_time(ticks: int, digits: int) -> str:
    """Jackson's LocalTime array, by Python's datetime (ticks of 10^-digits s)."""
    per = 10**digits
    t = (dt.datetime(2000, 1, 1) + dt.timedelta(seconds=ticks // per)).time()
    nano = ticks % per * (NANOS // per)
    fields = [t.hour, t.minute]
    if t.second or nano:
        fields.append(t.second)
    if nano:
        fields.append(nano)
    return json.dumps(fields, separators=(",", ":"))


def _reference_local(ticks: int, digits: int) -> str:
    """Jackson's LocalDateTime array, by Python's datetime."""
    per = 10**digits
    seconds, fraction = divmod(ticks, per)
    wall = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=seconds)
    head = [wall.year, wall.month, wall.day]
    time = json.loads(
        _reference_time(
            wall.hour * 3600 * per + wall.minute * 60 * per + wall.second * per + fraction, digits
        )
    )
    return json.dumps(head + time, separators=(",", ":"))


def _reference_instant(ticks: int, digits: int) -> str:
    """Jackson's Instant text (DecimalUtils.toBigDecimal, then BigDecimal.toString)."""
    per = 10**digits
    seconds, fraction = divmod(ticks, per)
    nano = fraction * (NANOS // per)
    if not nano:
        return "0.0" if not seconds else f"{seconds}.000000000"
    if not seconds and nano < 1000:
        text = str(nano)
        return f"{text[0]}{'.' + text[1:] if len(text) > 1 else ''}E{len(text) - 10}"
    return f"{seconds}.{nano:09d}"


#: Ticks of years 1 to 9999 (Python's datetime), in microseconds.
_MICROS = st.integers(-62135596800 * 10**6, 253402300799 * 10**6 + 999999)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), _MICROS), min_size=1, max_size=30),
    st.sampled_from(["ms", "us"]),
)
def test_random_values_are_jacksons_text_and_read_back(ticks: list[int | None], unit: str) -> None:
    digits = 3 if unit == "ms" else 6
    if unit == "ms":
        ticks = [None if t is None else t // 1000 for t in ticks]
    per = 10**digits
    times = [None if t is None else t % (DAY * per) for t in ticks]
    days = [None if t is None else t // (DAY * per) for t in ticks]
    table = pa.table(
        {
            "at": pa.array(ticks, pa.timestamp(unit, "UTC")),
            "day": pa.array(days, pa.date32()),
            "local": pa.array(ticks, pa.timestamp(unit)),
            "time": pa.array(times, pa.time32("ms") if unit == "ms" else pa.time64("us")),
        }
    )
    encoder = json_encoder(pa.struct(list(table.schema)))
    payloads = encoder.encode(table)
    for t, day, of_day, payload in zip(ticks, days, times, payloads.to_pylist(), strict=True):
        if t is None:
            assert payload == b"{}"
            continue
        assert day is not None and of_day is not None
        date = dt.date(1970, 1, 1) + dt.timedelta(days=day)
        want = (
            f'{{"at":{_reference_instant(t, digits)},'
            f'"day":[{date.year},{date.month},{date.day}],'
            f'"local":{_reference_local(t, digits)},'
            f'"time":{_reference_time(of_day, digits)}}}'
        )
        assert payload.decode() == want
    back = JsonPlan(encoder.schema).decode(payloads)
    assert back.to_pylist() == table.to_pylist()


def test_a_time_of_day_out_of_range_names_the_field() -> None:
    schema = json.dumps(
        {
            "type": "record",
            "name": "R",
            "fields": [{"name": "t", "type": {"type": "long", "logicalType": "time-micros"}}],
        }
    )
    table = pa.table({"t": pa.array([0, DAY * 10**6], pa.time64("us"))})
    with pytest.raises(SchemaMismatch, match="not within a day") as info:
        encode_json(table, schema, topic="t1")
    assert info.value.fields == ["t"]
    assert "topic t1" in str(info.value)


def test_nanosecond_texts_read_back_exactly() -> None:
    """1E-9, 1.20E-7, -1.999999999... decode to the nanoseconds written."""
    moments = [m for m in JAVA if abs(m[0]) < 2**63 // NANOS]
    table = time_table(moments, "ns", "us")
    schema = time_schema("timestamp-nanos", "local-timestamp-nanos", "time-micros")
    back = JsonPlan(schema).decode(encode_json(table, schema))
    for name in ("at", "local", "day", "time"):
        want = table.column(name).combine_chunks()
        assert back.field(name).cast(want.type).equals(want), name


def test_every_instant_text_of_the_java_client_at_nanoseconds() -> None:
    """The Instant texts (E notation under a microsecond, the sign quirk) of every moment, and
    the LocalDateTime arrays, at timestamp-nanos."""
    moments = [m for m in JAVA if abs(m[0]) < 2**63 // NANOS]
    ticks = pa.array([s * NANOS + n for s, n in moments], pa.int64())
    table = pa.table(
        {"at": ticks.cast(pa.timestamp("ns", "UTC")), "local": ticks.cast(pa.timestamp("ns"))}
    )
    fields = [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-nanos"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-nanos"}},
    ]
    schema = json.dumps({"type": "record", "name": "T", "fields": fields})
    out = [p.decode() for p in encode_json(table, schema).to_pylist()]
    want = []
    for moment in moments:
        java = JAVA[moment]
        at = java[len('{"at":') : java.index(',"day"')]
        local = java[java.index('"local":') : java.index(',"time"')]
        want.append(f'{{"at":{at},{local}}}')
    assert out == want
    assert len(moments) == len(JAVA) - 2  # years -1 and 10000 exceed nanoseconds' range
