"""The smoke set, run on each pyspark the README claims in a process of its own.

Not collected by the main run (the name does not start with ``test_``): the outer test
``tests/versions/test_spark_versions.py`` runs this file with the python of a venv of an older
pyspark (or its own, for the newest), with ``PYTHONPATH`` starting at the checkout and these
variables set:

``PULSAR_SPARK_SMOKE_URL``     the service URL of the pulsar-lite the outer run started
``PULSAR_SPARK_SMOKE_PREFIX``  a prefix for this run's topic names (unique per run and version)
``PULSAR_SPARK_SMOKE_PYSPARK`` the pyspark version this run is meant to have

One Spark session serves every test. Each feature is checked where the installed Spark has
it; where it lacks it, the test asserts the error the README promises instead (nothing is
skipped, so the outer test can require every test here to pass).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pulsar_spark.spark.compat import spark_version
from tests.support import quick_start
from tests.support.quick_start import run_quick_start
from tests.support.spark import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

URL = os.environ.get("PULSAR_SPARK_SMOKE_URL", "")
PREFIX = os.environ.get("PULSAR_SPARK_SMOKE_PREFIX", "smoke")
SPARK = spark_version()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    assert URL, "PULSAR_SPARK_SMOKE_URL is not set: run this file through tests/versions"
    session = local_session()
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> str:
    return f"persistent://public/default/{PREFIX}-{request.node.name.removeprefix('test_')}"


def produce(topic: str, values: list[bytes]) -> None:
    quick_start.produce(URL, topic, values)


def read_values(topic: str) -> list[bytes]:
    return quick_start.read_values(URL, topic)


def stream(spark: SparkSession, topic: str, **options: str) -> Any:
    reader = (
        spark.readStream.format("pulsar")
        .option("service.url", URL)
        .option("topic", topic)
        .option("startingOffsets", "earliest")
    )
    return reader.options(**options).load()


def test_pyspark_is_the_one_asked_for() -> None:
    import pyspark

    assert pyspark.__version__ == os.environ.get("PULSAR_SPARK_SMOKE_PYSPARK", pyspark.__version__)


def test_batch_write_then_read(spark: SparkSession, topic: str) -> None:
    rows = [(f"k{i}", f"v{i}") for i in range(50)]
    df = spark.createDataFrame(rows, "key string, value string")
    df.write.format("pulsar").option("service.url", URL).option("topic", topic).mode(
        "append"
    ).save()
    back = (
        spark.read.format("pulsar")
        .option("service.url", URL)
        .option("topic", topic)
        .load()
        .selectExpr("cast(key as string) key", "cast(value as string) value")
        .collect()
    )
    assert sorted((r.key, r.value) for r in back) == sorted(rows)


def test_typed_read_with_json_schema(spark: SparkSession, topic: str) -> None:
    produce(topic, [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(20)])
    df = (
        spark.read.format("pulsar")
        .option("service.url", URL)
        .option("topic", topic)
        .option("jsonSchema", "id LONG, name STRING")
        .load()
    )
    assert df.schema["value"].dataType.simpleString() == "struct<id:bigint,name:string>"
    got = sorted((r.id, r.name) for r in df.select("value.*").collect())
    assert got == [(i, f"n{i}") for i in range(20)]


def test_filters_push_down_where_spark_has_it(spark: SparkSession, topic: str) -> None:
    """Spark 4.1+ with spark.sql.python.filterPushdown.enabled and pushFilters=true: a
    publish-time window is read from a seek, with the same rows; with the setting off, and
    on 4.0, the same query reads everything and Spark filters (no
    DATA_SOURCE_PUSHDOWN_DISABLED)."""
    import time

    from pyspark.sql import functions as F

    produce(topic, [b"old-%d" % i for i in range(10)])
    time.sleep(0.05)
    produce(topic, [b"new-%d" % i for i in range(5)])

    def load() -> Any:  # a DataFrame per query (see the README's Filter pushdown)
        reader = spark.read.format("pulsar").option("service.url", URL).option("topic", topic)
        return reader.option("pushFilters", "true").load()

    times = sorted({r.publishTime for r in load().select("publishTime").collect()})
    assert len(times) == 2
    conf = "spark.sql.python.filterPushdown.enabled"
    for setting in ("false", "true"):
        spark.conf.set(conf, setting)
        try:
            window = load().where(F.col("publishTime") >= F.lit(times[1]))
            assert sorted(bytes(r.value) for r in window.select("value").collect()) == [
                b"new-%d" % i for i in range(5)
            ]
            assert load().where("partition = 3").count() == 0  # not partitioned: -1
            assert load().count() == 15
        finally:
            spark.conf.unset(conf)


def test_stream_read(spark: SparkSession, topic: str) -> None:
    produce(topic, [b"s%d" % i for i in range(30)])
    name = re.sub(r"\W", "_", f"{PREFIX}_stream_read")
    query = (
        stream(spark, topic).select("value").writeStream.format("memory").queryName(name).start()
    )
    try:
        query.processAllAvailable()
        assert query.exception() is None
        got = sorted(r.value for r in spark.table(name).collect())
    finally:
        query.stop()
    assert got == sorted(b"s%d" % i for i in range(30))


def test_available_now_stream(spark: SparkSession, topic: str, tmp_path: Path) -> None:
    """``Trigger.AvailableNow`` reads what is there and stops: the source's own on 4.2+
    (SupportsTriggerAvailableNow), Spark's one micro-batch before."""
    produce(topic, [b"a%d" % i for i in range(40)])
    seen: list[bytes] = []
    query = (
        stream(spark, topic)
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .foreachBatch(lambda frame, _id: seen.extend(r.value for r in frame.collect()))
        .start()
    )
    assert query.awaitTermination(120), "the query did not finish in time"
    assert query.exception() is None
    assert sorted(seen) == sorted(b"a%d" % i for i in range(40))


