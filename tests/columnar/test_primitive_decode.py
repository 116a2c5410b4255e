"""Primitive schema values against the bytes the Java client lays out (notes/schemas.md §2).

Each value is written with ``struct`` exactly as the notes give the layout
(big-endian; INSTANT 12 bytes, LOCAL_DATE_TIME 16), decoded all at once, and
compared with the value it stands for. Wrong lengths, bad text and times
beyond Arrow's range fail naming the row, or come out null with their text
in the collect mode.
"""

from __future__ import annotations

import datetime
import math
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsar.schema import BytesSchema, StringSchema

from pulsar_spark.columnar.values.arrow_types import PRIMITIVE_TYPES
from pulsar_spark.columnar.values.errors import SchemaDecodeError, UnmappableSchema
from pulsar_spark.columnar.values.primitive.decode import decode_primitive, decode_primitive_collect
from pulsar_spark.protocol.schemas.types import SchemaType as T

UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)


def decode(kind: T, values: list[bytes | None], **kw: Any) -> list[Any]:
    column = decode_primitive(pa.array(values, pa.binary()), kind, **kw)
    assert column.type == PRIMITIVE_TYPES[kind]
    column.validate(full=True)
    return column.to_pylist()


@pytest.mark.parametrize(
    ("kind", "raw", "value"),
    [
        (T.BOOLEAN, b"\x01", True),
        (T.BOOLEAN, b"\x00", False),
        (T.BOOLEAN, b"\x07", True),
        (T.INT8, b"\xff", -1),
        (T.INT16, bytes.fromhex("0001"), 1),
        (T.INT16, bytes.fromhex("8000"), -32768),
        (T.INT32, bytes.fromhex("00000100"), 256),
        (T.INT64, bytes.fromhex("fffffffffffffffe"), -2),
        (T.FLOAT, bytes.fromhex("3f800000"), 1.0),
        (T.DOUBLE, struct.pack(">d", -2.5), -2.5),
        (
            T.TIMESTAMP,
            struct.pack(">q", 1_700_000_000_123),
            EPOCH + datetime.timedelta(milliseconds=1_700_000_000_123),
        ),
        (T.DATE, struct.pack(">q", 86_400_000 + 36_000_000), datetime.date(1970, 1, 2)),
        (T.DATE, struct.pack(">q", -1), datetime.date(1969, 12, 31)),
        (T.TIME, struct.pack(">q", 36_000_123), datetime.time(10, 0, 0, 123_000)),
        (T.TIME, struct.pack(">q", -1), datetime.time(23, 59, 59, 999_000)),
        (T.INSTANT, struct.pack(">qi", 1, 500_000_999), EPOCH + datetime.timedelta(seconds=1.5)),
        (T.INSTANT, struct.pack(">qi", -1, 0), EPOCH - datetime.timedelta(seconds=1)),
        (T.LOCAL_DATE, struct.pack(">q", 19_000), datetime.date(2022, 1, 8)),
        (T.LOCAL_TIME, struct.pack(">q", 3_600_000_000_001), datetime.time(1, 0, 0, 0)),
        (
            T.LOCAL_DATE_TIME,
            struct.pack(">qq", 19_000, 3_600_000_002_000),
            datetime.datetime(2022, 1, 8, 1, 0, 0, 2),
        ),
        (T.STRING, "ü日".encode(), "ü日"),
        (T.BYTES, b"\x00\xff", b"\x00\xff"),
        (T.NONE, b"", b""),
    ],
)
def test_layouts(kind: T, raw: bytes, value: Any) -> None:
    assert decode(kind, [raw, None, raw]) == [value, None, value]


def test_local_time_keeps_nanoseconds() -> None:
    column = decode_primitive(pa.array([struct.pack(">q", 1_000_000_001)]), T.LOCAL_TIME)
    assert column.cast(pa.int64()).to_pylist() == [1_000_000_001]


def _packed(fmt: str) -> Any:
    return lambda v: struct.pack(fmt, v)


_NUMBERS = {
    T.INT8: (st.integers(-128, 127), _packed(">b")),
    T.INT16: (st.integers(-(2**15), 2**15 - 1), _packed(">h")),
    T.INT32: (st.integers(-(2**31), 2**31 - 1), _packed(">i")),
    T.INT64: (st.integers(-(2**63), 2**63 - 1), _packed(">q")),
    T.FLOAT: (st.floats(width=32, allow_nan=False), _packed(">f")),
    T.DOUBLE: (st.floats(allow_nan=False), _packed(">d")),
    T.LOCAL_DATE: (st.integers(-700_000, 2_900_000), _packed(">q")),
}


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(sorted(_NUMBERS)), st.data())
def test_numbers_read_as_written(kind: T, data: st.DataObject) -> None:
    values, pack = _NUMBERS[kind]
    numbers = data.draw(st.lists(values | st.none(), max_size=30))
    raw = [None if v is None else pack(v) for v in numbers]
    got = decode(kind, raw)
    if kind is T.LOCAL_DATE:
        got = [None if d is None else (d - datetime.date(1970, 1, 1)).days for d in got]
    assert got == numbers


