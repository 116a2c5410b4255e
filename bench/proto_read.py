"""PROTOBUF_NATIVE reads: our client into Arrow against the official client's
``ProtobufNativeSchema``.

    python bench/proto_read.py [--messages 200000] [--official-messages 50000]
                               [--runs 3] [--service-url URL]

The ``Order`` of ``tests/support/proto.py`` (a nested message, repeated fields, a map,
an enum, a oneof, a Timestamp, a wrapper, uint64, bytes) is compiled with protoc,
``--messages`` varied orders are produced once (our producer, the PROTOBUF_NATIVE
schema, LZ4, batched). Then, best of ``--runs``, in turn:

* **ours**: ``PulsarClient.read_batches`` and ``proto_plan(schema).decode`` of each
  batch's ``value`` column (what a Spark task does), rows/s over the whole topic;
* **official**: a ``pulsar.Reader`` with ``ProtobufNativeSchema(Order)`` over the
  first ``--official-messages``: ``msg.value()`` (a parsed message; on pulsar-lite,
  which has no registry, bytes and ``schema.decode``, the same parse), then, to
  compare like with like, ``MessageToDict`` and ``pa.Table.from_pylist`` every
  10,000 rows; its parse-only rate is printed too.

Printed: rows/s of each and the ratios ours/official (into Arrow, and parse only).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _broker import broker_url
from support.proto import ORDER_PROTO, compile_module

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar.values.proto.decode import proto_plan
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType


def make_orders(module: Any, count: int) -> list[bytes]:
    out = []
    for i in range(count):
        order = module.Order(id=i, name=f"order-{i}", price=i * 0.25, status=i % 3)
        order.tags.extend(["a", "bb"][: i % 3])
        order.qty.extend([i % 7, i % 300])
        order.attrs["k"] = i
        order.address.city, order.address.zip = "Paris", 75000 + i % 100
        if i % 2:
            order.card = "visa"
        else:
            order.account = i
        order.created.seconds, order.created.nanos = 1_700_000_000 + i, 1000 * (i % 1000)
        if i % 5 == 0:
            order.discount.value = i
        order.big = i * 1_000_003
        out.append(order.SerializeToString())
    return out


def schema_info(module: Any) -> SchemaInfo:
    import json

    from pulsar.schema.schema_protobuf import _build_schema_definition

    data = json.dumps(_build_schema_definition(module.Order.DESCRIPTOR)).encode()
    return SchemaInfo(SchemaType.PROTOBUF_NATIVE, "Order", data)


def produce(url: str, topic: str, count: int, payloads: list[bytes], info: SchemaInfo) -> None:
    values = pa.array(payloads, pa.binary())
    with PulsarClient(url) as client:
        producer = client.create_producer(
            topic, compression="lz4", max_pending_messages=20_000, schema=info
        )
        left = count
        while left:
            part = values.slice(0, min(left, len(values)))
            producer.send_batch(pa.table({"value": part}))
            left -= len(part)
        producer.flush()
        producer.close()


def read_ours(url: str, topic: str, info: SchemaInfo) -> int:
    plan = proto_plan(info)
    rows = 0
    with PulsarClient(url) as client:
        for batch in client.read_batches(topic, batch_rows=50_000, schema=info):
            rows += len(plan.decode(batch.column("value")))
    return rows


def read_official(
    url: str, topic: str, limit: int, module: Any, *, registry: bool, to_arrow: bool
) -> int:
    import pulsar
    from google.protobuf.json_format import MessageToDict
    from pulsar.schema import ProtobufNativeSchema

    schema = ProtobufNativeSchema(module.Order)
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = client.create_reader(
            topic,
            pulsar.MessageId.earliest,
            receiver_queue_size=1000,
            **({"schema": schema} if registry else {}),
        )
        decode = schema.decode
        rows, pending = 0, []
        while rows < limit and reader.has_message_available():
            msg = reader.read_next(10_000)
            value = msg.value() if registry else decode(msg.data())
            rows += 1
            if to_arrow:
                pending.append(MessageToDict(value, preserving_proto_field_name=True))
                if len(pending) >= 10_000:
                    pa.Table.from_pylist(pending)
                    pending.clear()
        if pending:
            pa.Table.from_pylist(pending)
        reader.close()
        return rows
    finally:
        client.close()


def best(runs: int, actions: list[Callable[[], int]]) -> list[float]:
    """Best times of actions run in turn after a warm-up of each (counts checked)."""
    expect = [action() for action in actions]
    spent: list[list[float]] = [[] for _ in actions]
    for _ in range(runs):
        for i, action in enumerate(actions):
            started = time.perf_counter()
            assert action() == expect[i]
            spent[i].append(time.perf_counter() - started)
    return [min(times) for times in spent]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--official-messages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--service-url", help="an Apache broker instead of pulsar-lite")
    args = parser.parse_args()
    n, sample = args.messages, min(args.official_messages, args.messages)
    module = compile_module(
        Path(tempfile.mkdtemp(prefix="bench-proto-")),
        "bench_shop",
        ORDER_PROTO.format(package="bench_shop"),
    )
    info = schema_info(module)
    registry = args.service_url is not None
    with broker_url(args.service_url, "bench-proto-read-") as url:
        topic = f"persistent://public/default/bench-proto-read-{int(time.time())}"
        started = time.perf_counter()
        produce(url, topic, n, make_orders(module, min(n, 100_000)), info)
        print(f"produced {n:,} PROTOBUF_NATIVE orders in {time.perf_counter() - started:.1f} s")

        def official(to_arrow: bool) -> Callable[[], int]:
            return lambda: read_official(
                url, topic, sample, module, registry=registry, to_arrow=to_arrow
            )

        ours_s, arrow_s, parse_s = best(
            args.runs, [lambda: read_ours(url, topic, info), official(True), official(False)]
        )
        ours, arrow, parse = n / ours_s, sample / arrow_s, sample / parse_s
        where = "registry" if registry else "pulsar-lite: bytes + schema.decode"
        print(f"ours (read_batches + proto_plan)       {ours:>12,.0f} rows/s  best {ours_s:.2f} s")
        print(f"official into Arrow (MessageToDict)    {arrow:>12,.0f} rows/s  ({where})")
        print(f"official parse only (msg.value())      {parse:>12,.0f} rows/s")
        print(f"ours/official into Arrow {ours / arrow:.1f}x; ours/official parse only "
              f"{ours / parse:.1f}x")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