def test_stream_write(spark: SparkSession, topic: str, tmp_path: Path) -> None:
    """The Pulsar stream sink (``DataSourceStreamArrowWriter``, Spark 4.1+); on 4.0 the
    error that says so."""
    produce(topic, [b"w%d" % i for i in range(25)])
    writer = (
        stream(spark, topic)
        .select("value")
        .writeStream.format("pulsar")
        .option("service.url", URL)
        .option("topic", f"{topic}-out")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    if SPARK < (4, 1):
        with pytest.raises(Exception, match=r"streaming writes to Pulsar.*needs Spark 4\.1"):
            query = writer.start()
            query.processAllAvailable()
        return
    query = writer.start()
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    assert sorted(read_values(f"{topic}-out")) == sorted(b"w%d" % i for i in range(25))


def test_rate_limited_stream(spark: SparkSession, topic: str, tmp_path: Path) -> None:
    """``maxRecordsPerTrigger`` (admission control, Spark 4.2+) splits 100 rows into
    micro-batches of 30; before 4.2 the option is refused, naming Spark 4.2."""
    produce(topic, [b"r%d" % i for i in range(100)])
    batches: list[int] = []
    writer = (
        stream(spark, topic, maxRecordsPerTrigger="30")
        .writeStream.option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .foreachBatch(lambda frame, _id: batches.append(frame.count()))
    )
    if SPARK < (4, 2):
        with pytest.raises(Exception, match=r"maxRecordsPerTrigger.*needs Spark 4\.2"):
            query = writer.start()
            query.awaitTermination(120)
            if query.exception() is not None:
                raise query.exception()  # type: ignore[misc]
        return
    query = writer.start()
    assert query.awaitTermination(120), "the query did not finish in time"
    assert query.exception() is None
    assert [n for n in batches if n] == [30, 30, 30, 10]


def test_readme_quick_start(spark: SparkSession, tmp_path: Path) -> None:
    """The quick start as written (its broker and topic names aside): the batch block on
    every Spark, the stream block where the README says it runs (4.1+); on 4.0 it fails
    with the error that names Spark 4.1."""
    run_quick_start(spark, URL, f"persistent://public/default/{PREFIX}-qs", tmp_path)
