"""A transactional write against the same write without a transaction, in one run.

    python bench/txn_write.py [--messages 1000000] [--size 100] [--runs 3] [--service-url URL]

Without ``--service-url`` an Apache Pulsar 4.0 standalone with transactions on (the
test suite's ``txn`` variant: deduplication off) is started. Each side writes
``--messages`` random payloads of ``--size`` bytes to a topic of its own with
``Producer.send_batch`` (batched, LZ4) and waits for every receipt:

* plain: ``send_batch`` then ``flush()``;
* transactional: ``new_transaction()``, a producer given ``transaction=``,
  ``send_batch``, ``flush()``, then ``commit()`` (its time counts: the rows are
  visible only then).

The sides alternate, ``--runs`` times each; prints the messages/s of each, the
best and median ratio (transactional / plain; the goal is at least 0.7), and where a
transactional write's time goes (opening, writing, committing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulsar_spark.client import PulsarClient


@contextlib.contextmanager
def txn_broker(service_url: str | None) -> Iterator[str]:
    """``service_url`` as is, or an Apache Pulsar with transactions started here."""
    if service_url is not None:
        yield service_url
        return
    from tests.support.apache import ApachePulsar

    broker = ApachePulsar(Path(tempfile.mkdtemp(prefix="bench-txn-")), variant="txn")
    broker.start()
    try:
        yield broker.service_url
    finally:
        broker.stop()


def _table(messages: int, size: int) -> pa.Table:
    """Random payloads (compression cannot shrink them to nothing)."""
    data = np.random.default_rng(7).integers(0, 256, messages * size, dtype=np.uint8)
    offsets = np.arange(0, (messages + 1) * size, size, dtype=np.int32)
    values = pa.BinaryArray.from_buffers(
        pa.binary(), messages, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )
    return pa.table({"value": values})


def write(url: str, table: pa.Table, *, transactional: bool) -> dict[str, float]:
    """One write of ``table`` to a new topic; its phases' seconds."""
    topic = f"persistent://public/default/bench-txn-{secrets.token_hex(4)}"
    with PulsarClient(url) as client:
        client.get_last_message_id(topic)  # the topic exists: its creation is not timed
        t0 = time.perf_counter()
        txn = client.new_transaction(timeout=600) if transactional else None
        t1 = time.perf_counter()
        with client.create_producer(topic, compression="lz4", transaction=txn) as producer:
            producer.send_batch(table)
            producer.flush()
        t2 = time.perf_counter()
        if txn is not None:
            txn.commit()
        t3 = time.perf_counter()
    return {"open": t1 - t0, "write": t2 - t1, "commit": t3 - t2, "total": t3 - t0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--service-url")
    args = parser.parse_args()
    table = _table(args.messages, args.size)
    plain: list[dict[str, float]] = []
    txn: list[dict[str, float]] = []
    with txn_broker(args.service_url) as url:
        write(url, table.slice(0, 10_000), transactional=True)  # warm up both paths
        write(url, table.slice(0, 10_000), transactional=False)
        for _ in range(args.runs):
            plain.append(write(url, table, transactional=False))
            txn.append(write(url, table, transactional=True))
    rate = {
        "plain": [args.messages / r["total"] for r in plain],
        "transactional": [args.messages / r["total"] for r in txn],
    }
    ratios = [t / p for t, p in zip(rate["transactional"], rate["plain"], strict=True)]
    report = {
        "messages": args.messages,
        "size": args.size,
        "plain_msgs_per_s": [round(r) for r in rate["plain"]],
        "transactional_msgs_per_s": [round(r) for r in rate["transactional"]],
        "ratio_best": round(max(rate["transactional"]) / max(rate["plain"]), 3),
        "ratio_median": round(statistics.median(ratios), 3),
        "transactional_phases_s": {
            phase: round(statistics.median(r[phase] for r in txn), 3)
            for phase in ("open", "write", "commit")
        },
    }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
