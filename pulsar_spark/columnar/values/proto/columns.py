"""Arrow columns of protobuf messages: the fields :func:`~.wire.walk` found, turned
into one struct array per message type, level by level (no Python step per message).

Per field (by NUMBER, so a reader's descriptor reads any writer's messages:
fields it does not know are skipped, fields the message lacks take their
default): a field whose wire type does not match its type is an unknown field,
as protobuf reads it. A singular scalar takes its last occurrence; a singular
message merges all of them (their byte ranges walked as one message);
repeated scalars take packed and unpacked occurrences alike, in wire order; a
map keeps the last entry of each key (an entry with a field its type does not know
is not in the map, as upb reads it); of a oneof's fields, only the one that
came last is set, from its occurrences after the last of another member (setting a
member clears the oneof: a message member that comes twice with another member
between keeps the later one only, as protobuf does).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...arrays import Bytes, Int64s, Mask
from ..avro.lanes import Failures
from .arrays import FIXED_WIDTH, defaults, scalar_array, timestamp_array
from .schema import ProtoField, ProtoMessage, proto_arrow_field, proto_arrow_type
from .wire import Found, unpack, walk

__all__ = ["message_array"]


class _Context:
    __slots__ = ("data", "failures")

    def __init__(self, data: Bytes, failures: Failures) -> None:
        self.data = data
        self.failures = failures


def message_array(
    data: Bytes,
    message: ProtoMessage,
    starts: Int64s,
    ends: Int64s,
    items: Int64s,
    count: int,
    rows: Int64s,
    failures: Failures,
    path: str = "",
) -> pa.StructArray:
    """``count`` messages of type ``message``, item ``i`` made of the byte ranges
    ``r`` with ``items[r] == i`` (in order); ``rows`` is each item's row, for errors.
    Items without a range are messages with every field absent."""
    ctx = _Context(data, failures)
    return _struct(ctx, message, starts, ends, items, count, rows, path)


def _struct(
    ctx: _Context,
    message: ProtoMessage,
    starts: Int64s,
    ends: Int64s,
    items: Int64s,
    count: int,
    rows: Int64s,
    path: str,
    unknown: Mask | None = None,
) -> pa.StructArray:
    """See :func:`message_array`; ``unknown`` (if given) is set where an item has a field
    that ``message`` does not know (another number, or a wire type that does not match)."""
    names = {f.number: _join(path, f.name) for f in message.fields}
    found = walk(ctx.data, starts, ends, items, rows[items], ctx.failures, names, path)
    subsets: list[Int64s] = []
    for field, sel in zip(message.fields, _by_number(message, found.number), strict=True):
        wires = found.wire[sel]
        if field.repeated and field.kind != "map" and field.wire != 2:
            sel = sel[(wires == field.wire) | (wires == 2)]
        else:
            sel = sel[wires == field.wire]
        subsets.append(sel)
    if unknown is not None:
        known = np.zeros(len(found.item), bool)
        for sel in subsets:
            known[sel] = True
        unknown[found.item[~known]] = True
    valid = _oneofs(message, subsets, found, count)
    arrays = [
        _field(ctx, field, found, sel, count, rows, _join(path, field.name), valid.get(i))
        for i, (field, sel) in enumerate(zip(message.fields, subsets, strict=True))
    ]
    fields = [proto_arrow_field(f) for f in message.fields]
    if not fields:
        return pa.StructArray.from_arrays([], fields=[], mask=pa.array(np.zeros(count, bool)))
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _by_number(message: ProtoMessage, numbers: Int64s) -> list[Int64s]:
    """For each field, the ascending indexes of the fields found with its number: a
    comparison per field when there are few, else one sort."""
    if len(message.fields) <= 24:
        return [np.flatnonzero(numbers == f.number) for f in message.fields]
    order = np.argsort(numbers, kind="stable")
    ordered = numbers[order]
    out = []
    for field in message.fields:
        lo, hi = np.searchsorted(ordered, [field.number, field.number + 1])
        out.append(order[lo:hi])
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _oneofs(
    message: ProtoMessage, subsets: list[Int64s], found: Found, count: int
) -> dict[int, Mask]:
    """For each oneof member (by index): whether it is the member set last in its item.
    Each member's occurrences in ``subsets`` are cut to those after the last occurrence of
    another member in the same item (which cleared it)."""
    groups: dict[str, list[int]] = {}
    for i, field in enumerate(message.fields):
        if field.oneof:
            groups.setdefault(field.oneof, []).append(i)
    valid: dict[int, Mask] = {}
    for members in groups.values():
        last = np.full((len(members), count), -1, np.int64)
        for row, i in enumerate(members):
            sel = subsets[i]
            last[row, found.item[sel]] = sel  # ascending: the last occurrence stays
        winner = last.max(axis=0)
        for row, i in enumerate(members):
            valid[i] = (last[row] >= 0) & (last[row] == winner)
            if len(members) > 1:
                others = np.delete(last, row, axis=0).max(axis=0)
                sel = subsets[i]
                subsets[i] = sel[sel > others[found.item[sel]]]
    return valid


def _field(
    ctx: _Context,
    field: ProtoField,
    found: Found,
    sel: Int64s,
    count: int,
    rows: Int64s,
    path: str,
    oneof_valid: Mask | None,
) -> pa.Array:
    item = found.item[sel]
    if field.kind == "map":
        return _map(ctx, field, found, sel, count, rows, path)
    if field.repeated:
        values, owners = _elements(ctx, field, found, sel, rows, path)
        offsets = _offsets(owners, count)
        return pa.ListArray.from_arrays(offsets, values, type=proto_arrow_field(field).type)
    present = np.zeros(count, bool)
    present[item] = True
    if oneof_valid is not None:
        present &= oneof_valid
    if field.kind in ("message", "timestamp", "wrapper"):
        return _nested(ctx, field, found, sel, count, rows, path, present)
    # A singular scalar: the last occurrence of each item.
    if len(item):
        last = np.flatnonzero(np.append(item[1:] != item[:-1], True))
        sel, item = sel[last], item[last]
    values = scalar_array(
        ctx.data, field, found.pos[sel], found.value[sel], rows[item], ctx.failures, path
    )
    return _spread(values, item, count, field, present)


def _spread(
    values: pa.Array, item: Int64s, count: int, field: ProtoField, present: Mask
) -> pa.Array:
    """Values of the items that have the field spread over ``count``; the others take the
    default (or null, for a field with presence)."""
    if len(item) == count and (not field.presence or present.all()):
        return values
    index = np.full(count, len(values), np.int64)
    index[item] = np.arange(len(item))
    fill = defaults(field, 1)
    table = pa.concat_arrays([values, fill.cast(values.type)])
    out = table.take(pa.array(index))
    if field.presence:
        out = pc.if_else(pa.array(present), out, pa.nulls(count, out.type))
    return out


def _elements(
    ctx: _Context, field: ProtoField, found: Found, sel: Int64s, rows: Int64s, path: str
) -> tuple[pa.Array, Int64s]:
    """The elements of a repeated field (packed or not) and the item of each."""
    item = found.item[sel]
    pos, value = found.pos[sel], found.value[sel]
    if field.kind in ("message", "timestamp", "wrapper"):
        n = len(sel)
        ranks = np.arange(n, dtype=np.int64)
        sub = _nested(ctx, field, found, sel, n, rows[item], path + "[]", np.ones(n, bool), ranks)
        return sub, item
    packed = (found.wire[sel] == 2) & (field.wire != 2)
    if packed.any():
        width = FIXED_WIDTH.get(field.kind, 0)
        p = np.flatnonzero(packed)
        counts_p, pos_p, value_p = unpack(
            ctx.data, pos[p], value[p].astype(np.int64), width, rows[item[p]], ctx.failures, path
        )
        counts = np.ones(len(sel), np.int64)
        counts[p] = counts_p
        element_item = np.repeat(item, counts)
        from_packed = np.repeat(packed, counts)
        element_pos = np.empty(len(element_item), np.int64)
        element_value = np.zeros(len(element_item), np.uint64)
        element_pos[from_packed] = pos_p
        element_value[from_packed] = value_p
        element_pos[~from_packed] = pos[~packed]
        element_value[~from_packed] = value[~packed]
        item, pos, value = element_item, element_pos, element_value
    values = scalar_array(ctx.data, field, pos, value, rows[item], ctx.failures, path + "[]")
    return values, item


def _nested(
    ctx: _Context,
    field: ProtoField,
    found: Found,
    sel: Int64s,
    count: int,
    rows: Int64s,
    path: str,
    present: Mask,
    items: Int64s | None = None,
) -> pa.Array:
    """Message fields (struct, Timestamp, wrapper) of ``count`` items: each item's byte
    ranges merged into one message; absent ones null (with presence) or default."""
    pos = found.pos[sel]
    ends = pos + found.value[sel].astype(np.int64)
    owner = found.item[sel] if items is None else items
    message = field.message if field.kind != "timestamp" else None
    struct = _struct(ctx, message or _TIMESTAMP, pos, ends, owner, count, rows, path)
    mask = pa.array(~present) if field.presence else None
    if field.kind == "timestamp":
        return timestamp_array(
            struct, present if field.presence else None, rows, ctx.failures, path
        )
    if field.kind == "wrapper":
        inner = struct.field(0)
        return pc.if_else(mask, pa.nulls(count, inner.type), inner) if mask is not None else inner
    if mask is None:
        return struct
    return pa.StructArray.from_arrays(
        [struct.field(i) for i in range(struct.type.num_fields)],
        fields=list(proto_arrow_type(message).fields) if message else [],
        mask=mask,
    )


_TIMESTAMP = ProtoMessage(
    "google.protobuf.Timestamp",
    (
        ProtoField("seconds", 1, "int64", default=0),
        ProtoField("nanos", 2, "int32", default=0),
    ),
)


def _map(
    ctx: _Context, field: ProtoField, found: Found, sel: Int64s, count: int, rows: Int64s, path: str
) -> pa.Array:
    """A map field: its entries as structs, the last of each key kept. An entry with a
    field the entry type does not know (another number, or a key or value of another wire
    type) is not in the map: protobuf (upb) keeps it as an unknown field of the message."""
    assert field.message is not None
    item = found.item[sel]
    n = len(sel)
    pos = found.pos[sel]
    ends = pos + found.value[sel].astype(np.int64)
    unknown = np.zeros(n, bool)
    entries = _struct(
        ctx, field.message, pos, ends, np.arange(n, dtype=np.int64), n, rows[item], path, unknown
    )
    numbers = [f.number for f in field.message.fields]
    keys, values = entries.field(numbers.index(1)), entries.field(numbers.index(2))
    if unknown.any():
        index = pa.array(np.flatnonzero(~unknown))
        keys, values, item = keys.take(index), values.take(index), item[~unknown]
        n = len(item)
    keep = np.ones(n, bool)
    if n and np.bincount(item).max() > 1:  # some item has several entries: keys may repeat
        table = pa.table({"item": pa.array(item), "key": keys, "at": pa.array(np.arange(n))})
        last = table.group_by(["item", "key"], use_threads=False).aggregate([("at", "max")])
        if last.num_rows != n:
            keep[:] = False
            keep[last.column("at_max").to_numpy()] = True
            index = pa.array(np.flatnonzero(keep))
            keys, values, item = keys.take(index), values.take(index), item[keep]
    dtype = proto_arrow_field(field).type
    return pa.MapArray.from_arrays(_offsets(item, count), keys, values, type=dtype)


def _offsets(item: Int64s, count: int) -> pa.Array:
    """The list offsets of ``count`` items, from the item of each element (ascending)."""
    counts = np.bincount(item, minlength=count)
    offsets = np.zeros(count + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.array(offsets)
