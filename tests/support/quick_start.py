"""The README's quick start, run as written: :func:`run_quick_start`.

The README's ``python quick-start`` block (session, batch write, batch read) and
``python quick-start-stream`` block (a stream from the topic into parquet, with a checkpoint)
run with ``exec``, with only the broker's URL, the topic name and the paths replaced. The
main run does it on its own Spark (``tests/spark/test_readme_quick_start.py``),
the smoke runs of ``tests/versions`` on each older one. Messages go in and come out through
this package's own client (:func:`produce`, :func:`read_values`), which the smoke venvs have.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pulsar_spark.client import PulsarClient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["produce", "read_values", "readme_block", "run_quick_start"]

README = Path(__file__).resolve().parents[2] / "README.md"


def produce(url: str, topic: str, values: list[bytes], keys: list[str] | None = None) -> None:
    """Send ``values`` (with ``keys``, if given) to ``topic``, in one batch."""
    columns: dict[str, pa.Array] = {"value": pa.array(values, pa.binary())}
    if keys is not None:
        columns["key"] = pa.array(keys, pa.string())
    with PulsarClient(url) as client, client.create_producer(topic) as producer:
        producer.send_batch(pa.table(columns))
        producer.flush()


def read_values(url: str, topic: str) -> list[bytes]:
    """Every value in ``topic``, in order."""
    with PulsarClient(url) as client:
        return [v for b in client.read_batches(topic) for v in b.column("value").to_pylist()]


def readme_block(tag: str) -> str:
    """The README's ``python <tag>`` code block."""
    text = README.read_text("utf-8")
    found = re.search(rf"^```python {tag}\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    assert found, f"README.md has no ```python {tag} block"
    return found.group(1)


def _as_here(code: str, url: str, names: dict[str, str]) -> str:
    code = code.replace('"pulsar://localhost:6650"', repr(url))
    for written, here in names.items():
        code = code.replace(f'"{written}"', repr(here))
    return code


def run_quick_start(spark: SparkSession, url: str, base: str, workdir: Path) -> None:
    """Run the batch and stream blocks on ``url`` with topics named ``<base>-orders`` and
    paths under ``workdir``, checking what they did: the batch block writes three orders and
    reads them back; the stream block (a stream read, which every Spark 4 has, into parquet)
    lands each order once, and a second run from its checkpoint lands only the new ones.
    ``spark``, the running session, is the one the block's ``getOrCreate()`` gets. The
    exactly-once block needs a broker with transactions: the docs tests run it."""
    names = {
        "quickstart-orders": f"{base}-orders",
        "lake/quickstart-orders": str(workdir / "lake" / "orders"),
        "checkpoints/quickstart-orders": str(workdir / "checkpoints" / "orders"),
    }
    scope: dict[str, Any] = {}
    exec(_as_here(readme_block("quick-start"), url, names), scope)
    counts = sorted(
        (bytes(r.key), r["count"]) for r in scope["df"].groupBy("key").count().collect()
    )
    assert counts == [(b"alice", 2), (b"bob", 1)]

    streaming = _as_here(readme_block("quick-start-stream"), url, names)
    exec(streaming, scope)
    assert scope["query"].exception() is None
    landed = spark.read.parquet(names["lake/quickstart-orders"])
    assert sorted((r.customer, r.amount) for r in landed.collect()) == [
        ("alice", "12.50"), ("alice", "7.00"), ("bob", "3.99"),
    ]  # fmt: skip
    produce(url, names["quickstart-orders"], [b"1.00"], ["carol"])
    exec(streaming, scope)  # the same query again: from its checkpoint, the new order only
    landed = spark.read.parquet(names["lake/quickstart-orders"])
    assert sorted(r.customer for r in landed.collect()) == ["alice", "alice", "bob", "carol"]
