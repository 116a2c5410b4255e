"""Read a topic into Arrow: our client against the official one, same broker, same run.

    python bench/client_read.py [--messages 1000000] [--size 100] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started (the test
fixtures' launcher). The official client produces the messages (batched,
LZ4); then each reader reads all of them, in alternating order, best of
``--runs``:

* ours: ``PulsarClient.read_batches`` -> pyarrow.RecordBatch;
* official: a ``pulsar.Reader`` loop from earliest building the same
  columns (value, key, properties, event time, message id, publish time,
  producer name, sequence id) into lists, then ``pa.table``.

Prints messages/s for each, their ratio, and the peak RSS of the process
after each reader (the reader's memory must be bounded by its queue, not by
the topic).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import pulsar
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url
from brokers import produce

from pulsar_spark.client import PulsarClient


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_ours(url: str, topic: str) -> int:
    rows = 0
    with PulsarClient(url) as client:
        for batch in client.read_batches(topic):
            rows += batch.num_rows
    return rows


def read_official(url: str, topic: str) -> int:
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest, receiver_queue_size=1000)
        cols: dict[str, list] = {name: [] for name in (
            "key", "value", "messageId", "publishTime", "eventTime", "properties",
            "producerName", "sequenceId")}
        rows = 0
        while reader.has_message_available():
            msg = reader.read_next(10_000)
            mid = msg.message_id()
            cols["key"].append(msg.partition_key().encode() or None)
            cols["value"].append(msg.data())
            cols["messageId"].append(
                f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"
            )
            cols["publishTime"].append(msg.publish_timestamp())
            cols["eventTime"].append(msg.event_timestamp() or None)
            cols["properties"].append(list(msg.properties().items()))
            cols["producerName"].append(msg.producer_name())
            cols["sequenceId"].append(msg.sequence_id() if hasattr(msg, "sequence_id") else 0)
            rows += 1
            if len(cols["value"]) >= 10_000:
                pa.table(cols)
                for column in cols.values():
                    column.clear()
        if cols["value"]:
            pa.table(cols)
        reader.close()
        return rows
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--service-url", help="an existing broker instead of pulsar-lite")
    args = parser.parse_args()

    with broker_url(args.service_url, "bench-read-") as url:
        topic = f"persistent://public/default/bench-read-{int(time.time())}"
        payload = b"x" * args.size
        started = time.perf_counter()
        produce(url, topic, ({"value": payload} for _ in range(args.messages)),
                compression="LZ4", timeout=3600)
        print(f"produced {args.messages:,} x {args.size} B (LZ4, batched) in "
              f"{time.perf_counter() - started:.1f} s with the official client")
        best = {"ours": float("inf"), "official": float("inf")}
        rss = {}
        for _ in range(args.runs):
            for name, reader in (("ours", read_ours), ("official", read_official)):
                started = time.perf_counter()
                rows = reader(url, topic)
                elapsed = time.perf_counter() - started
                if rows < args.messages:
                    print(f"{name}: read only {rows:,} of {args.messages:,} messages")
                best[name] = min(best[name], elapsed)
                rss[name] = _rss_mib()
        for name in ("ours", "official"):
            rate = args.messages / best[name]
            print(f"{name:9s} {rate:>12,.0f} msgs/s  best {best[name]:.2f} s  "
                  f"peak RSS so far {rss[name]:.0f} MiB")
        ratio = best["official"] / best["ours"]
        print(f"ours/official: {ratio:.2f}x (goal: at least 2.0x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
