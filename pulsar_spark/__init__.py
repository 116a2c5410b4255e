"""pulsar-spark: a pure-Python Apache Pulsar connector for Apache Spark 4.

``pulsar_spark.PulsarDataSource`` (format ``"pulsar"``) is imported on first
use, so that the client (:mod:`pulsar_spark.client`) works without pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pulsar_spark.version import __version__

__all__ = ["PulsarDataSource", "__version__"]

if TYPE_CHECKING:
    from pulsar_spark.spark.datasource import PulsarDataSource


def __getattr__(name: str) -> Any:
    if name == "PulsarDataSource":
        from pulsar_spark.spark.datasource import PulsarDataSource

        return PulsarDataSource
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
