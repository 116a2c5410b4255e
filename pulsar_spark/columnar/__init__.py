"""Arrow decoding of Pulsar messages: entries into RecordBatches of :data:`ROW_SCHEMA` rows.

The wire (:mod:`pulsar_spark.protocol`) hands over entries; this package lays
their messages out as Arrow columns with NumPy, without a Python step per
message. It is the only part of the library below the client that imports
pyarrow and numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .avro_decode import AvroPlan, avro_plan
    from .builder import ArrowBatchBuilder
    from .gather import gather_binary, gather_string, map_array
    from .json_decode import JsonPlan, decode_json
    from .primitive_decode import decode_primitive, decode_primitive_collect
    from .schema import ROW_SCHEMA
    from .schema_arrow import arrow_type, avro_schema_for, primitive_schema_type
    from .schema_errors import (
        SchemaDecodeError,
        SchemaError,
        SchemaResolutionError,
        UnmappableSchema,
    )
    from .smm_columns import SmmColumns, decode_smm_columns

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AvroPlan": "avro_decode",
        "avro_plan": "avro_decode",
        "ArrowBatchBuilder": "builder",
        "gather_binary": "gather",
        "gather_string": "gather",
        "map_array": "gather",
        "JsonPlan": "json_decode",
        "decode_json": "json_decode",
        "decode_primitive": "primitive_decode",
        "decode_primitive_collect": "primitive_decode",
        "ROW_SCHEMA": "schema",
        "arrow_type": "schema_arrow",
        "avro_schema_for": "schema_arrow",
        "primitive_schema_type": "schema_arrow",
        "SchemaDecodeError": "schema_errors",
        "SchemaError": "schema_errors",
        "SchemaResolutionError": "schema_errors",
        "UnmappableSchema": "schema_errors",
        "SmmColumns": "smm_columns",
        "decode_smm_columns": "smm_columns",
    },
)

__all__ = [
    "ROW_SCHEMA",
    "ArrowBatchBuilder",
    "AvroPlan",
    "JsonPlan",
    "SchemaDecodeError",
    "SchemaError",
    "SchemaResolutionError",
    "SmmColumns",
    "UnmappableSchema",
    "arrow_type",
    "avro_plan",
    "avro_schema_for",
    "decode_json",
    "decode_primitive",
    "decode_primitive_collect",
    "decode_smm_columns",
    "gather_binary",
    "gather_string",
    "map_array",
    "primitive_schema_type",
]
