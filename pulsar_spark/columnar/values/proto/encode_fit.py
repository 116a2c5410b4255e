"""Protobuf encoders built for an Arrow type and a message description: which Arrow types fit
which protobuf types (the read mapping of :mod:`.schema`, and a little more), and the
list of fields that do not fit.

========================================  ======================================
protobuf                                  Arrow types that fit
========================================  ======================================
int32, sint32, sfixed32, int64, ...,      any integer, decimal(p, 0): each value
uint32, fixed32, uint64, fixed64          checked against the type's range
float / double                            float16, float32 / and float64
bool                                      bool
string / bytes                            string, large_string, string_view / binary,
                                          large_binary, binary_view, fixed_size_binary
enum                                      string (a declared name; for an open, proto3
                                          enum also a number as text), or an integer
message                                   struct: fields matched by name (a field the
                                          struct lacks is absent; a proto2 required one
                                          must be there); a column the message lacks
                                          does not fit
google.protobuf.Timestamp                 timestamp with a time zone (any unit)
google.protobuf.*Value (wrappers)         the wrapped scalar's types
repeated T                                list, large_list, fixed_size_list of T
map<K, V>                                 map<K, V>
========================================  ======================================

Dictionary columns fit when their values do. Nullability is checked when
values are encoded: a null fits only where the read mapping gives a null
(fields with presence: messages, proto3 ``optional``, proto2 optional, oneof
members), not in a required field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa

from ..avro.encode_fit import is_bytes, is_text
from ..encode_errors import Misfit
from .encode_fields import (
    FieldEnc,
    MapField,
    MessageEnc,
    RepeatedField,
    SingularField,
    TimestampEnc,
    WrapperEnc,
)
from .encode_values import BytesValue, EnumValue, FloatValue, IntValue, ValueEnc
from .schema import ProtoField, ProtoMessage

__all__ = ["FieldLayout", "Layout", "fit_message", "layout_of"]

_INTEGERS = {
    "int32", "int64", "uint32", "uint64", "sint32", "sint64",
    "fixed32", "fixed64", "sfixed32", "sfixed64",
}  # fmt: skip


@dataclass(frozen=True)
class FieldLayout:
    """How protobuf writes a field (what the read mapping leaves out): ``packed``
    repeated scalars, ``required`` (proto2), ``explicit`` presence (every set value is
    written, defaults too) and, for an enum, whether it is ``closed`` (proto2)."""

    packed: bool = False
    required: bool = False
    explicit: bool = True
    closed: bool = False


#: Per (message full name, field number): its layout. A field not in it takes
#: :class:`FieldLayout`'s defaults (unpacked, explicit presence: what any reader reads).
Layout = Mapping[tuple[str, int], FieldLayout]
_DEFAULT = FieldLayout()


def layout_of(descriptor: object) -> dict[tuple[str, int], FieldLayout]:
    """The layout of every field of a message descriptor (``pool.FindMessageTypeByName``)
    and of the messages it holds."""
    out: dict[tuple[str, int], FieldLayout] = {}
    seen: set[str] = set()
    todo = [descriptor]
    while todo:
        d = todo.pop()
        name = d.full_name  # type: ignore[attr-defined]
        if name in seen:
            continue
        seen.add(name)
        for f in d.fields:  # type: ignore[attr-defined]
            enum = f.enum_type
            out[(name, f.number)] = FieldLayout(
                packed=bool(f.is_packed),
                required=bool(f.is_required),
                explicit=bool(f.has_presence),
                closed=bool(enum is not None and enum.is_closed),
            )
            if f.message_type is not None:
                todo.append(f.message_type)
    return out


def fit_message(
    dtype: pa.DataType, message: ProtoMessage, layout: Layout, misfits: list[Misfit], path: str = ""
) -> MessageEnc | None:
    """The encoder of ``dtype`` columns (structs) as ``message``; every field that does not
    fit is added to ``misfits`` as (path, reason) (the encoder is then None)."""
    return _Fitter(layout, misfits).message(dtype, message, path)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _is_list(dtype: pa.DataType) -> bool:
    t = pa.types
    return bool(t.is_list(dtype) or t.is_large_list(dtype) or t.is_fixed_size_list(dtype))


def _describe(field: ProtoField) -> str:
    if field.kind == "message" and field.message is not None:
        return f"message {field.message.name}"
    if field.kind == "wrapper" and field.message is not None:
        return field.message.name
    if field.kind == "timestamp":
        return "google.protobuf.Timestamp"
    return field.kind


class _Fitter:
    def __init__(self, layout: Layout, misfits: list[Misfit]) -> None:
        self.layout = layout
        self.misfits = misfits

    def no(self, path: str, dtype: pa.DataType, what: str, why: str = "") -> None:
        reason = f"a column of type {dtype} does not fit {what}"
        self.misfits.append((path, f"{reason} ({why})" if why else reason))

    def message(self, dtype: pa.DataType, message: ProtoMessage, path: str) -> MessageEnc | None:
        if pa.types.is_dictionary(dtype) or not pa.types.is_struct(dtype):
            self.no(path, dtype, f"message {message.name}", "a struct fits")
            return None
        before = len(self.misfits)
        names = [dtype.field(i).name for i in range(dtype.num_fields)]
        for name in sorted({n for n in names if names.count(n) > 1}):
            self.misfits.append((_join(path, name), "the data has two fields of this name"))
        wanted = {f.name for f in message.fields}
        for name in names:
            if name not in wanted:
                self.misfits.append((_join(path, name), f"not a field of {message.name}"))
        fields: list[tuple[int, FieldEnc]] = []
        oneofs: dict[str, list[tuple[int, str]]] = {}
        for f in message.fields:
            where = _join(path, f.name)
            layout = self.layout.get((message.name, f.number), _DEFAULT)
            if f.name not in names:
                if layout.required:
                    self.misfits.append((where, "a required field, missing from the data"))
                continue
            i = names.index(f.name)
            enc = self.field(dtype.field(i).type, f, layout, where, message.name)
            if enc is not None:
                fields.append((i, enc))
                if f.oneof:
                    oneofs.setdefault(f.oneof, []).append((i, f.name))
        if len(self.misfits) != before:
            return None
        return MessageEnc(path, fields, list(oneofs.items()))

    def field(
        self, dtype: pa.DataType, f: ProtoField, layout: FieldLayout, path: str, owner: str
    ) -> FieldEnc | None:
        if pa.types.is_dictionary(dtype) and (f.kind == "map" or f.repeated):
            dtype = dtype.value_type
        if f.kind == "map":
            assert f.message is not None
            if not pa.types.is_map(dtype):
                self.no(path, dtype, f"map field {f.name}", "a map fits")
                return None
            key_field, value_field = sorted(f.message.fields, key=lambda x: x.number)
            entry = f.message.name
            key = self.value(dtype.key_type, key_field, path + "{}", entry)
            value = self.value(dtype.item_type, value_field, path + "{}", entry)
            if key is None or value is None:
                return None
            return MapField(path, f.number, key, value)
        if f.repeated:
            if not _is_list(dtype):
                self.no(path, dtype, f"repeated {_describe(f)}", "a list fits")
                return None
            item = self.value(dtype.value_type, f, path + "[]", owner)
            if item is None:
                return None
            packed = layout.packed and item.wire != 2
            return RepeatedField(path, f.number, item, packed=packed)
        value = self.value(dtype, f, path, owner)
        if value is None:
            return None
        nullable = f.presence and not layout.required
        explicit = layout.explicit or f.kind in ("message", "timestamp", "wrapper")
        return SingularField(
            path, f.number, value, nullable=nullable, explicit=explicit, required=layout.required
        )

    def value(self, dtype: pa.DataType, f: ProtoField, path: str, owner: str) -> ValueEnc | None:
        """The encoder of one value of ``f`` (not its repetition), a field of the message
        named ``owner``."""
        if pa.types.is_dictionary(dtype):
            dtype = dtype.value_type
        kind = f.kind
        if kind == "message":
            assert f.message is not None
            return self.message(dtype, f.message, path)
        if kind == "timestamp":
            if not pa.types.is_timestamp(dtype):
                self.no(path, dtype, "google.protobuf.Timestamp", "a timestamp fits")
                return None
            if not dtype.tz:
                why = "a timestamp without a time zone is no instant: give it one (UTC)"
                self.no(path, dtype, "google.protobuf.Timestamp", why)
                return None
            return TimestampEnc(path, dtype.unit)
        if kind == "wrapper":
            assert f.message is not None
            inner = self.scalar(dtype, f.message.fields[0].kind, path, f, owner)
            return None if inner is None else WrapperEnc(path, inner)
        return self.scalar(dtype, kind, path, f, owner)

    def scalar(
        self, dtype: pa.DataType, kind: str, path: str, f: ProtoField, owner: str
    ) -> ValueEnc | None:
        t = pa.types
        enc: ValueEnc | None = None
        if kind in _INTEGERS:
            if t.is_integer(dtype) or (t.is_decimal(dtype) and dtype.scale == 0):
                enc = IntValue(path, kind)
        elif kind == "bool":
            enc = IntValue(path, kind) if t.is_boolean(dtype) else None
        elif kind == "float":
            enc = FloatValue(path, "<f4") if t.is_float16(dtype) or t.is_float32(dtype) else None
        elif kind == "double":
            enc = FloatValue(path, "<f8") if t.is_floating(dtype) else None
        elif kind == "string":
            enc = BytesValue(path) if is_text(dtype) else None
        elif kind == "bytes":
            enc = BytesValue(path) if is_bytes(dtype) else None
        elif kind == "enum" and (is_text(dtype) or t.is_integer(dtype)):
            closed = self.layout.get((owner, f.number), _DEFAULT).closed
            enc = EnumValue(path, f.enum, closed)
        if enc is None:
            self.no(path, dtype, kind if kind != f.kind else _describe(f))
        return enc
