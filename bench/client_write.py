"""Write rows and wait for the receipts: our producer against the official one.

    python bench/client_write.py [--messages 1000000] [--size 100] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started. Each side writes
``--messages`` payloads of ``--size`` bytes to its own topic, batched, LZ4,
and waits until every message is confirmed:

* ours: ``Producer.send_batch(arrow_table)`` then ``flush()``;
* official: ``send_async`` per row then ``flush()``.

Prints messages/s for each and their ratio (best of ``--runs``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pulsar
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url

from pulsar_spark.client import PulsarClient


def write_ours(url: str, topic: str, table: pa.Table) -> None:
    with PulsarClient(url) as client:
        producer = client.create_producer(topic, compression="lz4", max_pending_messages=10_000)
        producer.send_batch(table)
        producer.flush()
        producer.close()


def write_official(url: str, topic: str, table: pa.Table) -> None:
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        producer = client.create_producer(
            topic, compression_type=pulsar.CompressionType.LZ4, batching_enabled=True,
            block_if_queue_full=True, max_pending_messages=10_000,
        )
        for value in table.column("value").to_pylist():
            producer.send_async(value, None)
        producer.flush()
        producer.close()
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--service-url")
    args = parser.parse_args()
    with broker_url(args.service_url, "bench-write-") as url:
        table = pa.table({"value": pa.array([b"x" * args.size] * args.messages, pa.binary())})
        best = {"ours": float("inf"), "official": float("inf")}
        for run in range(args.runs):
            for name, writer in (("ours", write_ours), ("official", write_official)):
                topic = f"persistent://public/default/bench-write-{name}-{run}-{int(time.time())}"
                started = time.perf_counter()
                writer(url, topic, table)
                best[name] = min(best[name], time.perf_counter() - started)
        for name in ("ours", "official"):
            print(f"{name:9s} {args.messages / best[name]:>12,.0f} msgs/s  best {best[name]:.2f} s")
        print(f"ours/official: {best['official'] / best['ours']:.2f}x (goal: at least 1.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
