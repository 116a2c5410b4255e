"""Fixtures of the peers' scenarios: ``streams``, a factory of :class:`Stream` queries, each
stopped at the end of the test."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.peers.support import Stream


@pytest.fixture
def streams(spark: SparkSession, tmp_path: Path) -> Iterator[Callable[..., Stream]]:
    """``streams(url, transform=None, **options) -> Stream``; every query stopped at the end."""
    made: list[Stream] = []

    def make(url: str, transform=None, **options: str) -> Stream:
        stream = Stream(spark, tmp_path / f"q{len(made)}", url, transform, **options)
        made.append(stream)
        return stream

    yield make
    for stream in made:
        with contextlib.suppress(Exception):
            stream.stop()
