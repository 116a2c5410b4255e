"""Three jobs as StreamNative's README writes them (release-3.4.1.3, "Read data from Pulsar"
and "Write data to Pulsar"), run with their option and column names.

What a job needs beyond its own lines, and why:

- ``rowLayout=streamnative`` on the read: the default layout names the columns ``key``,
  ``topic``, ``messageId``...; this option gives StreamNative's ``__key``, ``__topic``,
  ``__messageId``... so the job's ``selectExpr`` lines run as they are.
- ``.mode("append")`` on a batch ``save()``: Spark gives Python data sources no
  ``ErrorIfExists`` mode (``UNSUPPORTED_DATA_SOURCE_SAVE_MODE``), before the connector is asked.
- ``checkpointLocation`` on a stream: Spark asks it of every sink but the console's.

The message ids in the offsets JSON are the bytes StreamNative's ``JsonUtils.topicOffsets``
writes (Java's ``MessageId.toByteArray()``, the official client's ``serialize()``), inclusive at
both ends as there.
"""

from __future__ import annotations

import base64
import json
import secrets
from pathlib import Path
from typing import Any

import pytest

from pulsar_spark.spark.compat import spark_version
from tests.support.official import official_client, read_all

pulsar: Any = pytest.importorskip("pulsar")


def _signed(raw: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in raw]


def _names() -> tuple[str, str]:
    suffix = secrets.token_hex(4)
    return (
        f"persistent://public/default/sn-job-1-{suffix}",
        f"persistent://public/default/sn-job-2-{suffix}",
    )


def _produce(url: str, topic: str, pairs: list[tuple[str, str]]) -> list[Any]:
    """Send ``(key, value)`` string pairs one message each; their ids, in order."""
    with official_client(url) as client:
        producer = client.create_producer(topic, batching_enabled=False)
        ids = [producer.send(value.encode(), partition_key=key) for key, value in pairs]
        producer.close()
    return ids


def test_a_batch_read_between_explicit_offsets_of_two_topics(spark, pulsar_lite) -> None:
    """StreamNative README: "Subscribe to multiple topics, specifying explicit Pulsar
    offsets" (``topicOffsets(Map(topic -> messageId))`` for both ends) and the
    ``selectExpr("CAST(__key AS STRING)", "CAST(value AS STRING)")`` that follows it."""
    url = pulsar_lite.service_url
    topic1, topic2 = _names()
    ids1 = _produce(url, topic1, [(f"k{i}", f"one-{i}") for i in range(6)])
    ids2 = _produce(url, topic2, [(f"k{i}", f"two-{i}") for i in range(6)])
    starting = {topic1: _signed(ids1[1].serialize()), topic2: _signed(ids2[2].serialize())}
    ending = {topic1: _signed(ids1[4].serialize()), topic2: _signed(ids2[3].serialize())}

    df = (
        spark.read.format("pulsar")
        .option("service.url", url)
        .option("topics", f"{topic1},{topic2}")
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("rowLayout", "streamnative")
        .load()
    )
    rows = df.selectExpr("CAST(__key AS STRING)", "CAST(value AS STRING)").collect()

    got = sorted((r[0], r[1]) for r in rows)
    want = [(f"k{i}", f"one-{i}") for i in range(1, 5)] + [(f"k{i}", f"two-{i}") for i in (2, 3)]
    assert got == sorted(want)


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_stream_of_keys_and_values_into_a_topic_named_by_the_option(
    spark, pulsar_lite, tmp_path: Path
) -> None:
    """StreamNative README: a stream subscribed to one topic ("Create a Pulsar source for
    streaming queries"), then "Write key-value data from a DataFrame to a specific Pulsar
    topic specified in an option"."""
    url = pulsar_lite.service_url
    source, target = _names()
    pairs = [(f"c{i % 3}", f"order-{i}") for i in range(20)]
    _produce(url, source, pairs)

    df = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("rowLayout", "streamnative")
        .load()
    )
    query = (
        df.selectExpr("CAST(__key AS STRING)", "CAST(value AS STRING)")
        .writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()

    # ``__key`` goes out as key bytes (base64 on the wire, flagged), as StreamNative's
    # ``keyBytes(...)`` sends it: a Java consumer's getKeyBytes() gives the string's bytes.
    got = sorted(
        (base64.b64decode(m["key"]).decode(), m["value"].decode())
        for m in read_all(url, target, at_least=20)
    )
    assert got == sorted(pairs)


def test_a_batch_write_routed_by_the_topic_column_then_read_with_metadata(
    spark, pulsar_lite
) -> None:
    """StreamNative README: "Write key-value data from a DataFrame to Pulsar using a topic
    specified in the data" (``selectExpr("__topic", "CAST(__key AS STRING)", "CAST(value AS
    STRING)")``, no topic option), then a read that filters on ``__topic`` and
    ``__messageProperties`` and orders by ``__publishTime``, as their source suite's jobs do."""
    url = pulsar_lite.service_url
    topic1, topic2 = _names()
    rows = [(topic1 if i % 2 else topic2, i % 4, f"v{i}") for i in range(12)]
    df = spark.createDataFrame(rows, "__topic string, __key int, value string")

    (
        df.selectExpr("__topic", "CAST(__key AS STRING)", "CAST(value AS STRING)")
        .write.format("pulsar")
        .option("service.url", url)
        .mode("append")  # Spark's Python sources have no ErrorIfExists mode (module docstring)
        .save()
    )

    read = (
        spark.read.format("pulsar")
        .option("service.url", url)
        .option("topics", f"{topic1},{topic2}")
        .option("rowLayout", "streamnative")
        .load()
    )
    assert read.columns[-6:] == [
        "__key",
        "__topic",
        "__messageId",
        "__publishTime",
        "__eventTime",
        "__messageProperties",
    ]
    ones = (
        read.where(f"__topic = '{topic1}' AND size(__messageProperties) = 0")
        .orderBy("__publishTime", "__messageId")
        .selectExpr("CAST(__key AS STRING) AS k", "CAST(value AS STRING) AS v")
        .collect()
    )
    assert sorted((r.k, r.v) for r in ones) == sorted(
        (str(i % 4), f"v{i}") for i in range(12) if i % 2
    )
    assert read.where(f"__topic = '{topic2}'").count() == 6
