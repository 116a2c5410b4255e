"""String columns from per-entry parts: the same strings as Python builds them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar.text_columns import numbered, repeated

texts = st.text(max_size=20) | st.sampled_from(["", "ü", "日本", "persistent://public/default/t"])
counts = st.integers(0, 30) | st.sampled_from([1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(texts, counts), max_size=8))
def test_repeated_is_each_value_count_times(parts: list[tuple[str, int]]) -> None:
    got = repeated([v for v, _ in parts], np.array([c for _, c in parts], np.int64))
    assert got.type == pa.string()
    got.validate(full=True)
    assert got.to_pylist() == [v for v, c in parts for _ in range(c)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(texts, counts), max_size=8))
def test_numbered_is_prefix_and_row_number(parts: list[tuple[str, int]]) -> None:
    got = numbered([p for p, _ in parts], np.array([c for _, c in parts], np.int64))
    assert got is not None
    got.validate(full=True)
    assert got.to_pylist() == [f"{p}{i}" for p, c in parts for i in range(c)]


def test_numbered_counts_past_ten_thousand() -> None:
    got = numbered(["1:2:-1:", "3:4:0:"], np.array([100_000, 3]))
    assert got is not None
    values = got.to_pylist()
    assert values[9_999:10_001] == ["1:2:-1:9999", "1:2:-1:10000"]
    assert values[99_999] == "1:2:-1:99999"
    assert values[100_000:] == ["3:4:0:0", "3:4:0:1", "3:4:0:2"]


def test_numbered_leaves_entries_beyond_its_digits_to_the_caller() -> None:
    assert numbered(["x:"], np.array([100_001])) is None
