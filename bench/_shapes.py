"""The messages a read benchmark writes, by ``--shape``, the same in every run.

* ``fixed``: every value ``size`` bytes, nothing else (one producer's fixed records);
* ``varied``: text values whose sizes spread evenly over ``size/2 .. 3*size/2``;
* ``keyed``: varied, plus a key, two properties and an event time, as application
  events carry.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pyarrow as pa

SHAPES = ("fixed", "varied", "keyed")


def sample_messages(shape: str, count: int, size: int) -> Iterator[dict]:
    """``count`` messages as dicts: ``value`` and, for ``keyed``, ``key``,
    ``properties`` (dict) and ``event_time`` (ms)."""
    if shape == "fixed":
        payload = b"x" * size
        for _ in range(count):
            yield {"value": payload}
        return
    lengths = random.Random(7)
    text = bytes(range(32, 127)) * (2 * size // 95 + 2)
    for i in range(count):
        value = text[i % 95 :][: lengths.randint(size // 2, size * 3 // 2)]
        if shape == "varied":
            yield {"value": value}
        else:
            yield {
                "value": value,
                "key": f"user-{i % 10_007}",
                "event_time": 1_700_000_000_000 + i,
                "properties": {"source": "bench", "kind": ("click", "view", "buy")[i % 3]},
            }


def sample_table(shape: str, rows: int, size: int) -> pa.Table:
    """The same messages as an Arrow table of the writer's columns (``value``, and
    ``key``, ``properties``, ``eventTime`` for ``keyed``)."""
    messages = list(sample_messages(shape, rows, size))
    columns = {"value": pa.array([m["value"] for m in messages], pa.binary())}
    if shape == "keyed":
        columns["key"] = pa.array([m["key"] for m in messages])
        columns["properties"] = pa.array(
            [list(m["properties"].items()) for m in messages], pa.map_(pa.string(), pa.string())
        )
        columns["eventTime"] = pa.array(
            [m["event_time"] for m in messages], pa.timestamp("ms", tz="UTC")
        )
    return pa.table(columns)
