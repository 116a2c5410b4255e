"""Spark helpers for tests: the local session, a local Spark Connect one, DataFrame equality.

:func:`available_now_values` runs a pulsar stream with ``Trigger.AvailableNow`` and gives
each micro-batch's values as text (raising what failed the query).

:func:`assert_same_rows` is chispa's ``assert_df_equality`` with rows in any order, the
way the Spark tests compare a DataFrame with another or with expected rows.

:func:`local_session` builds the classic ``local[2]`` session the ``spark`` fixture
(``tests/spark/conftest.py``) shares between the Spark tests, with the pulsar source
registered. Its workers must run this interpreter (it has pyarrow and the connector), so
``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` point at ``sys.executable`` before the
JVM starts.

``SparkSession.builder.remote("local[2]")`` starts an in-process Connect server on the
fixed port 15002 (bound on all interfaces) and connects to ``sc://localhost:15002``: two test
runs at once on one machine (two checkouts, or CI beside a developer) collide with
``BindException: Failed to bind to address 0.0.0.0/0.0.0.0:15002``. pyspark picks an
ephemeral port only under ``SPARK_TESTING``, which turns on Spark's test-only behaviours.

:func:`local_connect_session` does what ``remote("local[...]")`` does, with the port left to
the OS: a classic session whose ``spark.plugins`` starts the Connect server on loopback,
port 0; the port the server got, read from the JVM; Connect mode on
(``SPARK_CONNECT_MODE_ENABLED``, which pyspark sets too); a Connect session on it. Use it in a
subprocess of its own (the pytest process has the classic ``spark`` fixture).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "assert_same_rows",
    "spark",
    "available_now_values",
    "TEST_JVM_OPTIONS",
    "local_connect_session",
    "local_session",
    "sortable_maps",
]

_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService$"

#: JVM options of the tests' Spark drivers and executors: the client compiler only and the
#: serial collector. A test's JVM lives for minutes and mostly plans and schedules, which
#: C2's compile threads and the parallel collector's threads only slow on the 2-core CI
#: machines (a peers' test file: 21% less driver CPU, 11% less wall).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's shared classic ``local[2]`` session (:func:`local_session`), for the Spark
    tests and the documentation's examples; this module is a pytest plugin of
    ``tests/conftest.py`` for it."""
    session = local_session()
    try:
        yield session
    finally:
        session.stop()


def local_session(master: str = "local[2]", conf: dict[str, str] | None = None) -> SparkSession:
    """A classic session on ``master`` (UTC, no UI, 2 shuffle partitions, loopback driver;
    more settings in ``conf``) with :class:`pulsar_spark.PulsarDataSource` registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pulsar_spark import PulsarDataSource

    builder = SparkSession.builder
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = (
        builder.master(master)
        .appName("pulsar-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(PulsarDataSource)
    return session


def local_connect_session(master: str = "local[2]") -> SparkSession:
    """Start a Spark Connect server with ``master`` in this process; return a Connect
    session on it (``pyspark.sql.connect.session.SparkSession``)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("pulsar-spark-connect-tests")
        .set("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .set("spark.connect.grpc.binding.address", "127.0.0.1")
        .set("spark.connect.grpc.binding.port", "0")
        .set("spark.ui.enabled", "false")
        .set("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.session.timeZone", "UTC")
        # As pyspark's own local Connect server: each client session its own artifacts.
        .set("spark.sql.artifact.isolation.enabled", "true")
        .set("spark.sql.artifact.isolation.alwaysApplyClassloader", "true")
    )
    server = SparkSession(SparkContext.getOrCreate(conf))
    server.sparkContext.setLogLevel("ERROR")
    port = getattr(getattr(server._jvm, _SERVICE), "MODULE$").localPort()
    # From here on pyspark.sql.functions and friends build Connect columns (pyspark's
    # is_remote()); set after the JVM started, so its Python workers do not see it, as in
    # remote("local"). And the Connect builder itself: pyspark.sql's refuses a remote session
    # beside a classic one.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()


def sortable_maps(df: DataFrame) -> DataFrame:
    """``df`` with each map column replaced by its entries sorted by key.

    Spark neither sorts nor hashes a map, which chispa's ``ignore_row_order`` does with
    every column; two maps are equal exactly when their sorted entries are.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import MapType

    return df.select(
        [
            F.array_sort(F.map_entries(F.col(f.name))).alias(f.name)
            if isinstance(f.dataType, MapType)
            else F.col(f.name)
            for f in df.schema.fields
        ]
    )


def assert_same_rows(actual: DataFrame, expected: DataFrame) -> None:
    """chispa's ``assert_df_equality`` with rows in any order: the same column names and
    types (nullability aside) and the same rows, each as many times; map columns compared
    through :func:`sortable_maps`."""
    from chispa import assert_df_equality

    assert_df_equality(
        actual,
        expected,
        ignore_row_order=True,
        ignore_nullable=True,
        transforms=[sortable_maps],
    )


def available_now_values(
    spark: SparkSession, options: dict[str, str], checkpoint: str | os.PathLike[str]
) -> list[list[str]]:
    """The values (as text) of each non-empty micro-batch of a pulsar stream with
    ``options``, run with ``Trigger.AvailableNow`` over ``checkpoint`` (run it again on the
    same checkpoint to go on); what failed the query is raised."""
    batches: list[list[str]] = []

    def collect(frame: DataFrame, _batch_id: int) -> None:
        batches.append([r.value for r in frame.selectExpr("cast(value as string) value").collect()])

    query = (
        spark.readStream.format("pulsar")
        .options(**options)
        .load()
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(collect)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive, "the query did not finish in time"
    failure = query.exception()
    if failure is not None:
        raise failure
    return [batch for batch in batches if batch]
