"""Partition names: ``<topic>-partition-<N>`` split and built the same way everywhere."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.protocol.topics import PARTITION_SUFFIX, base_topic, partition_name

# Topic names as users write them: short, full, with dashes and the suffix inside.
bases = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True),
    st.builds(
        "persistent://{}/{}/{}".format,
        st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
        st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True),
        st.from_regex(r"[a-z][a-z0-9_.-]{0,20}", fullmatch=True),
    ),
    st.text(min_size=1, max_size=30),
)


def test_suffix() -> None:
    assert PARTITION_SUFFIX == "-partition-"
    assert partition_name("t", 0) == "t-partition-0"


@given(bases, st.integers(0, 1 << 20))
def test_partition_name_round_trips(base: str, index: int) -> None:
    assert base_topic(partition_name(base, index)) == (base, index)


@given(bases, st.integers(0, 100), st.integers(0, 100))
def test_only_the_last_suffix_is_the_partition(base: str, first: int, second: int) -> None:
    # A partitioned topic whose own name ends like a partition's.
    inner = partition_name(base, first)
    assert base_topic(partition_name(inner, second)) == (inner, second)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        (
            "persistent://public/default/orders-partition-3",
            ("persistent://public/default/orders", 3),
        ),
        ("orders-partition-0", ("orders", 0)),
        ("orders-partition-12", ("orders", 12)),
        ("a-partition-1-partition-2", ("a-partition-1", 2)),
        # Java's Integer.parseInt reads leading zeros the same way.
        ("orders-partition-007", ("orders", 7)),
    ],
)
def test_partition_names(topic: str, expected: tuple[str, int]) -> None:
    assert base_topic(topic) == expected


@pytest.mark.parametrize(
    "topic",
    [
        "orders",
        "persistent://public/default/orders",
        "orders-partition-",
        "orders-partition-x",
        "orders-partition-1x",
        "orders-partition--1",
        "orders-partition-+1",
        "orders-partition- 1",
        "orders-partition-1 ",
        "orders-partition-1.0",
        "orders-partition-\u0663",  # ARABIC-INDIC DIGIT THREE: a digit, not ASCII
        "orders-partition-\u00b2",  # SUPERSCRIPT TWO
        "-partition-3",  # no base name before the suffix
        "orders-partitions-3",
        "orders_partition_3",
        "",
    ],
)
def test_names_that_are_not_partitions(topic: str) -> None:
    assert base_topic(topic) == (topic, -1)


@given(st.text(max_size=40))
def test_any_text_splits_consistently(topic: str) -> None:
    base, index = base_topic(topic)
    if index < 0:
        assert base == topic
    else:
        assert base
        digits = topic[len(base) + len(PARTITION_SUFFIX) :]
        assert topic == base + PARTITION_SUFFIX + digits
        assert digits.isascii() and digits.isdigit() and int(digits) == index