@settings(max_examples=100, deadline=None)
# Milliseconds whose microseconds fit an int64 (beyond: tests/columnar/test_primitive_ranges.py).
@given(st.lists(st.integers(-(2**63 // 1000), 2**63 // 1000 - 1) | st.none(), max_size=30))
def test_timestamps_dates_and_times_from_milliseconds(millis: list[int | None]) -> None:
    raw = [None if m is None else struct.pack(">q", m) for m in millis]
    stamps = decode_primitive(pa.array(raw, pa.binary()), T.TIMESTAMP).cast(pa.int64())
    assert stamps.to_pylist() == millis
    days = decode_primitive(pa.array(raw, pa.binary()), T.DATE).cast(pa.int32()).to_pylist()
    times = decode_primitive(pa.array(raw, pa.binary()), T.TIME).cast(pa.int32()).to_pylist()
    for m, day, time in zip(millis, days, times, strict=True):
        if m is None:
            assert day is None and time is None
        elif -(2**31) * 86_400_000 <= m < 2**31 * 86_400_000:
            assert day == m // 86_400_000 and time == m % 86_400_000


@pytest.mark.parametrize(
    "kind", [k for k in PRIMITIVE_TYPES if k not in (T.STRING, T.BYTES, T.NONE)]
)
def test_a_value_of_the_wrong_length_names_its_row(kind: T) -> None:
    width = {T.BOOLEAN: 1, T.INT8: 1, T.INT16: 2, T.INT32: 4, T.FLOAT: 4, T.INSTANT: 12}.get(
        kind, 8
    )
    width = 16 if kind is T.LOCAL_DATE_TIME else width
    good = bytes(width)
    with pytest.raises(SchemaDecodeError) as info:
        decode_primitive(pa.array([good, None, good + b"\x00"]), kind, topic="t")
    assert info.value.row == 2
    assert str(info.value) == (
        f"topic t: row 2: a {kind.name} value of {width + 1} bytes ({width} expected)"
    )
    column, errors = decode_primitive_collect(pa.array([b"", good, None]), kind)
    assert column.is_null().to_pylist() == [True, False, True]
    assert errors.to_pylist() == [f"a {kind.name} value of 0 bytes ({width} expected)", None, None]


@pytest.mark.parametrize(
    ("kind", "raw", "text"),
    [
        (T.LOCAL_TIME, struct.pack(">q", -1), "a LOCAL_TIME of -1 ns, beyond a day"),
        (T.LOCAL_DATE, struct.pack(">q", 2**40), "beyond Arrow's dates"),
        (T.INSTANT, struct.pack(">qi", 2**62, 0), "INSTANT beyond the range"),
        (T.INSTANT, struct.pack(">qi", 0, 10**9), "bad nanoseconds"),
        (T.LOCAL_DATE_TIME, struct.pack(">qq", 0, -5), "LOCAL_DATE_TIME beyond"),
    ],
)
def test_out_of_range_times_fail(kind: T, raw: bytes, text: str) -> None:
    with pytest.raises(SchemaDecodeError, match=text) as info:
        decode_primitive(pa.array([raw], pa.binary()), kind)
    assert info.value.row == 0


def test_strings_are_checked_to_be_utf8() -> None:
    with pytest.raises(SchemaDecodeError, match="row 1: text that is not valid UTF-8"):
        decode(T.STRING, [b"ok", b"\xff", None])
    column, errors = decode_primitive_collect(pa.array([b"ok", b"\xc3", None]), T.STRING)
    assert column.to_pylist() == ["ok", None, None]
    assert errors.to_pylist() == [None, "text that is not valid UTF-8", None]


def test_strings_in_another_charset() -> None:
    assert decode(T.STRING, ["é".encode("latin-1"), None], charset="ISO-8859-1") == ["é", None]
    with pytest.raises(SchemaDecodeError, match="not valid ascii"):
        decode(T.STRING, [b"\xe9"], charset="US-ASCII")


def test_the_python_clients_string_and_bytes_schemas() -> None:
    text = ["", "plain", "ü日本"]
    assert decode(T.STRING, [StringSchema().encode(t) for t in text]) == text
    blobs = [b"", b"\x00\x01"]
    assert decode(T.BYTES, [BytesSchema().encode(b) for b in blobs]) == blobs


def test_nan_and_infinities_read_as_written() -> None:
    got = decode(T.DOUBLE, [struct.pack(">d", v) for v in (math.inf, -math.inf, math.nan)])
    assert got[:2] == [math.inf, -math.inf] and math.isnan(got[2])


def test_types_that_are_not_primitive_are_refused() -> None:
    with pytest.raises(UnmappableSchema, match="AVRO is not a primitive"):
        decode_primitive(pa.array([b""]), T.AVRO)
