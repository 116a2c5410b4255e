"""JSON text of whole Arrow columns of scalars, as pieces (:mod:`pulsar_spark.columnar.pieces`):
strings quoted and escaped, numbers, booleans, bytes as Base64 strings, with pyarrow.compute.

Strings escape ``"``, ``\\`` and control characters (``\\n``, ``\\t``, ``\\r``,
``\\b``, ``\\f``, others ``\\u00XX``) as Jackson does; other characters stay
UTF-8. Numbers are the shortest text that reads back the same value (Arrow's
casts); NaN and infinities are the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"`` as Jackson (the Java client's JSON schema) writes and reads them:
bare tokens are not JSON, and Java consumers refuse them. Bytes are standard Base64 in a
string, as Jackson writes ``byte[]``.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import Int64s
from ...pieces import Piece, base64_piece, binary_piece, choice, constant

__all__ = ["base64_text", "bool_text", "float_text", "integer_text", "string_text", "text_piece"]

_SHORT = {8: "\\b", 9: "\\t", 10: "\\n", 12: "\\f", 13: "\\r"}


def text_piece(array: pa.Array) -> Piece:
    """The bytes of a string array without nulls."""
    return binary_piece(array)


def string_text(array: pa.Array) -> list[Piece]:
    """Quoted, escaped JSON strings of a string array without nulls."""
    body = binary_piece(array)
    rows = len(array)
    data = body.data
    if len(data) and ((data < 0x20).any() or (data == ord('"')).any() or (data == ord("\\")).any()):
        text = array.cast(pa.large_string())
        text = pc.replace_substring(text, "\\", "\\\\")
        text = pc.replace_substring(text, '"', '\\"')
        for code in np.unique(data[data < 0x20]).tolist():
            escape = _SHORT.get(code, f"\\u{code:04X}")
            text = pc.replace_substring(text, chr(code), escape)
        body = binary_piece(text)
    quote = constant(rows, b'"')
    return [quote, body, quote]


def integer_text(numbers: Int64s) -> Piece:
    """Integers as JSON numbers."""
    return binary_piece(pa.array(numbers, pa.int64()).cast(pa.string()))


def float_text(array: pa.Array, dtype: pa.DataType) -> list[Piece]:
    """Floats (as ``dtype``, float32 or float64) as JSON numbers; NaN, Infinity and
    -Infinity as the strings Jackson writes."""
    array = array.cast(dtype)
    text = array.cast(pa.string())
    finite = pc.is_finite(array)
    if finite.false_count:
        names = pc.if_else(
            pc.is_nan(array),
            '"NaN"',
            pc.if_else(pc.greater(array, 0), '"Infinity"', '"-Infinity"'),
        )
        text = pc.if_else(finite, text, names)
    return [binary_piece(text)]


def bool_text(array: pa.Array) -> list[Piece]:
    """Booleans as ``true`` / ``false``."""
    flags = np.asarray(array.to_numpy(zero_copy_only=False), bool)
    return [choice((b"false", b"true"), flags.astype(np.int64))]


def base64_text(array: pa.Array) -> list[Piece]:
    """Bytes as quoted standard Base64 strings."""
    quote = constant(len(array), b'"')
    return [quote, base64_piece(binary_piece(array)), quote]
