"""Arrow types of decoded values as Spark types, and the Arrow schema Spark expects back.

pyspark's own ``from_arrow_type`` refuses some of the types the schema mapping
gives (timestamps in milliseconds, ``time32``), so :func:`spark_type` maps them
itself::

    Arrow                                     Spark
    bool, int8/16/32/64, float32/64           BooleanType, Byte/Short/Integer/LongType,
                                              FloatType, DoubleType
    string, binary                            StringType, BinaryType
    date32                                    DateType
    timestamp[any unit, with a zone]          TimestampType
    timestamp[any unit, no zone]              TimestampNTZType
    time32/time64                             TimeType(6) (Spark 4.1+; before: LongType,
                                              microseconds of the day, nanoseconds
                                              rounded down)
    decimal128(p, s)                          DecimalType(p, s)
    list / map / struct                       ArrayType / MapType / StructType
    dictionary<_, V>                          V's type
    null                                      NullType

A Python data source must yield batches whose Arrow schema is exactly the one
Spark derives from the declared schema (``to_arrow_schema``): :func:`arrow_for`
gives it, and the readers cast decoded batches to it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from .errors import TopicSchemaError

__all__ = ["arrow_for", "spark_schema", "spark_type", "to_spark_arrow"]

_TIME_TYPE = getattr(T, "TimeType", None)

_SIMPLE = [
    (pa.types.is_null, T.NullType()),
    (pa.types.is_boolean, T.BooleanType()),
    (pa.types.is_int8, T.ByteType()),
    (pa.types.is_int16, T.ShortType()),
    (pa.types.is_int32, T.IntegerType()),
    (pa.types.is_int64, T.LongType()),
    (pa.types.is_float32, T.FloatType()),
    (pa.types.is_float64, T.DoubleType()),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), T.StringType()),
    (
        lambda t: (
            pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t)
        ),
        T.BinaryType(),
    ),
    (pa.types.is_date, T.DateType()),
]


def spark_type(dtype: pa.DataType, *, path: str = "value") -> T.DataType:
    """The Spark type of an Arrow type (see the module's table).

    Raises:
        TopicSchemaError: a type Spark has no counterpart for, naming ``path``.
    """
    for test, mapped in _SIMPLE:
        if test(dtype):
            return mapped
    if pa.types.is_dictionary(dtype):
        return spark_type(dtype.value_type, path=path)
    if pa.types.is_timestamp(dtype):
        return T.TimestampType() if dtype.tz else T.TimestampNTZType()
    if pa.types.is_time(dtype):
        return _TIME_TYPE(6) if _TIME_TYPE is not None else T.LongType()
    if pa.types.is_decimal(dtype) and dtype.precision <= 38:
        return T.DecimalType(dtype.precision, dtype.scale)
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        item = dtype.value_field
        return T.ArrayType(spark_type(item.type, path=path + "[]"), item.nullable)
    if pa.types.is_map(dtype):
        key = spark_type(dtype.key_type, path=path + "{key}")
        item = dtype.item_field
        return T.MapType(key, spark_type(item.type, path=path + "{}"), item.nullable)
    if pa.types.is_struct(dtype):
        return T.StructType(
            [
                T.StructField(f.name, spark_type(f.type, path=f"{path}.{f.name}"), f.nullable)
                for f in dtype
            ]
        )
    msg = f"field {path}: the Arrow type {dtype} has no Spark type; read with schemaMode=raw"
    raise TopicSchemaError(msg)


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of a read's Arrow row schema."""
    return T.StructType(
        [T.StructField(f.name, spark_type(f.type, path=f.name), f.nullable) for f in schema]
    )


def arrow_for(schema: T.StructType) -> pa.Schema:
    """The Arrow schema Spark expects of batches of ``schema`` (what its worker checks)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pragma: no cover - pysparks without the timezone argument
        return to_arrow_schema(schema)


def to_spark_arrow(batch: pa.RecordBatch, target: pa.Schema) -> pa.RecordBatch:
    """``batch`` with the types of ``target`` (the same values: units, field names and
    nullability as Spark has them)."""
    if batch.schema.equals(target):
        return batch
    columns = [
        conform(column, field.type) for column, field in zip(batch.columns, target, strict=True)
    ]
    return pa.RecordBatch.from_arrays(columns, schema=target)


def conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``: nested arrays rebuilt around their children (Arrow's cast
    refuses a non-nullable child holding nulls under null parents, which is valid data),
    leaves cast (milliseconds to microseconds, time of day...)."""
    if array.type.equals(target):
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = [conform(array.field(i), f.type) for i, f in enumerate(target)]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if pa.types.is_map(target) and pa.types.is_map(array.type):
        offsets, entries = _children(array)
        keys = conform(entries.field(0), target.key_type)
        items = conform(entries.field(1), target.item_type)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=mask)
    if pa.types.is_list(target) and pa.types.is_list(array.type):
        offsets, values = _children(array)
        values = conform(values, target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=mask)
    if pa.types.is_time(array.type) and not pa.types.is_time(target):
        # Spark before TimeType: microseconds of the day, a LOCAL_TIME's nanoseconds
        # rounded down (times of day are never negative: truncating is rounding down).
        array = array.cast(pa.time64("us"), safe=False).cast(pa.int64())
    elif pa.types.is_time(array.type):  # a Spark whose TimeType is coarser: rounded down
        return array.cast(target, safe=False)
    return array.cast(target)


def _children(array: pa.Array) -> tuple[pa.Array, pa.Array]:
    """A (sliced) list or map array's offsets from 0 and the values they index."""
    offsets = array.offsets
    first, last = offsets[0].as_py(), offsets[-1].as_py()
    return pc.subtract(offsets, first), array.values.slice(first, last - first)
