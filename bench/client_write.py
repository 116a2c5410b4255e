"""Write rows and wait for the receipts: our producer against the official one.

    python bench/client_write.py [--messages 1000000] [--size 100] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started. Each side writes
``--messages`` payloads of ``--size`` bytes to its own topic, batched, LZ4 (or ZSTD),
and waits until every message is confirmed:

* ours: ``Producer.send_batch(arrow_table)`` then ``flush()``;
* official: ``send_async`` per row then ``flush()``.

``--compression zstd``: ZSTD instead of LZ4 on both sides (each of our producer threads
has its own compression context).

``--encrypted``: end-to-end encryption for one RSA-2048 key made for the run
(ours: ``encryption_keys=``/``public_key=``; official: ``encryption_key`` and
a ``CryptoKeyReader``).

``--partitions N``: topics of N partitions (the embedded pulsar-lite partitions every
topic; not with ``--service-url``): ours routes the table column by column, the official
producer row by row. ``--keys K``: row i has the key ``k<i % K>`` (0: keyless rows).

Each write runs in a process of its own (which builds the table too).
Prints messages/s for each, their ratio (best of ``--runs``) and each side's
peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pulsar
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import PulsarLite, broker_url, child_report, run_child
from _results import write_result
from client_read import KEYS_ENV, _keys, _write_keys

from pulsar_spark.client import PulsarClient

#: The codec of both sides, handed to each write's process (``--compression``).
CODEC_ENV = "PULSAR_SPARK_BENCH_COMPRESSION"
OFFICIAL_CODECS = {"lz4": pulsar.CompressionType.LZ4, "zstd": pulsar.CompressionType.ZSTD}


def _codec() -> str:
    return os.environ.get(CODEC_ENV, "lz4")


def write_ours(url: str, topic: str, table: pa.Table) -> None:
    with PulsarClient(url) as client:
        keys = _keys()
        crypto = {}
        if keys is not None:
            crypto = {"encryption_keys": "bench.key", "public_key": Path(keys["pub"]).as_uri()}
        # Our defaults: batches of up to 10,000 messages / 1 MiB, 100,000 messages in flight.
        producer = client.create_producer(topic, compression=_codec(), **crypto)
        producer.send_batch(table)
        producer.flush()
        producer.close()


def write_official(url: str, topic: str, table: pa.Table) -> None:
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        keys = _keys()
        crypto = {}
        if keys is not None:
            reader = pulsar.CryptoKeyReader(keys["pub"], keys["priv"])
            crypto = {"encryption_key": "bench.key", "crypto_key_reader": reader}
        producer = client.create_producer(
            topic,
            **crypto,
            compression_type=OFFICIAL_CODECS[_codec()],
            batching_enabled=True,
            block_if_queue_full=True,
            max_pending_messages=10_000,
        )
        keys = table.column("key").to_pylist() if "key" in table.column_names else None
        for i, value in enumerate(table.column("value").to_pylist()):
            if keys is None:
                producer.send_async(value, None)
            else:
                producer.send_async(value, None, partition_key=keys[i])
        producer.flush()
        producer.close()
    finally:
        client.close()


WRITERS = {"ours": write_ours, "official": write_official}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--service-url")
    parser.add_argument(
        "--encrypted", action="store_true", help="end-to-end encryption (one RSA key)"
    )
    parser.add_argument("--compression", choices=sorted(OFFICIAL_CODECS), default="lz4")
    parser.add_argument("--partitions", type=int, default=0, help="topics of N partitions")
    parser.add_argument("--keys", type=int, default=0, help="row i keyed k<i %% K>")
    parser.add_argument("--json-out", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--child", nargs=4, metavar=("WRITER", "URL", "TOPIC", "N"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        name, url, topic, count = args.child
        columns = {"value": pa.array([b"x" * args.size] * int(count), pa.binary())}
        if args.keys:
            columns["key"] = pa.array([f"k{i % args.keys}" for i in range(int(count))])
        table = pa.table(columns)
        started = time.perf_counter()
        WRITERS[name](url, topic, table)
        child_report(seconds=time.perf_counter() - started)
        return 0
    os.environ[CODEC_ENV] = args.compression
    key_dir = tempfile.TemporaryDirectory() if args.encrypted else None
    if key_dir is not None:
        os.environ[KEYS_ENV] = json.dumps(_write_keys(key_dir.name))
        print("encrypted: one RSA-2048 key")
    if args.partitions and args.service_url:
        parser.error("--partitions starts a pulsar-lite of its own: not with --service-url")
    with contextlib.ExitStack() as stack:
        if args.partitions:
            lite = PulsarLite(
                Path(tempfile.mkdtemp(prefix="bench-write-")),
                name="bench",
                default_partitions=args.partitions,
            )
            lite.start()
            stack.callback(lite.close)
            url = lite.service_url
            print(f"topics of {args.partitions} partitions, keys: {args.keys or 'none'}")
        else:
            url = stack.enter_context(broker_url(args.service_url, "bench-write-"))
        best = {"ours": float("inf"), "official": float("inf")}
        rss = {"ours": 0.0, "official": 0.0}
        times: dict[str, list[float]] = {"ours": [], "official": []}
        for run in range(args.runs):
            for name in ("ours", "official"):
                topic = f"persistent://public/default/bench-write-{name}-{run}-{int(time.time())}"
                report = run_child(
                    __file__,
                    name,
                    url,
                    topic,
                    str(args.messages),
                    "--size",
                    str(args.size),
                    "--keys",
                    str(args.keys),
                )
                best[name] = min(best[name], report["seconds"])
                times[name].append(report["seconds"])
                rss[name] = max(rss[name], report["rss_mib"])
        for name in ("ours", "official"):
            print(
                f"{name:9s} {args.messages / best[name]:>12,.0f} msgs/s  best {best[name]:.2f} s"
                f"  peak RSS {rss[name]:.0f} MiB"
            )
        print(f"ours/official: {best['official'] / best['ours']:.2f}x (goal: at least 1.0x)")
        if args.json_out:
            write_result(
                args.json_out,
                "client_write",
                messages=args.messages,
                size=args.size,
                encrypted=args.encrypted,
                partitions=args.partitions,
                keys=args.keys,
                compression=args.compression,
                runs=args.runs,
                broker=args.service_url or "pulsar-lite (embedded)",
                seconds=times,
                rss_mib=rss,
                ratio_best=best["official"] / best["ours"],
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
