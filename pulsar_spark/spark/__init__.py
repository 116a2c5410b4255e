"""The Spark layer: the ``pulsar`` source and sink, batch and streaming (pyspark 4.0+).

Without pyspark: :mod:`pulsar_spark.spark.options.table` (every option once),
:mod:`pulsar_spark.spark.options.values`
and :mod:`pulsar_spark.spark.options.auth` (their parsers), :mod:`pulsar_spark.spark.options.parse`
(``parse_options``, ``PulsarOptions``), :mod:`.errors`, :mod:`.connect` (clients from options),
:mod:`.ranges` (partition ranges: planning, reading), :mod:`.splits`
(``minPartitions``) and :mod:`pulsar_spark.spark.stream.offsets` (the checkpoint's positions).
With pyspark: :mod:`.datasource` (``PulsarDataSource``), :mod:`.reader`,
:mod:`.writer`, :mod:`pulsar_spark.spark.stream.reader`, :mod:`pulsar_spark.spark.stream.writer`;
:mod:`.compat` checks the Spark version. ``PulsarDataSource`` and ``SPARK_SCHEMA`` load on
first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["SPARK_SCHEMA", "PulsarDataSource"]

if TYPE_CHECKING:
    from .datasource import SPARK_SCHEMA, PulsarDataSource


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import datasource

        return getattr(datasource, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
