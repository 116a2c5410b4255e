"""The Spark batch source and sink (needs pyspark 4.0+, the ``spark`` extra).

Modules: :mod:`.options` (option names and parsing, no pyspark),
:mod:`.connect` (clients from options), :mod:`.ranges` (partition ranges:
planning, ``minPartitions`` splits, reading), :mod:`.reader`,
:mod:`.writer`, :mod:`.datasource` (``PulsarDataSource``) and :mod:`.compat`
(Spark version checks).
"""

from .datasource import SPARK_SCHEMA, PulsarDataSource

__all__ = ["SPARK_SCHEMA", "PulsarDataSource"]
