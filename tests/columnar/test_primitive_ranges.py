"""Primitive time values beyond what Arrow's dates or Spark's microsecond timestamps hold: each
fails naming its row and value (or, collected, becomes a null with its error), never a value
that wrapped around."""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest

from pulsar_spark.columnar import decode_primitive, decode_primitive_collect
from pulsar_spark.columnar.values.errors import SchemaDecodeError
from pulsar_spark.protocol.schemas.types import SchemaType as T

INT64 = (-(2**63), 2**63 - 1)
MAX_MS = (2**63 - 1) // 1000  # the last millisecond whose microseconds fit an int64
LAST_DAY_MS = (2**31) * 86_400_000 - 1  # the last millisecond of date32's last day


def _longs(*values: int) -> pa.Array:
    return pa.array([struct.pack(">q", v) for v in values], pa.binary())


@pytest.mark.parametrize(
    ("kind", "good", "bad", "reason"),
    [
        (T.TIMESTAMP, [0, MAX_MS, -MAX_MS], [MAX_MS + 1, -MAX_MS - 1, *INT64], "TIMESTAMP of"),
        (T.DATE, [0, LAST_DAY_MS, -(2**31) * 86_400_000], [LAST_DAY_MS + 1, *INT64], "DATE of"),
    ],
)
def test_milliseconds_beyond_the_range_fail_naming_the_value(
    kind: T, good: list[int], bad: list[int], reason: str
) -> None:
    assert len(decode_primitive(_longs(*good), kind)) == len(good)
    for value in bad:
        with pytest.raises(SchemaDecodeError, match=f"{reason} {value} ms") as failed:
            decode_primitive(_longs(0, value), kind, topic="t")
        assert failed.value.row == 1
    column, errors = decode_primitive_collect(_longs(*good, *bad), kind)
    assert column.is_null().to_pylist() == [False] * len(good) + [True] * len(bad)
    texts = errors.to_pylist()
    assert texts[: len(good)] == [None] * len(good)
    assert all(reason in text for text in texts[len(good) :])


def test_int64_min_is_not_taken_for_a_small_value() -> None:
    """``abs(INT64_MIN)`` is negative in NumPy: the range checks do not use it."""
    for kind, raw in [
        (T.INSTANT, struct.pack(">qi", INT64[0], 0)),
        (T.LOCAL_DATE_TIME, struct.pack(">qq", INT64[0], 0)),
    ]:
        with pytest.raises(SchemaDecodeError, match="beyond the range"):
            decode_primitive(pa.array([raw]), kind)
