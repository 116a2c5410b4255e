"""The steps of a compiled Avro plan: one node per schema type, each reading its value at
every lane at once (records, unions, enums, scalars; arrays and maps are in
:mod:`.blocks`).

A node reads the writer's encoding and builds the reader's Arrow type:
``read(lanes)`` returns one value per lane and moves the cursors past them,
``skip(lanes)`` only moves them (fields the reader drops). ``width`` is the
encoded size when it is the same for every value (floats, fixed, booleans),
which lets arrays read all their items at once; ``min_size`` bounds how many
items a block of the remaining bytes can hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ...arrays import Int64s
from .arrays import bytes_array, decimal_array, number_array
from .lanes import Lanes, expand

__all__ = [
    "BoolNode",
    "BytesNode",
    "ConstNode",
    "EnumNode",
    "FixedNode",
    "IntNode",
    "Node",
    "NullNode",
    "NumberNode",
    "RecordNode",
    "UnionNode",
]


class Node:
    """A step of a plan: reads one writer value per lane as an array of ``type``."""

    width: int | None = None
    min_size: int = 1

    def __init__(self, path: str, type: pa.DataType) -> None:
        self.path = path
        self.type = type

    def read(self, lanes: Lanes) -> pa.Array:
        raise NotImplementedError

    def skip(self, lanes: Lanes) -> None:
        self.read(lanes)


class NullNode(Node):
    width = 0
    min_size = 0

    def read(self, lanes: Lanes) -> pa.Array:
        return pa.nulls(len(lanes), self.type)

    def skip(self, lanes: Lanes) -> None:
        pass


class ConstNode(Node):
    """No bytes: a constant per lane (a reader field's default, a writer's null read as it)."""

    width = 0
    min_size = 0

    def __init__(self, path: str, type: pa.DataType, value: pa.Array) -> None:
        super().__init__(path, type)
        self.value = value

    def read(self, lanes: Lanes) -> pa.Array:
        return self.value.take(np.zeros(len(lanes), np.int64))

    def skip(self, lanes: Lanes) -> None:
        pass


class BoolNode(Node):
    width = 1

    def read(self, lanes: Lanes) -> pa.Array:
        return pa.array(lanes.read_bool(self.path), pa.bool_())

    def skip(self, lanes: Lanes) -> None:
        lanes.skip_fixed(1, self.path, "a boolean")


class IntNode(Node):
    """An Avro int (``is_int``) or long, as the reader's integer, float or temporal type."""

    def __init__(self, path: str, type: pa.DataType, *, is_int: bool) -> None:
        super().__init__(path, type)
        self.is_int = is_int

    def read(self, lanes: Lanes) -> pa.Array:
        read = lanes.read_int if self.is_int else lanes.read_long
        return number_array(read(self.path), self.type)

    def skip(self, lanes: Lanes) -> None:
        lanes.read_long(self.path)


class NumberNode(Node):
    """An Avro float (4 bytes) or double (8 bytes), as float32 or float64."""

    def __init__(self, path: str, type: pa.DataType, *, size: int) -> None:
        super().__init__(path, type)
        self.size = self.width = self.min_size = size
        self.dtype = "<f4" if size == 4 else "<f8"

    def read(self, lanes: Lanes) -> pa.Array:
        return number_array(lanes.read_number(self.dtype, self.path), self.type)

    def skip(self, lanes: Lanes) -> None:
        lanes.skip_fixed(self.size, self.path, f"a {8 * self.size}-bit float")


class BytesNode(Node):
    """Avro bytes or string, as binary, string or decimal."""

    def read(self, lanes: Lanes) -> pa.Array:
        start, length = lanes.read_length(self.path)
        return bytes_array(lanes, start, length, self.type, self.path)

    def skip(self, lanes: Lanes) -> None:
        lanes.read_length(self.path)


class FixedNode(Node):
    """An Avro fixed of ``size`` bytes, as binary or decimal."""

    def __init__(self, path: str, type: pa.DataType, *, size: int) -> None:
        super().__init__(path, type)
        self.size = self.width = self.min_size = size

    def read(self, lanes: Lanes) -> pa.Array:
        start = lanes.read_fixed(self.size, self.path, f"a fixed of {self.size} bytes")
        length = np.full(len(start), self.size, np.int64)
        if pa.types.is_decimal(self.type):
            return decimal_array(lanes, start, length, self.type, self.path)
        return bytes_array(lanes, start, length, self.type, self.path)

    def skip(self, lanes: Lanes) -> None:
        lanes.skip_fixed(self.size, self.path, f"a fixed of {self.size} bytes")


