"""Primitive schema payloads against the bytes laid out in notes/schemas.md §2 (Java's
layouts: big-endian, times in ms, INSTANT 12 bytes, LOCAL_DATE_TIME 16) and against the
official Python client's ``StringSchema`` / ``BytesSchema``."""

from __future__ import annotations

import datetime
import math
import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsar.schema import BytesSchema, StringSchema

from pulsar_spark.columnar.values.encode_errors import SchemaMismatch
from pulsar_spark.columnar.values.primitive.encode import encode_primitive, primitive_fits
from pulsar_spark.protocol.schemas.types import SchemaType

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
_INTS = [
    (SchemaType.INT8, pa.int8(), ">b"),
    (SchemaType.INT16, pa.int16(), ">h"),
    (SchemaType.INT32, pa.int32(), ">i"),
    (SchemaType.INT64, pa.int64(), ">q"),
]


def _payloads(values: list[object], dtype: pa.DataType, kind: SchemaType) -> list[bytes | None]:
    out: list[bytes | None] = encode_primitive(pa.array(values, dtype), kind).to_pylist()
    return out


@pytest.mark.parametrize(("kind", "dtype", "fmt"), _INTS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_integers_are_big_endian(
    kind: SchemaType, dtype: pa.DataType, fmt: str, data: st.DataObject
) -> None:
    bits = dtype.bit_width
    values = data.draw(
        st.lists(st.none() | st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1), max_size=20)
    )
    expected = [None if v is None else struct.pack(fmt, v) for v in values]
    assert _payloads(values, dtype, kind) == expected


def test_narrower_integers_widen() -> None:
    assert _payloads([0, 255], pa.uint8(), SchemaType.INT16) == [b"\x00\x00", b"\x00\xff"]
    assert _payloads([-2], pa.int8(), SchemaType.INT64) == [struct.pack(">q", -2)]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.none() | st.floats(), max_size=20))
def test_doubles_are_big_endian_ieee_with_javas_nan(values: list[float | None]) -> None:
    expected = [
        None if v is None else b"\x7f\xf8\x00\x00\x00\x00\x00\x00" if math.isnan(v) else
        struct.pack(">d", v)
        for v in values
    ]  # fmt: skip
    assert _payloads(values, pa.float64(), SchemaType.DOUBLE) == expected


@settings(max_examples=30, deadline=None)
@given(st.lists(st.none() | st.floats(width=32), max_size=20))
def test_floats_are_big_endian_ieee_with_javas_nan(values: list[float | None]) -> None:
    expected = [
        None if v is None else b"\x7f\xc0\x00\x00" if math.isnan(v) else struct.pack(">f", v)
        for v in values
    ]
    assert _payloads(values, pa.float32(), SchemaType.FLOAT) == expected
    assert _payloads([1.0], pa.float32(), SchemaType.FLOAT) == [bytes.fromhex("3f800000")]


def test_booleans_are_one_byte() -> None:
    assert _payloads([True, None, False], pa.bool_(), SchemaType.BOOLEAN) == [
        b"\x01",
        None,
        b"\x00",
    ]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.none() | st.text(), max_size=20))
def test_strings_are_utf8_as_the_official_string_schema_writes_them(
    values: list[str | None],
) -> None:
    schema = StringSchema()
    expected = [None if v is None else schema.encode(v) for v in values]
    assert _payloads(values, pa.string(), SchemaType.STRING) == expected
    assert _payloads(values, pa.large_string(), SchemaType.STRING) == expected


@settings(max_examples=30, deadline=None)
@given(st.lists(st.none() | st.binary(), max_size=20))
def test_bytes_are_as_they_are(values: list[bytes | None]) -> None:
    schema = BytesSchema()
    expected = [None if v is None else schema.encode(v) for v in values]
    assert _payloads(values, pa.binary(), SchemaType.BYTES) == expected
    assert _payloads(values, pa.large_binary(), SchemaType.NONE) == expected


def _millis(t: datetime.datetime) -> int:
    return (t - EPOCH) // datetime.timedelta(milliseconds=1)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.datetimes(timezones=st.just(UTC)), max_size=10))
def test_timestamps_dates_and_instants(values: list[datetime.datetime]) -> None:
    dtype = pa.timestamp("us", tz="UTC")
    millis = [struct.pack(">q", _millis(v)) for v in values]
    assert _payloads(values, dtype, SchemaType.TIMESTAMP) == millis
    assert _payloads(values, dtype, SchemaType.DATE) == millis
    instants = []
    for v in values:
        micros = (v - EPOCH) // datetime.timedelta(microseconds=1)
        seconds, rest = divmod(micros, 1_000_000)
        instants.append(struct.pack(">qi", seconds, rest * 1000))
    assert _payloads(values, dtype, SchemaType.INSTANT) == instants


