"""Arrow arrays from decoded Avro values: numbers into their reader type, byte ranges into
binary, string or decimal columns.

The numbers come as NumPy arrays (int64 for ints and longs, float32/64),
the byte values as (start, length) ranges of the buffer; each function builds
the column of the reader's Arrow type in one step (promotions int -> long ->
float -> double included). Text is checked to be UTF-8 over the whole column
at once; decimals (big-endian two's complement, Avro's encoding) are turned
into Arrow's little-endian 128- or 256-bit integers with one gather.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from ...arrays import Int64s, Ints
from ...gather import gather_binary, utf8_errors
from .lanes import Lanes

__all__ = ["bytes_array", "decimal_array", "number_array"]


def number_array(values: np.ndarray[Any, Any], out: pa.DataType) -> pa.Array:
    """An int64 or float NumPy array as a column of ``out`` (a number or a temporal type)."""
    if pa.types.is_floating(out):
        return pa.array(values.astype(out.to_pandas_dtype(), copy=False), out)
    if pa.types.is_integer(out):
        return pa.Array.from_buffers(out, len(values), [None, pa.py_buffer(_as(values, out))])
    # Temporal: the storage integer of the type's width.
    storage = pa.int32() if out.bit_width == 32 else pa.int64()
    return pa.Array.from_buffers(out, len(values), [None, pa.py_buffer(_as(values, storage))])


def _as(values: np.ndarray[Any, Any], out: pa.DataType) -> np.ndarray[Any, Any]:
    return values.astype(out.to_pandas_dtype(), copy=False)


def bytes_array(
    lanes: Lanes, start: Int64s, length: Int64s, out: pa.DataType, path: str
) -> pa.Array:
    """The byte ranges as a column of ``out``: binary, string (checked to be UTF-8,
    failing the lanes whose text is not) or decimal."""
    if pa.types.is_decimal(out):
        return decimal_array(lanes, start, length, out, path)
    binary = gather_binary(lanes.data, start, length)
    if not pa.types.is_string(out):
        return binary
    text = binary.view(pa.string())
    bad = utf8_errors(binary)
    if bad is not None:
        lanes.fail(bad, path, "text that is not valid UTF-8")
        return gather_binary(lanes.data, start, np.where(bad, 0, length)).view(pa.string())
    return text


def decimal_array(lanes: Lanes, start: Ints, length: Ints, out: pa.DataType, path: str) -> pa.Array:
    """Big-endian two's complement integers (Avro decimals) as a decimal column of ``out``.

    A value longer than the decimal's width fails unless its extra leading bytes
    only repeat its sign; an empty value is zero.
    """
    width = out.bit_width // 8
    start = np.asarray(start, np.int64)
    length = np.asarray(length, np.int64)
    n = len(start)
    keep = np.minimum(length, width)
    last = start + length - 1  # least significant byte
    k = np.arange(width, dtype=np.int64)
    index = last[:, None] - k
    inside = k < keep[:, None]
    gathered = (
        lanes.data.take(index, mode="clip") if len(lanes.data) else np.zeros((n, width), np.uint8)
    )
    first = lanes.data.take(start, mode="clip") if len(lanes.data) else np.zeros(n, np.uint8)
    fill = np.where((first >= 0x80) & (length > 0), 0xFF, 0).astype(np.uint8)
    little = np.where(inside, gathered, fill[:, None])
    long = np.flatnonzero(length > width)
    if len(long):
        bad = np.zeros(n, bool)
        for i in long.tolist():  # rare: values padded past the decimal's width
            head = lanes.data[start[i] : start[i] + length[i] - width + 1]
            sign = 0xFF if head[0] >= 0x80 else 0
            bad[i] = not ((head[:-1] == sign).all() and (head[-1] >= 0x80) == (sign == 0xFF))
        if bad.any():
            lanes.fail(bad, path, f"a decimal wider than {width} bytes")
            little[bad] = 0
    column = pa.Array.from_buffers(out, n, [None, pa.py_buffer(np.ascontiguousarray(little))])
    try:
        column.validate(full=True)  # every value within the precision
    except pa.ArrowInvalid:
        # Error path only: the values with more digits than the precision.
        most = 10**out.precision
        unscaled = [int.from_bytes(row.tobytes(), "little", signed=True) for row in little]
        bad = np.array([abs(v) >= most for v in unscaled], bool)
        lanes.fail(bad, path, f"a decimal with more than {out.precision} digits")
        little[bad] = 0
        column = pa.Array.from_buffers(out, n, [None, pa.py_buffer(little)])
    return column
