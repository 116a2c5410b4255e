"""Typed (AVRO) Spark writes against a raw-bytes write of the same rows.

    python bench/schema_write.py [--messages 1000000] [--runs 3] [--partitions 4]
                                 [--service-url URL]

Without ``--service-url`` an embedded pulsar-lite is started (no registry: the
struct is still encoded as Avro, no schema is registered). The rows are the
8-field record of ``bench/avro_decode.py`` (longs, strings, doubles, a nullable
string, a timestamp) built from ``spark.range`` in ``local[2]``. Two DataFrames,
each cached and counted first so that every run writes the same rows from memory:

* **typed**: ``value`` the record as a struct: the sink encodes it as AVRO
  (``recordName`` Event);
* **raw**: ``value`` the same record as ``to_json`` bytes (binary), made before
  the runs: the sink sends them as they are.

Both ``.write.format("pulsar")`` (LZ4, batched, each task returns once the broker
acknowledged its rows; every run writes to a fresh topic), best of ``--runs``
after a warm-up, in turn. Printed: rows/s, the bytes per value of each, and
typed/raw (target at least 50%).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _broker import broker_url, spark_session

#: The record's columns as Spark SQL over ``spark.range`` (``id``).
COLUMNS = (
    "id * 7919 - 1000000 AS id",
    "concat('user-', lpad(cast(id % 10000 AS string), 5, '0')) AS user",
    "element_at(array('click', 'view', 'purchase', 'add_to_cart', 'logout'),"
    " cast(id % 5 AS int) + 1) AS event",
    "cast(id % 1000 AS double) * 0.37 + 1.5 AS amount",
    "cast(id % 997 AS double) / 997.0 AS score",
    "id % 1000000 - 1000 AS count",
    "CASE WHEN id % 3 = 0 THEN NULL"
    " ELSE concat('note ', cast(id % 1000 AS string), ' ', repeat('x', cast(id % 40 AS int)))"
    " END AS note",
    "timestamp_millis(1700000000000 + id) AS ts",
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--service-url", help="an existing broker instead of pulsar-lite")
    args = parser.parse_args()
    n = args.messages

    with broker_url(args.service_url, "bench-schema-write-") as url:
        stamp = int(time.time())
        serial = iter(range(1_000_000))

        def topic(kind: str) -> str:
            return f"persistent://public/default/bench-schema-write-{stamp}-{kind}-{next(serial)}"

        spark = spark_session("bench-schema-write", 2)
        from pyspark.sql import functions as F

        rows = spark.range(0, n, 1, args.partitions).selectExpr(*COLUMNS)
        record = F.struct(*rows.columns)
        typed_df = rows.select(record.alias("value")).cache()
        raw_df = rows.select(F.to_json(record).cast("binary").alias("value")).cache()
        assert typed_df.count() == n and raw_df.count() == n
        raw_bytes = raw_df.selectExpr("avg(length(value))").first()[0]
        print("typed value:", typed_df.schema["value"].dataType.simpleString())

        def write(df, kind: str, **options: str) -> None:
            (
                df.write.format("pulsar")
                .option("service.url", url)
                .option("topic", topic(kind))
                .option("compressionType", "LZ4")
                .options(**options)
                .mode("append")
                .save()
            )

        actions = {
            "typed": lambda: write(typed_df, "typed", recordName="Event"),
            "raw": lambda: write(raw_df, "raw"),
        }
        for action in actions.values():
            action()  # warm-up
        spent: dict[str, list[float]] = {kind: [] for kind in actions}
        for _ in range(args.runs):  # in turn, so that outside load hits both alike
            for kind, action in actions.items():
                started = time.perf_counter()
                action()
                spent[kind].append(time.perf_counter() - started)
        typed_s, raw_s = min(spent["typed"]), min(spent["raw"])
        print(f"local[2] typed (AVRO struct) {n / typed_s:>12,.0f} rows/s  best {typed_s:.2f} s")
        print(
            f"local[2] raw (to_json bytes) {n / raw_s:>12,.0f} rows/s  best {raw_s:.2f} s  "
            f"({raw_bytes:.0f} B a value)"
        )
        print(f"local[2] typed/raw {raw_s / typed_s:.0%} (target: at least 50%)")
        typed_df.unpersist()
        raw_df.unpersist()
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