class EnumNode(Node):
    """An Avro enum: the writer's index mapped to the reader's symbol (``to_reader[i]``;
    -1 for a symbol the reader lacks and has no default for)."""

    def __init__(
        self, path: str, type: pa.DataType, *, to_reader: Sequence[int], symbols: Sequence[str]
    ) -> None:
        super().__init__(path, type)
        self.to_reader = np.array([*to_reader, -1], np.int32)  # -1 for bad indexes
        self.symbols = pa.array(list(symbols), pa.string())
        self.writer_count = len(to_reader)

    def read(self, lanes: Lanes) -> pa.Array:
        index = lanes.read_long(self.path)
        bad = (index < 0) | (index >= self.writer_count)
        if bad.any():
            lanes.fail(bad, self.path, "enum index {0} out of range", index)
            index[bad] = 0
        mapped = self.to_reader[index]
        missing = mapped < 0
        if missing.any():
            lanes.fail(missing, self.path, "an enum symbol the reader schema does not have")
            mapped[missing] = 0
        if pa.types.is_dictionary(self.type):
            return pa.DictionaryArray.from_arrays(pa.array(mapped, pa.int32()), self.symbols)
        return self.symbols.take(pa.array(mapped))

    def skip(self, lanes: Lanes) -> None:
        lanes.read_long(self.path)


class UnionNode(Node):
    """An Avro union: a long branch index, then the branch's value.

    ``branches[i]`` reads writer branch ``i`` as the reader's type; None for the
    null branch (a null value); a string for a branch the reader cannot take
    (decoding a value of it fails with that text).
    """

    def __init__(self, path: str, type: pa.DataType, branches: Sequence[Node | str | None]) -> None:
        super().__init__(path, type)
        self.branches = list(branches)
        self.min_size = 1 + min(
            (b.min_size if isinstance(b, Node) else 0 for b in self.branches), default=0
        )

    def _branch_index(self, lanes: Lanes) -> Int64s:
        index = lanes.read_long(self.path)
        bad = (index < 0) | (index >= len(self.branches))
        if bad.any():
            lanes.fail(bad, self.path, "union branch {0} out of range", index)
            nulls = [i for i, b in enumerate(self.branches) if b is None]
            index[bad] = nulls[0] if nulls else 0
        return index

    def read(self, lanes: Lanes) -> pa.Array:
        return self._run(lanes, read=True)

    def skip(self, lanes: Lanes) -> None:
        self._run(lanes, read=False)

    def _run(self, lanes: Lanes, *, read: bool) -> pa.Array:
        index = self._branch_index(lanes)
        parts: list[tuple[Int64s, pa.Array]] = []
        for number, branch in enumerate(self.branches):
            if branch is None:
                continue
            where = np.flatnonzero(index == number)
            if not len(where):
                continue
            if isinstance(branch, str):
                lanes.fail(index == number, self.path, branch)
                if read:
                    parts.append((where, pa.nulls(len(where), self.type)))
                continue
            sub = lanes.subset(where)
            if read:
                parts.append((where, branch.read(sub)))
            else:
                branch.skip(sub)
            lanes.update(where, sub)
        if not read:
            return pa.nulls(0)
        if not parts:
            return pa.nulls(len(lanes), self.type)
        if len(parts) == 1:
            where, values = parts[0]
            valid = np.zeros(len(lanes), bool)
            valid[where] = True
            return expand(values, valid)
        # Several branches: concatenate their values and put each lane's in its place.
        position = np.full(len(lanes), -1, np.int64)
        done = 0
        for where, _ in parts:
            position[where] = np.arange(done, done + len(where))
            done += len(where)
        valid = position >= 0
        merged = pa.concat_arrays([values for _, values in parts])
        if valid.all():
            return merged.take(pa.array(position))
        return merged.take(pa.array(np.where(valid, position, 0), mask=~valid))


class RecordNode(Node):
    """An Avro record: the writer's fields in order (``fields[i]`` reads field ``i``, or
    skips it when ``keep[i]`` is false), then the reader's fields in its order:
    ``order[j]`` is the writer field that fills reader field ``j``, or a
    :class:`ConstNode` (a default)."""

    def __init__(
        self,
        path: str,
        type: pa.DataType,
        fields: Sequence[Node],
        keep: Sequence[bool],
        order: Sequence[int | ConstNode],
    ) -> None:
        super().__init__(path, type)
        self.fields = list(fields)
        self.keep = list(keep)
        self.order = list(order)
        self.min_size = sum(f.min_size for f in self.fields)
        widths = [f.width for f in self.fields]
        self.width = None if None in widths else sum(w for w in widths if w is not None)

    def read(self, lanes: Lanes) -> pa.Array:
        values: list[pa.Array | None] = []
        for node, keep in zip(self.fields, self.keep, strict=True):
            if keep:
                values.append(node.read(lanes))
            else:
                node.skip(lanes)
                values.append(None)
        children = [
            source.read(lanes) if isinstance(source, ConstNode) else values[source]
            for source in self.order
        ]
        if not children:
            return pa.Array.from_buffers(self.type, len(lanes), [None], children=[])
        return pa.StructArray.from_arrays(children, fields=list(self.type))

    def skip(self, lanes: Lanes) -> None:
        for node in self.fields:
            node.skip(lanes)
