"""Avro decode throughput: one Avro datum per message into Arrow, ours (columnar,
``pulsar_spark.columnar.values.avro.decode``) next to the official Python client's path, same run.

The record: ``id`` long, ``user`` and ``event`` strings, ``amount`` and ``score``
doubles, ``count`` long, ``note`` a nullable string (null on every third row), ``ts``
a ``timestamp-millis`` (what Java's ``Schema.AVRO`` makes of a ``java.util.Date``).
The datums are written once with ``fastavro.schemaless_writer`` and held as a binary
Arrow array, as a read hands over message values.

``ours``
    ``avro_plan(schema).decode(values)``: every datum at once, into a struct column.
``official``
    what ``pulsar.schema.AvroSchema(None, schema).decode(value)`` does per message
    (``fastavro.schemaless_reader`` over a ``BytesIO``, with the writer schema as the
    reader schema), then ``pa.Table.from_pylist`` of the dicts.
``fastavro``
    ``fastavro.schemaless_reader`` per message without the client's wrapper, then
    ``pa.Table.from_pylist``: the floor of any per-message path.

Both sides decode the same values and their results are compared. The table shows
records/s (best of ``--runs`` passes; the per-message paths, which take minutes at
1,000,000, run on ``--sample`` records and are scaled) and ours / official.

Usage::

    python bench/avro_decode.py                      # 1,000,000 records
    python bench/avro_decode.py --records 200000 --runs 5
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulsar_spark.columnar import avro_plan

SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "user", "type": "string"},
        {"name": "event", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "score", "type": "double"},
        {"name": "count", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    ],
}


def datums(records: int, *, seed: int = 7) -> pa.Array:
    """``records`` Avro datums of :data:`SCHEMA` (the same for a given seed)."""
    import fastavro

    parsed = fastavro.parse_schema(SCHEMA)
    rng = np.random.default_rng(seed)
    users = [f"user-{i:05d}" for i in range(10_000)]
    events = ["click", "view", "purchase", "add_to_cart", "logout"]
    notes = [f"note {i} " + "x" * (i % 40) for i in range(1_000)]
    user_at = rng.integers(0, len(users), records).tolist()
    event_at = rng.integers(0, len(events), records).tolist()
    note_at = rng.integers(0, len(notes), records).tolist()
    amount = rng.normal(100.0, 50.0, records).tolist()
    score = rng.random(records).tolist()
    count = rng.integers(-1_000, 1_000_000, records).tolist()
    out = []
    write = fastavro.schemaless_writer
    for i in range(records):
        buffer = io.BytesIO()
        write(
            buffer,
            parsed,
            {
                "id": i * 7919 - 1_000_000,
                "user": users[user_at[i]],
                "event": events[event_at[i]],
                "amount": amount[i],
                "score": score[i],
                "count": count[i],
                "note": None if i % 3 == 0 else notes[note_at[i]],
                "ts": 1_700_000_000_000 + i,
            },
        )
        out.append(buffer.getvalue())
    return pa.array(out, pa.binary())


def _best(run: Callable[[], object], runs: int) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - t0)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument(
        "--sample", type=int, default=200_000, help="records per-message paths decode"
    )
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    import fastavro
    from pulsar.schema import AvroSchema

    values = datums(args.records)
    mb = values.buffers()[2].size / 1e6
    plan = avro_plan(json.dumps(SCHEMA))
    plan.decode(values.slice(0, 1000))  # warm-up

    ours_s, column = _best(lambda: plan.decode(values), args.runs)

    sample = values.slice(0, min(args.sample, args.records)).to_pylist()
    official = AvroSchema(None, schema_definition=SCHEMA)

    def official_path() -> pa.Table:
        return pa.Table.from_pylist([official.decode(v) for v in sample])

    parsed = fastavro.parse_schema(SCHEMA)

    def fastavro_path() -> pa.Table:
        read = fastavro.schemaless_reader
        return pa.Table.from_pylist([read(io.BytesIO(v), parsed, None) for v in sample])

    official_s, table = _best(official_path, args.runs)
    fastavro_s, _ = _best(fastavro_path, args.runs)

    assert isinstance(column, pa.StructArray) and isinstance(table, pa.Table)
    ours_rows = column.slice(0, len(sample)).to_pylist()
    assert ours_rows == table.to_pylist(), "ours and the official client decode differently"

    rates = {
        "ours (columnar)": args.records / ours_s,
        "official (AvroSchema.decode + from_pylist)": len(sample) / official_s,
        "fastavro (schemaless_reader + from_pylist)": len(sample) / fastavro_s,
    }
    print(f"{args.records:,} records, {mb:.1f} MB of datums, best of {args.runs}")
    print(f"{'path':<46}{'records/s':>14}{'vs official':>14}")
    base = rates["official (AvroSchema.decode + from_pylist)"]
    for name, rate in rates.items():
        print(f"{name:<46}{rate:>14,.0f}{rate / base:>13.1f}x")


if __name__ == "__main__":
    main()
