"""What the peers' scenarios share (Spark's Kafka suites, StreamNative's pulsar-spark suites,
translated to Pulsar): a restartable stream query collecting what it reads, and message
production with integer payloads; the scenarios more than one of them plays (at the end).

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

    def restart(self) -> Stream:
        """Stop the query, start it again from its checkpoint and wait until it has read all
        there is."""
        self.stop()
        self.start()
        return self.process()

    def send_while_stopped(self, topic: str, values: Iterable[object]) -> Stream:
        """Stop the query, send ``values`` to ``topic``, start it again from its checkpoint and
        wait until it has read all there is."""
        self.stop()
        send(self.url, topic, values)
        self.start()
        return self.process()

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


#: The ``streams`` fixture: ``streams(url, transform=None, **options) -> Stream``.
Streams = Callable[..., Stream]


def check(stream: Stream, expected: Iterable[int]) -> None:
    """The stream's values, as integers, are ``expected`` (a multiset: Spark's ``CheckAnswer``)."""
    assert stream.ints() == sorted(expected), stream.rows()


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


# -- scenarios more than one test plays --------------------------------------------------------


def start_between(streams: Streams, url: str, topic: str, /, **options: str) -> Stream:
    """-1 sent to ``topic``; a stream of the values plus one (:func:`plus_one`) with
    ``options`` started and its start resolved; then 1, 2 and 3 sent. The stream, running,
    once it has read them (from latest, the default: 2, 3 and 4, not -1)."""
    send(url, topic, [-1])
    stream = streams(url, plus_one, **options)
    stream.start()
    stream.process()  # the start is resolved: -1 is before it
    send(url, topic, [1, 2, 3])
    return stream.process()


def pattern_with_a_topic_replaced(
    streams: Streams,
    url: str,
    topic_name: str,
    create: Callable[[str], object],
    delete: Callable[[str], object],
) -> None:
    """Spark's 'subscribing topic by pattern with topic deletions' (StreamNative's too): a
    stream on ``<topic_name>-.*`` with ``failOnDataLoss`` false reads 2, 3 and 4 of
    ``<topic_name>-seems`` (made by ``create``; :func:`start_between`); that topic deleted
    (``delete``), ``<topic_name>-bad`` made and 4, 5 and 6 sent to it, the stream reads them
    too."""
    seems, bad = f"{topic_name}-seems", f"{topic_name}-bad"
    create(seems)
    stream = start_between(
        streams, url, seems, topicsPattern=f"{topic_name}-.*", failOnDataLoss="false"
    )
    check(stream, [2, 3, 4])
    delete(seems)
    create(bad)
    send(url, bad, [4, 5, 6])
    stream.process()
    check(stream, range(2, 8))
    stream.stop()


def from_latest_across_restarts(
    streams: Streams, url: str, topic: str, /, **options: str
) -> Stream:
    """Spark's 'subscribing ... from latest offsets' opening (StreamNative's 'assign from latest
    offsets' too): :func:`start_between` reads 2, 3 and 4; a restart finds them again, once;
    then 4, 5 and 6 are sent while the query is stopped. The stream, started again, once it has
    read all there is."""
    stream = start_between(streams, url, topic, startingOffsets="latest", **options)
    check(stream, [2, 3, 4])
    stream.restart()
    check(stream, [2, 3, 4])  # the data back on recovery, once
    return stream.send_while_stopped(topic, [4, 5, 6])


def first_micro_batch(streams: Streams, url: str, /, **options: str) -> Stream:
    """A stream of the values as integers from the earliest message on, with ``options``,
    started with a trigger every 100 ms; once its first micro-batch is in."""
    stream = streams(url, as_int, startingOffsets="earliest", **options)
    stream.start(processingTime="100 milliseconds")
    wait_until(lambda: len(stream.batch_sizes()) == 1, 120, "the first micro-batch")
    return stream


def byte_budget(streams: Streams, url: str, max_bytes: int, /, **options: str) -> Stream:
    """A stream of the values as integers from the earliest message on, at most ``max_bytes``
    of payload a micro-batch (``maxBytesPerTrigger``), with ``options``."""
    return streams(
        url, as_int, startingOffsets="earliest", maxBytesPerTrigger=str(max_bytes), **options
    )


def pattern_from_the_fourth(streams: Streams, url: str, topic_name: str) -> tuple[Stream, str]:
    """StreamNative's 'subscribing topic by pattern from specific offsets': -20, -21, -22, 1, 2,
    3, 10, 11 and 12 sent to ``<topic_name>-suffix``; a stream of the values as integers on the
    pattern ``<topic_name>-.*`` from the fourth message on (its id in the ``startingOffsets``
    JSON), ``failOnDataLoss`` true. The stream, not started, and the topic."""
    topic = f"{topic_name}-suffix"
    ids = send(url, topic, [-20, -21, -22, 1, 2, 3, 10, 11, 12])
    stream = streams(
        url,
        as_int,
        topicsPattern=f"{topic_name}-.*",
        startingOffsets=f'{{"{topic}": "{ids[3]}"}}',
        failOnDataLoss="true",
    )
    return stream, topic


def self_join(df: DataFrame) -> DataFrame:
    """The values (integers as text) joined with themselves on their remainder by 5: rows
    ``(key, value, value)``."""
    values = df.selectExpr(
        "CAST(CAST(value AS STRING) AS INT) AS value",
        "CAST(CAST(value AS STRING) AS INT) % 5 AS key",
    )
    return values.join(values, "key")


def check_self_join(streams: Streams, url: str, topic: str) -> Stream:
    """Spark's (and StreamNative's) 'ensure stream-stream self-join generates only one offset in
    log and correct metrics': a stream of :func:`self_join` on ``topic`` from latest; 1 and 2
    sent, then 6 and 3: Kafka's answer after each, and 4 input rows in the progress (the scan
    runs once: exchange reuse, Spark's default). The stream, running."""
    stream = streams(url, self_join, topic=topic)
    stream.start()
    stream.process()
    send(url, topic, [1, 2])
    stream.process()
    assert sorted(stream.rows()) == [(1, 1, 1), (2, 2, 2)], stream.rows()
    send(url, topic, [6, 3])
    stream.process()
    assert sorted(stream.rows()) == sorted(
        [(1, 1, 1), (2, 2, 2), (3, 3, 3), (1, 6, 1), (1, 1, 6), (1, 6, 6)]
    ), stream.rows()
    rows = stream.progress_rows()
    assert rows == 4, rows
    return stream
