"""Spark's automatic registration of the ``pulsar`` format (Spark 4.1 and newer).

On its first use of a Python data source, Spark 4 looks for top-level modules whose names
start with ``pyspark_`` and registers the ``DefaultSource`` class of each under its
``name()``. This module is that entry: with the package installed where Spark's Python
workers run, ``spark.read.format("pulsar")``, ``writeStream.format("pulsar")`` and SQL's
``USING pulsar`` work in a fresh session, Spark Connect included, with no
``spark.dataSource.register`` call.

Spark 4.0 refuses a later ``spark.dataSource.register`` of a name it registered this way
(``DATA_SOURCE_ALREADY_EXISTS``), which would break every job written for 4.0 that
registers the source, as 4.0 needs; 4.1 lets a registration replace it. So on 4.0 this
module offers nothing, and jobs register the source as before.
"""

from __future__ import annotations

from pulsar_spark.spark.compat import spark_version

__all__ = ["DefaultSource"]

if spark_version() >= (4, 1):
    from pulsar_spark.spark.datasource import PulsarDataSource as DefaultSource
else:
    __all__ = []
