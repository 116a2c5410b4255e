"""Which pyspark this is, and features that need a newer one.

The Python Data Source API (``pyspark.sql.datasource``) and its Arrow paths
(``read()`` yielding ``pyarrow.RecordBatch``, ``DataSourceArrowWriter``) came
with Spark 4.0, the oldest Spark this connector supports.
"""

from __future__ import annotations

import re

from .errors import SparkVersionError

__all__ = ["MINIMUM_SPARK", "require_spark", "spark_version"]

MINIMUM_SPARK = (4, 0)


def spark_version() -> tuple[int, int]:
    """(major, minor) of the installed pyspark."""
    import pyspark

    found = re.match(r"(\d+)\.(\d+)", pyspark.__version__)
    if found is None:  # pragma: no cover - every release has major.minor
        return (0, 0)
    return int(found.group(1)), int(found.group(2))


def require_spark(
    feature: str, minimum: tuple[int, int], installed: tuple[int, int] | None = None
) -> None:
    """Raise :class:`SparkVersionError` saying what needs which Spark, and what is here."""
    have = installed or spark_version()
    if have < minimum:
        import pyspark

        msg = (
            f"{feature} needs Spark {minimum[0]}.{minimum[1]} or newer; this is pyspark "
            f"{pyspark.__version__}. Upgrade pyspark (pip install 'pyspark>="
            f"{minimum[0]}.{minimum[1]}')."
        )
        raise SparkVersionError(msg)
