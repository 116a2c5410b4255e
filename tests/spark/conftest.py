"""One local[2] SparkSession for every Spark test, with the pulsar source registered.

The workers must run this interpreter (it has pyarrow and the connector), so
``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` point at ``sys.executable``
before the JVM starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pulsar_spark import PulsarDataSource

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pulsar-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(PulsarDataSource)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture
def read_pulsar(spark: SparkSession):
    """``read_pulsar(url, **options) -> DataFrame`` (option names as Spark takes them)."""

    def read(url: str, **options: str) -> DataFrame:
        reader: DataFrameReader = spark.read.format("pulsar").option("service.url", url)
        for name, value in options.items():
            reader = reader.option(name, value)
        return reader.load()

    return read


@pytest.fixture
def partitioned_url(broker, request: pytest.FixtureRequest, topic_name: str) -> str:
    """The service URL of a broker of ``broker``'s kind on which ``topic_name`` has 4
    partitions: the partitioned pulsar-lite, or Apache Pulsar after an admin call."""
    if broker.kind == "lite":
        return request.getfixturevalue("pulsar_lite_partitioned").service_url
    broker.admin.create_partitioned_topic(topic_name, 4)
    return broker.service_url
