"""Fixtures of the peers' scenarios: ``streams``, a factory of :class:`Stream` queries, each
stopped at the end of the test."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.spark.peers.support import Stream, Streams


@pytest.fixture
def streams(spark: SparkSession, tmp_path: Path) -> Iterator[Streams]:
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


@pytest.fixture(scope="session", autouse=True)
def _python_workers_started(spark: SparkSession, pulsar_lite, tmp_path_factory) -> None:
    """Start Spark's Python workers for the pulsar source once, before the first test: on a
    loaded machine the first start of a worker kind can miss Spark's connect-back timeout
    ("Python worker failed to connect back"), which is not what any test is about. A batch
    read and a stream of an empty topic, tried twice (then each test meets what is left)."""
    topic = "persistent://public/default/peers-warm-up"
    root = tmp_path_factory.mktemp("peers-warm-up")
    for attempt in range(2):
        try:
            spark.read.format("pulsar").option("service.url", pulsar_lite.service_url).option(
                "topic", topic
            ).load().count()
            Stream(spark, root / str(attempt), pulsar_lite.service_url, topic=topic).run()
            return
        except Exception as failure:  # noqa: PERF203 - a retry loop
            if "failed to connect back" not in str(failure):
                raise
