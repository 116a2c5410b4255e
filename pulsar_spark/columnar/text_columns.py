"""String columns made of per-entry parts, built without a Python step per row.

A batch of rows comes from a few entries of many items each, so the
``topic``, ``producerName`` and ``messageId`` columns repeat per-entry text:

* :func:`repeated`: entry ``e``'s value on each of its ``counts[e]`` rows;
* :func:`numbered`: entry ``e``'s prefix followed by the row's number in
  the entry, ``0`` to ``counts[e] - 1`` (message ids ``ledger:entry:partition:``
  + batch index, for entries read whole).

Rows of one entry that are as long as each other (all of them for
:func:`repeated`; those with as many digits for :func:`numbered`) fill a
``rows x length`` block of the output buffer in one NumPy assignment.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .arrays import Bytes, Int64s, Ints

__all__ = ["numbered", "repeated"]

#: Longest column (bytes) built here: its offsets are 32-bit.
_MAX_BYTES = 2**31 - 1
#: Most digits of a row number built here (rows of an entry beyond go to Arrow).
_MAX_DIGITS = 5
_digit_tables: dict[int, Bytes] = {}


def _digits(width: int) -> Bytes:
    """The numbers with ``width`` digits as ASCII rows: table[i] spells 10**(width-1) + i
    (0 to 9 for width 1)."""
    table = _digit_tables.get(width)
    if table is None:
        low = 0 if width == 1 else 10 ** (width - 1)
        numbers = np.arange(low, 10**width, dtype=np.int64)
        powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
        table = (numbers[:, None] // powers % 10 + ord("0")).astype(np.uint8)
        _digit_tables[width] = table
    return table


def _string_array(lengths: Int64s) -> tuple[Int64s, Bytes] | None:
    """Offsets and an output buffer for rows of these lengths; None when too long."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > _MAX_BYTES:
        return None
    return offsets, np.empty(int(offsets[-1]), np.uint8)


def _finish(offsets: Int64s, data: Bytes) -> pa.Array:
    return pa.StringArray.from_buffers(
        len(offsets) - 1, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)
    )


def repeated(values: list[str], counts: Ints) -> pa.Array:
    """``values[e]`` repeated ``counts[e]`` times, as one string column."""
    counts = np.asarray(counts, np.int64)
    encoded = [v.encode() for v in values]
    if len(set(encoded)) == 1:
        value, n = encoded[0], int(counts.sum())
        if n * len(value) <= _MAX_BYTES:
            offsets = np.arange(n + 1, dtype=np.int64) * len(value)
            return _finish(offsets, np.frombuffer(value * n, np.uint8))
    lengths = np.array([len(v) for v in encoded], np.int64)
    built = _string_array(np.repeat(lengths, counts))
    if built is None:
        return pa.array(
            [v for v, c in zip(values, counts.tolist(), strict=True) for _ in range(c)], pa.string()
        )
    offsets, data = built
    row = 0
    for value, count in zip(encoded, counts.tolist(), strict=True):
        if count and value:
            at = int(offsets[row])
            block = data[at : at + count * len(value)].reshape(count, len(value))
            block[:] = np.frombuffer(value, np.uint8)
        row += count
    return _finish(offsets, data)


def numbered(prefixes: list[str], counts: Ints) -> pa.Array | None:
    """``prefixes[e] + str(i)`` for ``i`` in ``range(counts[e])``, entry after entry.

    None when an entry has more than 10**5 rows (the caller builds that column
    another way).
    """
    counts = np.asarray(counts, np.int64)
    if len(counts) and int(counts.max()) > 10**_MAX_DIGITS:
        return None
    encoded = [p.encode() for p in prefixes]
    # Rows of each entry by number of digits: [0, 10), [10, 100), ...
    bounds = [0] + [10**d for d in range(1, _MAX_DIGITS + 1)]
    digits = np.ones(int(counts.sum()), np.int64)
    entry_first = np.cumsum(counts) - counts
    number = np.arange(len(digits), dtype=np.int64) - np.repeat(entry_first, counts)
    for bound in bounds[1:-1]:
        digits += number >= bound
    lengths = np.repeat(np.array([len(p) for p in encoded], np.int64), counts) + digits
    built = _string_array(lengths)
    if built is None:
        return None
    offsets, data = built
    for prefix, first, count in zip(encoded, entry_first.tolist(), counts.tolist(), strict=True):
        head = np.frombuffer(prefix, np.uint8)
        for width in range(1, _MAX_DIGITS + 1):
            low, high = bounds[width - 1], min(bounds[width], count)
            if low >= high:
                break
            rows = high - low
            at = int(offsets[first + low])
            block = data[at : at + rows * (len(prefix) + width)].reshape(rows, -1)
            block[:, : len(prefix)] = head
            start = 0 if width == 1 else low - 10 ** (width - 1)
            block[:, len(prefix) :] = _digits(width)[start : start + rows]
    return _finish(offsets, data)