@settings(max_examples=30, deadline=None)
@given(st.lists(st.datetimes(), max_size=10))
def test_local_date_times_are_day_and_nanosecond(values: list[datetime.datetime]) -> None:
    expected = []
    for v in values:
        day = (v.date() - datetime.date(1970, 1, 1)).days
        nanos = ((v.hour * 60 + v.minute) * 60 + v.second) * 10**9 + v.microsecond * 1000
        expected.append(struct.pack(">qq", day, nanos))
    assert _payloads(values, pa.timestamp("us"), SchemaType.LOCAL_DATE_TIME) == expected
    stamps = [struct.pack(">q", _millis(v.replace(tzinfo=UTC))) for v in values]
    assert _payloads(values, pa.timestamp("us"), SchemaType.TIMESTAMP) == stamps  # naive: UTC


@settings(max_examples=30, deadline=None)
@given(st.lists(st.dates(), max_size=10))
def test_dates(values: list[datetime.date]) -> None:
    days = [(v - datetime.date(1970, 1, 1)).days for v in values]
    local = [struct.pack(">q", d) for d in days]
    assert _payloads(values, pa.date32(), SchemaType.LOCAL_DATE) == local
    assert _payloads(values, pa.date32(), SchemaType.DATE) == [
        struct.pack(">q", d * 86_400_000) for d in days
    ]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.times(), max_size=10))
def test_times(values: list[datetime.time]) -> None:
    nanos = [
        ((v.hour * 60 + v.minute) * 60 + v.second) * 10**9 + v.microsecond * 1000 for v in values
    ]
    dtype = pa.time64("us")
    assert _payloads(values, dtype, SchemaType.LOCAL_TIME) == [struct.pack(">q", n) for n in nanos]
    assert _payloads(values, dtype, SchemaType.TIME) == [
        struct.pack(">q", n // 1_000_000) for n in nanos
    ]


def test_nulls_are_null_payloads_of_every_type() -> None:
    for kind, dtype in [
        (SchemaType.INSTANT, pa.timestamp("ns", tz="UTC")),
        (SchemaType.LOCAL_TIME, pa.time32("s")),
        (SchemaType.TIME, pa.time32("ms")),
        (SchemaType.DATE, pa.date64()),
        (SchemaType.BOOLEAN, pa.bool_()),
        (SchemaType.DOUBLE, pa.float32()),
    ]:
        out = encode_primitive(pa.array([None, None], dtype), kind)
        assert out.to_pylist() == [None, None]
        assert out.null_count == 2


def test_chunked_sliced_and_dictionary_columns() -> None:
    column = pa.chunked_array([pa.array(["a", "b"]), pa.array(["c"])])
    assert encode_primitive(column, SchemaType.STRING).to_pylist() == [b"a", b"b", b"c"]
    sliced = pa.array([1, 2, 3], pa.int32()).slice(1)
    assert encode_primitive(sliced, SchemaType.INT32).to_pylist() == [
        b"\x00\x00\x00\x02",
        b"\x00\x00\x00\x03",
    ]
    coded = pa.array(["x", None, "x"]).dictionary_encode()
    assert encode_primitive(coded, SchemaType.STRING).to_pylist() == [b"x", None, b"x"]


@pytest.mark.parametrize(
    ("dtype", "kind"),
    [
        (pa.int64(), SchemaType.INT32),
        (pa.uint32(), SchemaType.INT32),
        (pa.float64(), SchemaType.FLOAT),
        (pa.string(), SchemaType.BYTES),
        (pa.binary(), SchemaType.STRING),
        (pa.int32(), SchemaType.BOOLEAN),
        (pa.date32(), SchemaType.LOCAL_TIME),
        (pa.int64(), SchemaType.AVRO),
    ],
)
def test_types_that_do_not_fit(dtype: pa.DataType, kind: SchemaType) -> None:
    assert not primitive_fits(dtype, kind)
    with pytest.raises(SchemaMismatch) as info:
        encode_primitive(pa.array([], dtype), kind, topic="t")
    assert info.value.fields == ["<value>"]
    assert kind.name in str(info.value)
    assert "topic t" in str(info.value)
