"""How ``checkpoint-v0/`` was made: stream checkpoints written by the connector before issue 12.

Run once, at commit b16f512 (the code before the one-position-type redesign), with
pyspark 4.3.0::

    .venv/bin/python tests/spark/data/make_checkpoint_v0.py

It is kept as the record of what the checkpoints hold, not to be run again: the point
of ``checkpoint-v0/`` is that an older version of the connector wrote it.
``tests/spark/test_stream_compat.py`` reads it with today's code (and reuses
:func:`produce_recorded` and :func:`run_available_now` to restart the queries).

Two queries, each on a fresh pulsar-lite, each written to ``checkpoint-v0/<name>/``
(``offsets/``, ``commits/``, ``metadata``, ``sources/`` when present):

* ``single``: non-partitioned topics ``compat-a`` (batched), ``compat-b`` (one
  message per entry), ``compat-c`` (empty) and ``compat-d`` (started from its second
  message by ``startingOffsets``), two rows per micro-batch (``maxRecordsPerTrigger``),
  so the offsets hold every form: ``earliest``, ``from:``, ``after:`` inside a batch
  and ``after:`` of a whole entry.
* ``partitioned``: ``compat-p`` (2 partitions, keyed, batched) and ``compat-q``
  (2 partitions, empty), from ``earliest``, in one micro-batch.

``manifest.json`` lists, per query, the broker setting, the options, the messages
produced in order (with the ids the broker gave them) and the rows of every
micro-batch.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
if str(ROOT) not in sys.path:  # run as a script
    sys.path.insert(0, str(ROOT))

# When it ran, the broker and produce() came from tests/brokers.py, the session was built here.
from tests.support.lite import PulsarLite  # noqa: E402
from tests.support.official import produce  # noqa: E402
from tests.support.spark import local_session  # noqa: E402

NS = "persistent://public/default/"

QUERIES: dict[str, dict[str, Any]] = {
    "single": {
        "default_partitions": 0,
        "produce": [
            {
                "topic": NS + "compat-a",
                "batching": True,
                "batching_max_messages": 3,
                "messages": [{"value": f"a{i}", "key": f"k{i % 2}"} for i in range(6)],
            },
            {
                "topic": NS + "compat-b",
                "batching": False,
                "messages": [{"value": f"b{i}"} for i in range(3)],
            },
            {
                "topic": NS + "compat-d",
                "batching": False,
                "messages": [{"value": f"d{i}"} for i in range(3)],
            },
        ],
        # startingOffsets for compat-d: the id of its second message, filled in below.
        "start_at": {"topic": NS + "compat-d", "message": 1},
        "options": {
            "topics": ",".join(NS + t for t in ("compat-a", "compat-b", "compat-c", "compat-d")),
            "maxRecordsPerTrigger": "2",
        },
    },
    "partitioned": {
        "default_partitions": 2,
        "produce": [
            {
                "topic": NS + "compat-p",
                "batching": True,
                "batching_max_messages": 4,
                "messages": [{"value": f"p{i}", "key": f"k{i}"} for i in range(10)],
            },
        ],
        "options": {"topics": NS + "compat-p," + NS + "compat-q", "startingOffsets": "earliest"},
    },
}


def produce_recorded(url: str, spec: dict[str, Any]) -> list[str]:
    """Produce one ``produce`` item of a query's spec (the manifest's too); their ids."""
    return produce(
        url,
        spec["topic"],
        spec["messages"],
        batching=spec["batching"],
        batching_max_messages=spec.get("batching_max_messages", 1000),
        batching_max_publish_delay_ms=5000,
    )


def run_available_now(
    spark: Any, url: str, options: dict[str, str], checkpoint: Path
) -> list[dict[str, Any]]:
    """Run the stream with ``options`` from ``checkpoint`` until it has read what is
    there (Trigger.AvailableNow); each micro-batch's id and rows."""
    reader = spark.readStream.format("pulsar").option("service.url", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    batches: list[dict[str, Any]] = []

    def collect(frame: Any, batch_id: int) -> None:
        rows = frame.select("topic", "messageId", "value").collect()
        batches.append(
            {
                "batch": batch_id,
                "rows": [
                    {"topic": r.topic, "messageId": r.messageId, "value": bytes(r.value).decode()}
                    for r in rows
                ],
            }
        )

    query = (
        reader.load()
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(collect)
        .start()
    )
    query.awaitTermination(300)
    assert not query.isActive, "the query did not finish in time"
    if query.exception() is not None:
        raise query.exception()
    return batches


def main() -> None:
    import pyspark

    spark = local_session()
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True
    ).stdout.strip()
    manifest: dict[str, Any] = {
        "made_by": f"pulsar-spark at commit {commit}, {Path(__file__).name}",
        "pyspark": pyspark.__version__,
        "queries": {},
    }
    out = HERE / "checkpoint-v0"
    work = Path(tempfile.mkdtemp(prefix="checkpoint-v0-"))
    try:
        for name, spec in QUERIES.items():
            broker = PulsarLite(
                work / f"broker-{name}", name=name, default_partitions=spec["default_partitions"]
            )
            broker.start()
            try:
                produced = []
                for item in spec["produce"]:
                    ids = produce_recorded(broker.service_url, item)
                    produced.append({**item, "ids": ids})
                options = dict(spec["options"])
                start_at = spec.get("start_at")
                if start_at is not None:
                    item = next(p for p in produced if p["topic"] == start_at["topic"])
                    options["startingOffsets"] = json.dumps(
                        {start_at["topic"]: item["ids"][start_at["message"]]}
                    )
                checkpoint = work / f"checkpoint-{name}"
                batches = run_available_now(spark, broker.service_url, options, checkpoint)
            finally:
                broker.close()
            target = out / name
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(parents=True)
            for part in ("offsets", "commits", "sources"):
                if (checkpoint / part).exists():
                    shutil.copytree(
                        checkpoint / part,
                        target / part,
                        ignore=shutil.ignore_patterns("*.crc", ".*.crc"),
                    )
            shutil.copy(checkpoint / "metadata", target / "metadata")
            manifest["queries"][name] = {
                "default_partitions": spec["default_partitions"],
                "options": options,
                "produced": produced,
                "batches": batches,
            }
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", "utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
