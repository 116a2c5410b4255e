"""Read a topic into Arrow: our client against the official one, same broker, same run.

    python bench/client_read.py [--messages 1000000] [--size 100] [--shape fixed]
                                [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started (the test
fixtures' launcher). The official client produces the messages (batched,
LZ4); then each reader reads all of them, in alternating order, best of
``--runs``:

* ours: ``PulsarClient.read_batches`` -> pyarrow.RecordBatch;
* official: a ``pulsar.Reader`` loop from earliest building the same
  columns (value, key, properties, event time, message id, publish time,
  producer name, sequence id) into lists, then ``pa.table``.

``--shape`` picks the messages (``fixed``, ``varied`` or ``keyed``, see
``bench/_shapes.py``).

``--encrypted``: end-to-end encrypted messages, one RSA-2048 key (made for
the run): the official client produces with ``encryption_key`` and its
``CryptoKeyReader``; ours reads with ``private_key=`` (a ``file:`` URL), the
official reader with the ``CryptoKeyReader``.

Each read runs in a process of its own, so that its peak RSS is its own.
Prints messages/s for each, their ratio, and each reader's peak RSS next to
that of a process that only imports both clients (the reader's memory must
be bounded by its queue, not by the topic).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import pulsar
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, child_report, run_child
from _results import write_result
from _shapes import SHAPES, sample_messages
from support.official import produce

from pulsar_spark.client import PulsarClient

#: The environment variable that hands the children the key files (``--encrypted``).
KEYS_ENV = "PULSAR_SPARK_BENCH_KEYS"


def _keys() -> dict[str, str] | None:
    found = os.environ.get(KEYS_ENV)
    return json.loads(found) if found else None


def _write_keys(directory: str) -> dict[str, str]:
    """An RSA-2048 key pair as PEM files in ``directory``: {"pub": path, "priv": path}."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    paths = {"pub": os.path.join(directory, "pub.pem"), "priv": os.path.join(directory, "priv.pem")}
    with open(paths["priv"], "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    with open(paths["pub"], "wb") as f:
        f.write(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
    return paths


def read_ours(url: str, topic: str) -> int:
    rows = 0
    keys = _keys()
    crypto = {} if keys is None else {"private_key": Path(keys["priv"]).as_uri()}
    with PulsarClient(url) as client:
        for batch in client.read_batches(topic, **crypto):
            rows += batch.num_rows
    return rows


def read_official(url: str, topic: str) -> int:
    client = pulsar.Client(url, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error))
    try:
        keys = _keys()
        reader_keys = None if keys is None else pulsar.CryptoKeyReader(keys["pub"], keys["priv"])
        crypto = {} if reader_keys is None else {"crypto_key_reader": reader_keys}
        reader = client.create_reader(
            topic, pulsar.MessageId.earliest, receiver_queue_size=1000, **crypto
        )
        cols: dict[str, list] = {
            name: []
            for name in (
                "key",
                "value",
                "messageId",
                "publishTime",
                "eventTime",
                "properties",
                "producerName",
                "sequenceId",
            )
        }
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


READERS = {"ours": read_ours, "official": read_official, "idle": lambda url, topic: 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="payload bytes")
    parser.add_argument(
        "--shape",
        choices=SHAPES,
        default="fixed",
        help="the messages' sizes and fields (see above)",
    )
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--encrypted", action="store_true", help="end-to-end encrypted messages (one RSA key)"
    )
    parser.add_argument("--service-url", help="an existing broker instead of pulsar-lite")
    parser.add_argument("--json-out", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--child", nargs=3, metavar=("READER", "URL", "TOPIC"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        name, url, topic = args.child
        started = time.perf_counter()
        rows = READERS[name](url, topic)
        child_report(seconds=time.perf_counter() - started, rows=rows)
        return 0

    key_dir = tempfile.TemporaryDirectory() if args.encrypted else None
    crypto = {}
    if key_dir is not None:
        keys = _write_keys(key_dir.name)
        os.environ[KEYS_ENV] = json.dumps(keys)
        reader = pulsar.CryptoKeyReader(keys["pub"], keys["priv"])
        crypto = {"encryption_key": "bench.key", "crypto_key_reader": reader}
    with broker_url(args.service_url, "bench-read-") as url:
        topic = f"persistent://public/default/bench-read-{int(time.time())}"
        started = time.perf_counter()
        produce(
            url,
            topic,
            sample_messages(args.shape, args.messages, args.size),
            compression="LZ4",
            timeout=3600,
            **crypto,
        )
        print(
            f"produced {args.messages:,} x {args.size} B ({args.shape}; LZ4, batched"
            f"{', encrypted' if crypto else ''}) in "
            f"{time.perf_counter() - started:.1f} s with the official client"
        )
        best = {"ours": float("inf"), "official": float("inf")}
        rss = {"ours": 0.0, "official": 0.0}
        times: dict[str, list[float]] = {"ours": [], "official": []}
        for _ in range(args.runs):
            for name in ("ours", "official"):
                report = run_child(__file__, name, url, topic)
                if report["rows"] < args.messages:
                    print(f"{name}: read only {report['rows']:,} of {args.messages:,} messages")
                best[name] = min(best[name], report["seconds"])
                times[name].append(report["seconds"])
                rss[name] = max(rss[name], report["rss_mib"])
        idle = run_child(__file__, "idle", url, topic)["rss_mib"]
        for name in ("ours", "official"):
            rate = args.messages / best[name]
            print(
                f"{name:9s} {rate:>12,.0f} msgs/s  best {best[name]:.2f} s  "
                f"peak RSS {rss[name]:.0f} MiB ({rss[name] - idle:+.0f} over imports only)"
            )
        payload_mib = args.messages * args.size / 2**20
        print(f"imports only: {idle:.0f} MiB; topic payload {payload_mib:.0f} MiB")
        ratio = best["official"] / best["ours"]
        goal = 5.0 if args.encrypted else 2.0  # issue 16: encrypted reads at least 5x
        print(f"ours/official: {ratio:.2f}x (goal: at least {goal:.1f}x)")
        if args.json_out:
            write_result(
                args.json_out,
                "client_read",
                messages=args.messages,
                size=args.size,
                shape=args.shape,
                encrypted=args.encrypted,
                runs=args.runs,
                broker=args.service_url or "pulsar-lite (embedded)",
                seconds=times,
                rss_mib=rss | {"imports_only": idle},
                ratio_best=ratio,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
