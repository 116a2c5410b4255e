"""The docs tests' Spark: the run's shared ``local[2]`` session (the same one the Spark tests
use when they run in the same process: :func:`tests.support.spark.local_session`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from tests.support.spark import local_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = local_session()
    try:
        yield session
    finally:
        session.stop()
