"""Avro field defaults (JSON values in the schema) as Arrow values of the reader's type.

A reader field the writer lacks takes its default on every row. Defaults are
JSON as the Avro specification writes them: bytes and fixed as strings whose
code points are the bytes (0-255), a union's default for its first branch
(null for a union with null), records as objects (missing fields take their
own defaults), enums as symbols, logical types as their underlying value
(days for a date, the unscaled bytes for a decimal...).
"""

from __future__ import annotations

import json
from decimal import Context, Decimal

import pyarrow as pa

from ..errors import SchemaResolutionError
from .schema import NO_DEFAULT, AvroType, Enum, Field, Fixed, Primitive, Record, Union

__all__ = ["default_array"]


#: Enough digits for any decimal (scaleb rounds to the context's precision).
_EXACT = Context(prec=100)


def default_array(field: Field, dtype: pa.DataType, *, topic: str = "", path: str = "") -> pa.Array:
    """A one-value array of ``dtype`` holding the field's default.

    Raises:
        SchemaResolutionError: the field has no default, or one that does not fit its type.
    """
    if field.default is NO_DEFAULT:
        msg = "the reader schema has a field the writer schema lacks, without a default"
        raise SchemaResolutionError(msg, topic=topic, field=path)
    try:
        return pa.array([_python(field.type, field.default)], dtype)
    except (TypeError, ValueError, ArithmeticError, pa.ArrowException) as exc:
        msg = f"the default {json.dumps(field.default)} does not fit the field's type ({exc})"
        raise SchemaResolutionError(msg, topic=topic, field=path) from None


def _python(node: AvroType, value: object) -> object:
    """The value Arrow builds ``node``'s column from, for a default written as JSON."""
    if isinstance(node, Union):
        if value is None and any(b.kind == "null" for b in node.branches):
            return None
        return _python(node.branches[0], value)
    if isinstance(node, Primitive | Fixed):
        return _scalar(node, value)
    if isinstance(node, Enum):
        if value not in node.symbols:
            msg = f"{value!r} is not a symbol of {node.name}"
            raise ValueError(msg)
        return value
    if isinstance(node, Record):
        if not isinstance(value, dict):
            msg = "a record default is an object"
            raise ValueError(msg)
        out: dict[str, object] = {}
        for f in node.fields:
            if f.name in value:
                out[f.name] = _python(f.type, value[f.name])
            elif f.default is not NO_DEFAULT:
                out[f.name] = _python(f.type, f.default)
            else:
                msg = f"field {f.name} missing"
                raise ValueError(msg)
        return out
    if node.kind == "array" and isinstance(value, list):
        return [_python(node.items, v) for v in value]  # type: ignore[union-attr]
    if node.kind == "map" and isinstance(value, dict):
        return [(k, _python(node.values, v)) for k, v in value.items()]  # type: ignore[union-attr]
    msg = f"not a {node.kind}"
    raise ValueError(msg)


def _scalar(node: Primitive | Fixed, value: object) -> object:
    kind = node.kind
    if kind == "null":
        if value is not None:
            msg = "not null"
            raise ValueError(msg)
        return None
    if kind == "boolean" and isinstance(value, bool):
        return value
    if kind in ("int", "long") and isinstance(value, int) and not isinstance(value, bool):
        return value
    if (
        kind in ("float", "double")
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    ):
        return float(value)
    if kind == "string" and isinstance(value, str):
        return value
    if kind in ("bytes", "fixed") and isinstance(value, str):
        raw = value.encode("latin-1")
        if isinstance(node, Fixed) and len(raw) != node.size:
            msg = f"{len(raw)} bytes for a fixed of {node.size}"
            raise ValueError(msg)
        if node.logical == "decimal":
            unscaled = int.from_bytes(raw, "big", signed=True)
            return Decimal(unscaled).scaleb(-node.scale, _EXACT)
        return raw
    msg = f"not a {kind}"
    raise ValueError(msg)
