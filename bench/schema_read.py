"""Typed (AVRO) reads: our client and Spark source against the official client and a raw read.

    python bench/schema_read.py [--messages 1000000] [--official-messages 200000]
                                [--runs 3] [--partitions 4] [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started; it has no schema
registry, so our side is given the schema (the client's ``schema=``, Spark's
``avroSchema``) and the official client its ``AvroSchema``: the values read are
the same as from a registry. With an Apache broker's URL the topic gets the
schema registered by our producer, and Spark takes it from the registry.

``--messages`` datums of the 8-field record of ``bench/avro_decode.py`` (longs,
strings, doubles, a nullable string, a ``timestamp-millis``) are produced once
(our producer, AVRO schema, LZ4, batched) into one topic. Then, in the same run:

(a) into Arrow with typed values, best of ``--runs``, the two in turn:

* **ours**: ``PulsarClient.read_batches`` and ``avro_plan(schema).decode`` of each
  batch's ``value`` column (what a Spark task does), rows/s over the whole topic;
* **official**: a ``pulsar.Reader`` with ``AvroSchema(None, schema_definition=...)``
  (a ``Record`` class cannot say ``timestamp-millis``; the decode is the same
  fastavro call) over the first ``--official-messages``, ``msg.value()`` dicts
  gathered and turned into ``pa.Table.from_pylist`` every 10,000, rows/s.

(b) Spark ``local[2]``, ``minPartitions`` ``--partitions``, best of ``--runs``,
typed and raw (``schemaMode=raw``, binary ``value``) in turn:

* ``load().count()``;
* every column consumed: typed ``load().select("value.*")``, raw
  ``load().select("value")``, each ``.write.format("noop")``.

Printed: rows/s, ours/official (target at least 10x) and typed/raw (target at
least 50%).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, spark_session
from avro_decode import SCHEMA, datums

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar import avro_plan
from pulsar_spark.protocol.schemas.info import SchemaInfo

INFO = SchemaInfo.avro(SCHEMA, name="Event")


def produce(url: str, topic: str, count: int, *, registry: bool) -> None:
    """``count`` datums; with ``registry`` (Apache) the producer registers the schema.
    pulsar-lite would stamp a schema version the official reader then asks it for."""
    values = datums(min(count, 200_000))
    with PulsarClient(url) as client:
        producer = client.create_producer(
            topic,
            compression="lz4",
            max_pending_messages=20_000,
            schema=INFO if registry else None,
        )
        left = count
        while left:
            part = values.slice(0, min(left, len(values)))
            producer.send_batch(pa.table({"value": part}))
            left -= len(part)
        producer.flush()
        producer.close()


def read_ours(url: str, topic: str) -> int:
    plan = avro_plan(json.dumps(SCHEMA))
    rows = 0
    with PulsarClient(url) as client:
        for batch in client.read_batches(topic, batch_rows=50_000, schema=INFO):
            rows += len(plan.decode(batch.column("value")))
    return rows


def read_official(url: str, topic: str, limit: int, *, registry: bool) -> int:
    """On pulsar-lite the reader's C++ core would wait for GET_SCHEMA answers that never
    come, so there it reads bytes and this calls the same ``AvroSchema.decode`` that
    ``msg.value()`` calls."""
    import pulsar
    from pulsar.schema import AvroSchema

    schema = AvroSchema(None, schema_definition=SCHEMA)
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
            pending.append(msg.value() if registry else decode(msg.data()))
            rows += 1
            if len(pending) >= 10_000:
                pa.Table.from_pylist(pending)
                pending.clear()
        if pending:
            pa.Table.from_pylist(pending)
        reader.close()
        return rows
    finally:
        client.close()


def alternating(runs: int, first: Callable[[], int], second: Callable[[], int]) -> list[float]:
    """Best times of two actions run in turn after a warm-up of each (counts checked)."""
    expect = (first(), second())
    spent: list[list[float]] = [[], []]
    for _ in range(runs):
        for i, action in enumerate((first, second)):
            started = time.perf_counter()
            assert action() == expect[i]
            spent[i].append(time.perf_counter() - started)
    return [min(times) for times in spent]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--official-messages", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--service-url", help="an existing broker instead of pulsar-lite")
    parser.add_argument("--skip-spark", action="store_true")
    args = parser.parse_args()
    n, sample = args.messages, min(args.official_messages, args.messages)

    with broker_url(args.service_url, "bench-schema-read-") as url:
        topic = f"persistent://public/default/bench-schema-read-{int(time.time())}"
        started = time.perf_counter()
        registry = args.service_url is not None
        produce(url, topic, n, registry=registry)
        spent = time.perf_counter() - started
        print(f"produced {n:,} AVRO records (LZ4, batched) in {spent:.1f} s")

        ours_s, official_s = alternating(
            args.runs,
            lambda: read_ours(url, topic),
            lambda: read_official(url, topic, sample, registry=registry),
        )
        ours, official = n / ours_s, sample / official_s
        print(f"(a) ours (read_batches + avro_plan) {ours:>12,.0f} rows/s  best {ours_s:.2f} s")
        print(
            f"(a) official (AvroSchema reader)     {official:>12,.0f} rows/s  "
            f"best {official_s:.2f} s for {sample:,}"
        )
        print(f"(a) ours/official {ours / official:.1f}x (target: at least 10x)")
        if args.skip_spark:
            return 0

        spark = spark_session("bench-schema-read", 2)

        def load(raw: bool):
            reader = (
                spark.read.format("pulsar")
                .option("service.url", url)
                .option("topic", topic)
                .option("minPartitions", str(args.partitions))
            )
            if raw:
                reader = reader.option("schemaMode", "raw")
            elif args.service_url is None:
                reader = reader.option("avroSchema", json.dumps(SCHEMA))
            return reader.load()

        typed_df, raw_df = load(False), load(True)
        print("typed value:", typed_df.schema["value"].dataType.simpleString())

        def consume(df) -> Callable[[], int]:
            def run() -> int:
                df.write.format("noop").mode("overwrite").save()
                return n

            return run

        cases = {
            "count()": (typed_df.count, raw_df.count),
            "all columns -> noop": (
                consume(typed_df.select("value.*")),
                consume(raw_df.select("value")),
            ),
        }
        for name, (typed, raw) in cases.items():
            typed_s, raw_s = alternating(args.runs, typed, raw)
            head = f"(b) local[2] {name:<20}"
            print(f"{head} typed {n / typed_s:>12,.0f} rows/s  best {typed_s:.2f} s")
            print(f"{head} raw   {n / raw_s:>12,.0f} rows/s  best {raw_s:.2f} s")
            print(f"{head} typed/raw {raw_s / typed_s:.0%} (target: at least 50%)")
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
