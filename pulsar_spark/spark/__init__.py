"""The Spark batch source and sink (needs pyspark 4.0+, the ``spark`` extra).

Modules: :mod:`.options` (option names and parsing), :mod:`.connect`
(clients from options) and :mod:`.ranges` (partition ranges: planning,
``minPartitions`` splits, reading) do not import pyspark; :mod:`.reader`,
:mod:`.writer` and :mod:`.datasource` (``PulsarDataSource``) do, and
:mod:`.compat` checks the Spark version. ``PulsarDataSource`` and
``SPARK_SCHEMA`` load on first use.
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
