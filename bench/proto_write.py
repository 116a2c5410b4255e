"""PROTOBUF_NATIVE encode throughput: Arrow rows into protobuf payloads, ours (columnar,
``pulsar_spark.columnar.values.proto.encode``) next to google.protobuf per row, same run.

    python bench/proto_write.py [--records 200000] [--sample 50000] [--runs 3]

The ``Order`` of ``tests/support/proto.py`` (a nested message, repeated fields, a map,
an enum, a oneof, a Timestamp, a wrapper, uint64, bytes; ``bench/proto_read.py``'s
varied orders) is compiled with protoc; the orders are read once into the struct
column a Spark write batch holds (``proto_plan(schema).decode``). Then, best of
``--runs``:

``ours``
    ``ProtoEncoder(type, schema).encode(column)``: every row at once, into a binary
    column of payloads (what a Spark task sends).
``protobuf, from rows``
    what a per-row writer does with the same batch: ``column.to_pylist()``, each
    dict made into an ``Order`` (timestamps, maps, the oneof, enum names), then
    ``SerializeToString`` (the official client's ``ProtobufNativeSchema.encode``).
``protobuf, serialize only``
    ``SerializeToString`` of messages already built: the floor of any per-row path.

The per-row paths run on ``--sample`` records and are scaled. Ours and protobuf's
payloads are compared byte for byte first (fields in number order, one map entry).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from proto_read import make_orders, schema_info
from support.proto import ORDER_PROTO, compile_module

from pulsar_spark.columnar.values.proto.decode import proto_plan
from pulsar_spark.columnar.values.proto.encode import ProtoEncoder

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def to_message(module: Any, row: dict[str, Any]) -> Any:
    """An ``Order`` of one row as reads give it (what a per-row writer must build)."""
    order = module.Order(
        id=row["id"], name=row["name"], price=row["price"], tags=row["tags"], qty=row["qty"],
        status=module.Status.Value(row["status"]), big=int(row["big"]), blob=row["blob"],
    )  # fmt: skip
    for key, value in row["attrs"]:
        order.attrs[key] = value
    if row["address"] is not None:
        order.address.city, order.address.zip = row["address"]["city"], row["address"]["zip"]
    for stop in row["stops"]:
        order.stops.add(city=stop["city"], zip=stop["zip"])
    if row["card"] is not None:
        order.card = row["card"]
    if row["account"] is not None:
        order.account = row["account"]
    if row["created"] is not None:
        micros = (row["created"] - _EPOCH) // dt.timedelta(microseconds=1)
        order.created.seconds, order.created.nanos = divmod(micros, 1_000_000)
        order.created.nanos *= 1000
    if row["discount"] is not None:
        order.discount.value = row["discount"]
    return order


def timed(runs: int, action: Callable[[], object]) -> float:
    spent = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        spent.append(time.perf_counter() - started)
    return min(spent)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--sample", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        module = compile_module(Path(tmp), "bench_write", ORDER_PROTO.format(package="bench_w"))
    info = schema_info(module)
    payloads = make_orders(module, args.records)
    column = proto_plan(info).decode(pa.array(payloads, pa.binary()))
    encoder = ProtoEncoder(column.type, info)
    ours = encoder.encode(column)
    sample = column.slice(0, min(args.sample, len(column)))
    rows = sample.to_pylist()
    messages = [to_message(module, r) for r in rows]
    assert ours.slice(0, len(rows)).to_pylist() == [m.SerializeToString() for m in messages]
    assert ours.to_pylist() == payloads
    t_ours = timed(args.runs, lambda: encoder.encode(column))

    def from_rows() -> None:
        for row in sample.to_pylist():
            to_message(module, row).SerializeToString()

    t_rows = timed(args.runs, from_rows) * len(column) / len(rows)
    t_serialize = timed(args.runs, lambda: [m.SerializeToString() for m in messages])
    t_serialize *= len(column) / len(rows)
    n = len(column)
    print(f"records: {n:,} (per-row paths on {len(rows):,}, scaled); best of {args.runs}")
    print(f"{'path':<28}{'records/s':>14}{'ours / it':>12}")
    for name, spent in (
        ("ours (columnar)", t_ours),
        ("protobuf, from rows", t_rows),
        ("protobuf, serialize only", t_serialize),
    ):
        print(f"{name:<28}{n / spent:>14,.0f}{spent / t_ours:>11.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
