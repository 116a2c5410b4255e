"""Fixtures of the Spark tests: a reader and a partitioned URL (the shared ``spark`` session is
:func:`tests.support.spark.spark`, a plugin of ``tests/conftest.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession


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
