"""Avro encode throughput: an 8-field record table into one Avro datum per row, ours
(columnar, ``pulsar_spark.columnar.values.avro.encode``) next to ``fastavro.schemaless_writer``
called per row (what the official Python client's ``AvroSchema.encode`` does), same run.

The record (:func:`record_table`): ``id`` long, ``user`` and ``event`` strings, ``amount``
and ``score`` doubles, ``count`` long, ``note`` a nullable string (null on every third
row), ``ts`` a timestamp (``timestamp-micros``). Both paths write the same schema (the one
ours derives from the table) and their bytes are compared on a sample of rows.

``ours`` encodes the whole table in one call; ``fastavro`` gets each row as a dict (the
dicts are built before the clock starts, as a producer would already hold them). The
table shows rows/s of each (best of ``--runs`` passes) and the ratio.

Usage::

    python bench/avro_encode.py                  # 1,000,000 rows, 3 passes each
    python bench/avro_encode.py --rows 200000 --runs 5
    python bench/avro_encode.py --stages         # seconds per field of ours, once
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulsar_spark.columnar.values.avro.encode import avro_encoder, value_type


def record_table(rows: int, *, seed: int = 7) -> pa.Table:
    """The benchmark's 8-field records (the same for a given ``rows`` and ``seed``)."""
    rng = np.random.default_rng(seed)
    users = np.array([f"user-{i:05d}" for i in range(10_000)], dtype=object)
    events = np.array(["click", "view", "purchase", "add_to_cart", "logout"], dtype=object)
    notes = np.array([f"note {i} " + "x" * (i % 40) for i in range(1_000)], dtype=object)
    note_mask = np.arange(rows) % 3 == 0
    start = 1_700_000_000_000_000
    return pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64) * 7919 - 1_000_000),
            "user": pa.array(users[rng.integers(0, len(users), rows)], pa.string()),
            "event": pa.array(events[rng.integers(0, len(events), rows)], pa.string()),
            "amount": pa.array(rng.normal(100.0, 50.0, rows)),
            "score": pa.array(rng.random(rows)),
            "count": pa.array(rng.integers(-1_000, 1_000_000, rows, dtype=np.int64)),
            "note": pa.array(notes[rng.integers(0, len(notes), rows)], pa.string(), mask=note_mask),
            "ts": pa.array(
                start + np.arange(rows, dtype=np.int64) * 1_000, pa.timestamp("us", tz="UTC")
            ),
        }
    )


def _best(run: object, runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        run()  # type: ignore[operator]
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--stages", action="store_true")
    args = parser.parse_args()

    import fastavro

    table = record_table(args.rows)
    encoder = avro_encoder(value_type(table))
    schema = fastavro.parse_schema(json.loads(encoder.schema))
    if args.stages:
        _stages(table)
        return
    out = encoder.encode(table)  # warm-up, and the bytes to compare
    dicts = table.to_pylist()
    write = fastavro.schemaless_writer

    def fastavro_pass() -> None:
        for row in dicts:
            buf = io.BytesIO()
            write(buf, schema, row)
            buf.getvalue()

    for i in range(0, args.rows, max(1, args.rows // 1000)):
        buf = io.BytesIO()
        write(buf, schema, dicts[i])
        assert buf.getvalue() == out[i].as_py(), f"row {i} differs"
    ours = _best(lambda: encoder.encode(table), args.runs)
    theirs = _best(fastavro_pass, args.runs)
    print(f"rows: {args.rows:,}  payload bytes: {out.nbytes:,}  (best of {args.runs})")
    print(f"ours      {args.rows / ours:>14,.0f} rows/s  {ours:8.3f} s")
    print(f"fastavro  {args.rows / theirs:>14,.0f} rows/s  {theirs:8.3f} s")
    print(f"ratio     {theirs / ours:>14.1f}x")


def _stages(table: pa.Table) -> None:
    """Seconds of each field alone, then of the whole record."""
    for name in table.column_names:
        column = table.select([name])
        encoder = avro_encoder(value_type(column))
        t = _best(lambda enc=encoder, col=column: enc.encode(col), 1)
        print(f"{name:8} {t:8.3f} s")
    encoder = avro_encoder(value_type(table))
    print(f"{'all':8} {_best(lambda: encoder.encode(table), 1):8.3f} s")


if __name__ == "__main__":
    main()
