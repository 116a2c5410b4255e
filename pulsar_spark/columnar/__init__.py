"""Arrow decoding of Pulsar messages: entries into RecordBatches of :data:`ROW_SCHEMA` rows.

The wire (:mod:`pulsar_spark.protocol`) hands over entries; this package lays
their messages out as Arrow columns with NumPy, without a Python step per
message. It is the only part of the library below the client that imports
pyarrow and numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pulsar_spark.lazy import lazy_exports

if TYPE_CHECKING:
    from .gather import gather_binary, gather_string, map_array
    from .rows.builder import ArrowBatchBuilder
    from .rows.schema import ROW_SCHEMA
    from .rows.smm.columns import decode_smm_columns
    from .rows.smm.schema import SmmColumns
    from .values.arrow_types import arrow_type, primitive_schema_type
    from .values.avro.arrow_types import avro_schema_for
    from .values.avro.decode import AvroPlan, avro_plan
    from .values.decode import Decoded, decode_values, decoded_type
    from .values.encode_errors import SchemaMismatch
    from .values.errors import (
        SchemaDecodeError,
        SchemaError,
        SchemaResolutionError,
        UnmappableSchema,
    )
    from .values.json.decode import JsonPlan, decode_json
    from .values.key_value import split_inline
    from .values.primitive.decode import decode_primitive, decode_primitive_collect

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AvroPlan": "values.avro.decode",
        "avro_plan": "values.avro.decode",
        "ArrowBatchBuilder": "rows.builder",
        "gather_binary": "gather",
        "gather_string": "gather",
        "map_array": "gather",
        "JsonPlan": "values.json.decode",
        "decode_json": "values.json.decode",
        "decode_primitive": "values.primitive.decode",
        "decode_primitive_collect": "values.primitive.decode",
        "ROW_SCHEMA": "rows.schema",
        "arrow_type": "values.arrow_types",
        "avro_schema_for": "values.avro.arrow_types",
        "primitive_schema_type": "values.arrow_types",
        "SchemaMismatch": "values.encode_errors",
        "Decoded": "values.decode",
        "decode_values": "values.decode",
        "decoded_type": "values.decode",
        "split_inline": "values.key_value",
        "SchemaDecodeError": "values.errors",
        "SchemaError": "values.errors",
        "SchemaResolutionError": "values.errors",
        "UnmappableSchema": "values.errors",
        "SmmColumns": "rows.smm.schema",
        "decode_smm_columns": "rows.smm.columns",
    },
)

__all__ = [
    "Decoded",
    "decode_values",
    "decoded_type",
    "split_inline",
    "ROW_SCHEMA",
    "ArrowBatchBuilder",
    "AvroPlan",
    "JsonPlan",
    "SchemaDecodeError",
    "SchemaError",
    "SchemaMismatch",
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
