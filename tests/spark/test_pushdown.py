"""Filter pushdown on batch reads (Spark 4.1+, ``spark.sql.python.filterPushdown.enabled``):
filters on topic, partition and publish time narrow what is read, never a result.

The filters Spark hands over become a :class:`Narrowing` (units, and a property of the
millisecond arithmetic); on both brokers, the ranges a narrowed read plans hold exactly
the messages the filters match (nothing outside them is read: one producer per partition,
so publish times increase along each); and through Spark, with the setting on and off,
queries give the same rows as without pushdown, with fewer partitions where topic or
partition filters prune them.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

from pulsar_spark.spark import SPARK_SCHEMA
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.pushdown import Narrowing, narrowing, plans_per_query
from pulsar_spark.spark.read_schema import plan_for
from pulsar_spark.spark.reader import PulsarFilteringReader
from tests.support.official import produce

UTC = dt.timezone.utc
CONF = "spark.sql.python.filterPushdown.enabled"
PARTITIONS = 4


def _at(micros: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=micros)


# -- the filters Spark hands over ----------------------------------------------------------


def test_topic_and_partition_equalities_are_taken_and_publish_times_checked_again() -> None:
    filters = [
        EqualTo(("topic",), "persistent://public/default/a"),
        In(("topic",), ("persistent://public/default/a", "persistent://public/default/b")),
        In(("partition",), (1, 3)),
        EqualNullSafe(("partition",), 3),
        GreaterThanOrEqual(("publishTime",), _at(5_000_500)),
        LessThan(("publishTime",), _at(9_000_000)),
        Not(EqualTo(("partition",), 2)),
        IsNotNull(("key",)),
        StringStartsWith(("topic",), "persistent"),
        EqualTo(("partition",), "3"),  # not an int: Spark's to check
        EqualTo(("eventTime",), _at(1_000)),
    ]
    narrow, rest = narrowing(filters, "pulsar-spark")
    assert narrow == Narrowing(
        topics=frozenset({"persistent://public/default/a"}),
        partitions=frozenset({3}),
        from_ms=5_001,
        until_ms=9_000,
    )
    # Returned: the very objects, in order, publish times included (Spark re-checks them).
    assert [id(f) for f in rest] == [id(f) for f in filters[4:]]
    assert narrow.keeps("persistent://public/default/a-partition-3")
    assert not narrow.keeps("persistent://public/default/a-partition-1")
    assert not narrow.keeps("persistent://public/default/b-partition-3")


def test_streamnative_layout_narrows_by_the_partition_name() -> None:
    name = "persistent://public/default/t-partition-2"
    filters = [EqualTo(("__topic",), name), GreaterThan(("__publishTime",), _at(7_000))]
    narrow, rest = narrowing(filters, "streamnative")
    assert narrow.topics == frozenset({name}) and narrow.from_ms == 8
    assert rest == [filters[1]]
    assert narrow.keeps(name)
    assert not narrow.keeps("persistent://public/default/t-partition-1")
    # The default layout's names mean a record's own fields there: left to Spark.
    other = [EqualTo(("topic",), "x"), EqualTo(("partition",), 1)]
    assert narrowing(other, "streamnative") == (Narrowing(by_partition_name=True), other)


def test_naive_times_and_empty_in_lists_are_left_to_spark() -> None:
    naive = GreaterThan(("publishTime",), dt.datetime(2026, 1, 1))
    empty = In(("publishTime",), ())
    narrow, rest = narrowing([naive, empty], "pulsar-spark")
    assert narrow == Narrowing() and rest == [naive, empty]
    assert str(narrow) == "everything"


OPS = {
    GreaterThan: lambda a, b: a > b,
    GreaterThanOrEqual: lambda a, b: a >= b,
    LessThan: lambda a, b: a < b,
    LessThanOrEqual: lambda a, b: a <= b,
    EqualTo: lambda a, b: a == b,
}


@given(
    op=st.sampled_from(sorted(OPS, key=lambda c: c.__name__)),
    literal=st.integers(-(10**12), 10**15),
    near=st.integers(-3, 3),
)
def test_publish_time_bounds_keep_exactly_the_matching_milliseconds(op, literal, near) -> None:
    # Publish times are milliseconds; Spark's literal is microseconds.
    narrow, _ = narrowing([op(("publishTime",), _at(literal))], "pulsar-spark")
    for ms in {literal // 1000 + near, -(-literal // 1000) + near}:
        inside = (narrow.from_ms is None or ms >= narrow.from_ms) and (
            narrow.until_ms is None or ms < narrow.until_ms
        )
        assert inside == OPS[op](ms * 1000, literal), (op.__name__, literal, ms, narrow)


# -- what a narrowed read plans and reads --------------------------------------------------


def _fill(url: str, topic: str, rounds: int = 8) -> None:
    """``rounds`` rounds of 12 unbatched messages over the partitions, a few ms apart: one
    producer at a time, so publish times increase along each partition."""
    for r in range(rounds):
        produce(url, topic, [f"r{r}-{i}".encode() for i in range(3 * PARTITIONS)], batching=False)
        time.sleep(0.004)


def _read(reader: PulsarFilteringReader) -> list[dict]:
    rows = []
    for part in reader.partitions():
        batches = list(reader.read(part))
        if batches:
            rows.extend(pa.Table.from_batches(batches).select(["partition", "messageId",
                        "publishTime"]).to_pylist())  # fmt: skip
    return rows


def _reader(url: str, topic: str) -> PulsarFilteringReader:
    options = parse_options({"service.url": url, "topic": topic})
    return PulsarFilteringReader(options, plan_for(options), SPARK_SCHEMA)


@pytest.fixture
def filled(broker, partitioned_url, topic_name) -> Iterator[tuple[str, str, list[dict]]]:
    _fill(partitioned_url, topic_name)
    everything = _read(_reader(partitioned_url, topic_name))
    assert len(everything) == 8 * 3 * PARTITIONS
    yield partitioned_url, topic_name, everything


def _micros_of(row: dict) -> int:
    return (row["publishTime"] - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(
        microseconds=1
    )


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_a_narrowed_read_reads_exactly_the_matching_messages(filled, data) -> None:
    url, topic, everything = filled
    times = sorted({_micros_of(r) for r in everything})
    pick = st.sampled_from(times).flatmap(lambda t: st.integers(t - 1500, t + 1500))
    filters = []
    if data.draw(st.booleans(), "lower"):
        filters.append(data.draw(st.sampled_from([GreaterThan, GreaterThanOrEqual]))(
            ("publishTime",), _at(data.draw(pick, "from"))))  # fmt: skip
    if data.draw(st.booleans(), "upper"):
        filters.append(data.draw(st.sampled_from([LessThan, LessThanOrEqual]))(
            ("publishTime",), _at(data.draw(pick, "until"))))  # fmt: skip
    chosen = data.draw(st.sets(st.integers(0, PARTITIONS - 1)), "partitions")
    if chosen:
        filters.append(In(("partition",), tuple(sorted(chosen))))
    reader = _reader(url, topic)
    rest = list(reader.pushFilters(filters))
    assert all(isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual))
               for f in rest)  # fmt: skip

    def matches(row: dict) -> bool:
        micros = _micros_of(row)
        return (not chosen or row["partition"] in chosen) and all(
            OPS[type(f)](micros, _micros_of({"publishTime": f.value})) for f in rest
        )

    expected = sorted(r["messageId"] for r in everything if matches(r))
    got = sorted(r["messageId"] for r in _read(reader))
    assert got == expected, (reader.narrowing, filters)


# -- through Spark -------------------------------------------------------------------------


def _physical_plan(spark, df) -> str:
    df.createOrReplaceTempView("pushdown_plan")
    (row,) = spark.sql("EXPLAIN SELECT * FROM pushdown_plan").collect()
    return str(row[0])


def test_spark_queries_give_the_same_rows_with_pushdown_on_and_off(
    spark, read_pulsar, filled
) -> None:
    url, topic, everything = filled
    times = sorted(r["publishTime"] for r in everything)
    low, high = times[len(times) // 3], times[2 * len(times) // 3]

    def queries(**options: str) -> dict[str, object]:
        # A DataFrame per query: Spark 4.1 to 4.3 keep a pushed plan on the DataFrame.
        def load():
            return read_pulsar(url, topic=topic, **options)

        window = load().where((F.col("publishTime") >= F.lit(low)) & (F.col("publishTime") < high))
        got: dict[str, object] = {
            "one": sorted(r.messageId for r in load().where("partition = 3").collect()),
            "one partitions": load().where("partition = 3").rdd.getNumPartitions(),
        }
        if options:  # the rest once pushdown is asked for, with the setting off and on
            got["window"] = sorted(r.messageId for r in window.select("messageId").collect())
            got["plan"] = _physical_plan(spark, load().where("partition = 3"))
            got["window plan"] = _physical_plan(spark, window)
            got["all"] = load().count()  # no filter: planned by Spark's other worker
            topic_x = load().where(F.col("topic") == "persistent://public/default/x")
            got["other topic"] = topic_x.count()
        return got

    plain = queries(pushFilters="true")  # the setting off (Spark's default): no pushFilters
    spark.conf.set(CONF, "true")
    try:
        pushed = queries(pushFilters="true")
        auto = queries()  # where Spark keeps pushed plans per DataFrame: not pushed
    finally:
        spark.conf.unset(CONF)
    expected = sorted(r["messageId"] for r in everything if low <= r["publishTime"] < high)
    partition_3 = sorted(r["messageId"] for r in everything if r["partition"] == 3)
    for got in (plain, pushed):
        assert got["window"] == expected
        assert got["other topic"] == 0
        assert got["all"] == len(everything)
    assert plain["one"] == pushed["one"] == auto["one"] == partition_3
    narrowed = 1 if plans_per_query() else PARTITIONS
    assert (plain["one partitions"], pushed["one partitions"]) == (PARTITIONS, 1)
    assert auto["one partitions"] == narrowed
    # Pushed, the partition filter leaves the plan: the scan itself takes care of it.
    assert "Filter (partition" in str(plain["plan"]), plain["plan"]
    assert "Filter (" not in str(pushed["plan"]), pushed["plan"]
    assert "Filter (" in str(pushed["window plan"])  # the scan reads the window, Spark checks


def test_a_dataframe_keeps_a_pushed_plan_on_spark_before_plans_per_query(
    spark, read_pulsar, pulsar_lite_partitioned, topic_name
) -> None:
    """What ``pushFilters=true`` trades on Spark 4.1 to 4.3 (README, Filter pushdown): a
    DataFrame that ran a pushed query reads with that plan when it is scanned again
    without filters. Where Spark keeps plans per query, it reads everything again."""
    url = pulsar_lite_partitioned.service_url
    _fill(url, topic_name, rounds=2)
    spark.conf.set(CONF, "true")
    try:
        df = read_pulsar(url, topic=topic_name, pushFilters="true")
        one = df.where("partition = 3").count()
        again = df.count()
    finally:
        spark.conf.unset(CONF)
    assert 0 < one < 2 * 3 * PARTITIONS
    assert again == (2 * 3 * PARTITIONS if plans_per_query() else one)
