"""What the peers' scenarios share (Spark's Kafka suites, StreamNative's pulsar-spark suites,
translated to Pulsar): a restartable stream query collecting what it reads, and message
production with integer payloads.

A :class:`Stream` is one query ``pulsar -> foreachBatch`` on one checkpoint. Each micro-batch's
rows are kept by batch id, so a micro-batch replayed after a restart replaces itself: what
:meth:`Stream.values` returns is what an exactly-once sink would hold (Spark's ``CheckAnswer``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from tests.support.official import produce

#: The trigger of a running query: micro-batches back to back.
FAST = {"processingTime": "0 seconds"}


def send(url: str, topic: str, values: Iterable[object], **options: Any) -> list[str]:
    """Produce ``values`` (as text) to ``topic``; their message ids, in order."""
    return produce(url, topic, [str(v) for v in values], **options)


class Stream:
    """``spark.readStream.format("pulsar")`` with ``options``, then ``transform`` (by default
    the value as text), into ``foreachBatch`` from a checkpoint of its own (restartable)."""

    def __init__(
        self,
        spark: SparkSession,
        root: Path,
        url: str,
        transform: Callable[[DataFrame], DataFrame] | None = None,
        **options: str,
    ) -> None:
        self.spark, self.url, self.options = spark, url, options
        self.transform = transform or (lambda df: df.selectExpr("CAST(value AS STRING) value"))
        self.checkpoint = root / "checkpoint"
        self.batches: dict[int, list[tuple[Any, ...]]] = {}
        self.query: StreamingQuery | None = None
        #: Called with each micro-batch's frame and id before its rows are collected.
        self.before: Callable[[DataFrame, int], None] | None = None

    def frame(self) -> DataFrame:
        reader = self.spark.readStream.format("pulsar").option("service.url", self.url)
        return self.transform(reader.options(**self.options).load())

    def _sink(self, frame: DataFrame, batch_id: int) -> None:
        if self.before is not None:
            self.before(frame, batch_id)
        self.batches[batch_id] = [tuple(r) for r in frame.collect()]

    def start(self, **trigger: Any) -> StreamingQuery:
        assert self.query is None or not self.query.isActive, "already running"
        self.query = (
            self.frame()
            .writeStream.foreachBatch(self._sink)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**(trigger or FAST))
            .start()
        )
        return self.query

    def process(self) -> Stream:
        """Wait until the running query has read all there is (raises what failed it)."""
        assert self.query is not None
        self.query.processAllAvailable()
        return self

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            failure = self.query.exception()
            if failure is not None:
                raise failure

    def run(self, **trigger: Any) -> StreamingQuery:
        """Run a query that ends by itself (``availableNow=True`` unless told ``once=True``)
        to its end; raise what failed it."""
        query = self.start(**(trigger or {"availableNow": True}))
        query.awaitTermination(120)
        assert not query.isActive, "the query did not end in time"
        failure = query.exception()
        if failure is not None:
            raise failure
        return query

    def rows(self) -> list[tuple[Any, ...]]:
        return [row for _, rows in sorted(self.batches.items()) for row in rows]

    def values(self) -> list[Any]:
        return [row[0] for row in self.rows()]

    def ints(self) -> list[int]:
        """The values as integers, sorted (Spark's ``CheckAnswer``: a multiset)."""
        return sorted(int(v) for v in self.values())

    def batch_sizes(self) -> list[int]:
        """The rows of each non-empty micro-batch, in batch order."""
        return [len(rows) for _, rows in sorted(self.batches.items()) if rows]

    def progress_rows(self) -> int:
        """``numInputRows`` summed over the progress of the current (or last) run."""
        assert self.query is not None
        return sum(p.numInputRows for p in self.query.recentProgress)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` every 0.1 s; ``AssertionError`` naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.1)


def plus_one(df: DataFrame) -> DataFrame:
    """The value (an integer as text) plus one, as Spark's Kafka suites map their streams."""
    return df.selectExpr("CAST(CAST(value AS STRING) AS INT) + 1 AS value")


def as_int(df: DataFrame) -> DataFrame:
    """The value (an integer as text) as an integer."""
    return df.selectExpr("CAST(CAST(value AS STRING) AS INT) AS value")


def send_to_partitions(url: str, topic: str, values: dict[int, Iterable[object]]) -> dict:
    """Produce each partition's values to it (Apache Pulsar: ``<topic>-partition-<k>``);
    their message ids by partition."""
    return {k: send(url, f"{topic}-partition-{k}", v) for k, v in values.items()}


def error_text(failure: BaseException) -> str:
    """A failure's message with its causes' (Spark wraps the source's error)."""
    parts, seen = [], set()
    current: BaseException | None = failure
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts.append(str(current))
        current = current.__cause__ or current.__context__
    return "\n".join(parts)
