"""The README's quick start, run as written: :func:`run_quick_start`.

The README's ``python quick-start`` block (session, batch read, batch write) and
``python quick-start-stream`` block (a stream from one topic into another, Spark 4.1+) run
with ``exec``, with only the broker's URL, the topic names and the checkpoint directory
replaced. The main run does it on its own Spark (``tests/spark/test_readme_quick_start.py``),
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
    """Run both blocks on ``url`` with topics named ``<base>-orders`` and so on, checking
    what they did; on Spark 4.0 the stream block must fail with the error that names 4.1
    (the README says it needs 4.1). ``spark``, the running session, is the one the block's
    ``getOrCreate()`` gets."""
    from pulsar_spark.spark.compat import spark_version

    names = {
        "orders": f"{base}-orders",
        "orders-copy": f"{base}-orders-copy",
        "orders-mirror": f"{base}-orders-mirror",
        "/tmp/orders-mirror": str(workdir / "orders-mirror"),
    }
    produce(url, names["orders"], [b"o%d" % i for i in range(12)], [f"c{i % 3}" for i in range(12)])
    scope: dict[str, Any] = {}
    exec(_as_here(readme_block("quick-start"), url, names), scope)
    counts = sorted(tuple(r) for r in scope["df"].groupBy("key").count().collect())
    assert counts == [(b"c0", 4), (b"c1", 4), (b"c2", 4)]
    assert sorted(read_values(url, names["orders-copy"])) == sorted(b"o%d" % i for i in range(12))

    streaming = _as_here(readme_block("quick-start-stream"), url, names)
    if spark_version() < (4, 1):
        try:
            exec(streaming, scope)
            scope["query"].processAllAvailable()
        except Exception as failure:  # what Spark raises: the connector's message inside
            assert re.search(r"streaming writes to Pulsar.*needs Spark 4\.1", str(failure)), failure
            return
        msg = "the quick start's stream ran on Spark 4.0, which the README says it needs 4.1 for"
        raise AssertionError(msg)
    exec(streaming, scope)
    query = scope["query"]
    try:
        query.processAllAvailable()  # the start ("latest") is fixed: now write after it
        produce(url, names["orders"], [b"late%d" % i for i in range(5)])
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    mirrored = sorted(read_values(url, names["orders-mirror"]))
    assert mirrored == sorted(b"late%d" % i for i in range(5))
