"""Arrow decoding of Pulsar messages: entries into RecordBatches of :data:`ROW_SCHEMA` rows.

The wire (:mod:`pulsar_spark.protocol`) hands over entries; this package lays
their messages out as Arrow columns with NumPy, without a Python step per
message. It is the only part of the library below the client that imports
pyarrow and numpy.
"""

from __future__ import annotations

from .builder import ArrowBatchBuilder
from .gather import gather_binary, gather_string, map_array
from .schema import ROW_SCHEMA
from .smm_columns import SmmColumns, decode_smm_columns

__all__ = [
    "ROW_SCHEMA",
    "ArrowBatchBuilder",
    "SmmColumns",
    "decode_smm_columns",
    "gather_binary",
    "gather_string",
    "map_array",
]
