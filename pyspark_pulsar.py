"""Spark's automatic registration of the ``pulsar`` format.

On its first use of a Python data source, Spark 4 looks for top-level modules whose names
start with ``pyspark_`` and registers the ``DefaultSource`` class of each under its
``name()``. This module is that entry: with the package installed where Spark's Python
workers run, ``spark.read.format("pulsar")``, ``writeStream.format("pulsar")`` and SQL's
``USING pulsar`` work in a fresh session, Spark Connect included, with no
``spark.dataSource.register`` call.
"""

from __future__ import annotations

from pulsar_spark.spark.datasource import PulsarDataSource as DefaultSource

__all__ = ["DefaultSource"]
