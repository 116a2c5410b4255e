"""The Java consumer's chunked-message options are real options here: the expiry of
incomplete chunked messages, how many may be put together, and dropping the oldest
instead of failing, in their Java spellings (``pulsar.reader.*``, ``pulsar.consumer.*``
and bare), reaching the client each reading task uses (its pooled client's key too).

A chunked message begun in a task's range whose other chunks never come is data loss:
with ``failOnDataLoss`` (the default) the task fails with ``DataLossError`` naming the
topic, the message's uuid, its first chunk and the range; with ``failOnDataLoss=false`` a
WARNING says what was skipped and the other rows are read; with
``autoAckOldestChunkedMessageOnQueueFull=true`` it is dropped with a WARNING. Batch and
stream reads alike, driven as Spark drives them (in this process, so that the reader's
``CHUNK_WAIT`` can be made short on its class).
"""

from __future__ import annotations

import logging

import pytest

from pulsar_spark.client import PartitionReader, PulsarClient
from pulsar_spark.client.names import parse_topic
from pulsar_spark.client.read.chunk_limits import ChunkLimits
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.protocol import MessageId, Position, pb
from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.errors import DataLossError, PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.options.passthrough import lookup
from pulsar_spark.spark.read_schema import ReadSchema
from pulsar_spark.spark.spark_types import spark_schema
from pulsar_spark.spark.worker_clients import client_key
from tests.support.raw_wire import first_chunk_only, send_prepared

URL = "pulsar://127.0.0.1:1"  # nothing connects
NAMES = (
    "expireTimeOfIncompleteChunkedMessageMillis",
    "maxPendingChunkedMessage",
    "autoAckOldestChunkedMessageOnQueueFull",
)


def test_the_defaults_are_a_minute_100_messages_and_failing() -> None:
    options = parse_options({"service.url": URL})
    assert (options.chunk_expiry, options.max_pending_chunked_messages) == (60.0, 100)
    assert options.drop_incomplete_chunks is False
    with open_client(options) as client:
        assert client.config.chunk_limits == ChunkLimits(100, 60.0, False)


@pytest.mark.parametrize("prefix", ["", "pulsar.reader.", "pulsar.consumer.", "PULSAR.READER."])
def test_the_java_spellings_reach_the_readers_of_the_client(prefix: str, caplog) -> None:
    values = ("2500", "7", "true")
    given = {"service.url": URL} | {prefix + n: v for n, v in zip(NAMES, values, strict=True)}
    with caplog.at_level(logging.WARNING):
        options = parse_options(given)
    assert not [r for r in caplog.records if "no effect" in r.getMessage()]
    with open_client(options) as client:
        assert client.config.chunk_limits == ChunkLimits(7, 2.5, True)
        reader = PartitionReader(client._lookup, parse_topic("t"))
        assert reader._chunks.limits == ChunkLimits(7, 2.5, True)
        assert reader._chunks._drop is True
    assert all(lookup("pulsar.reader." + n) is None for n in NAMES)  # no "ignored" rows left


def test_zero_is_no_age_bound_and_bad_values_name_the_option() -> None:
    options = parse_options({"service.url": URL, NAMES[0]: "0"})
    with open_client(options) as client:
        assert client.config.chunk_limits.expiry == 0
    for name, bad in ((NAMES[0], "-5"), (NAMES[1], "0"), (NAMES[2], "yes")):
        with pytest.raises(PulsarOptionError, match=name):
            parse_options({"service.url": URL, "pulsar.reader." + name: bad})


def test_pooled_clients_are_kept_apart_by_their_chunk_limits() -> None:
    plain = parse_options({"service.url": URL})
    keys = {client_key(plain, None)}
    for name, value in zip(NAMES, ("1000", "5", "true"), strict=True):
        keys.add(client_key(parse_options({"service.url": URL, name: value}), None))
    assert len(keys) == 4


# -- a chunked message begun in a task's range, never completed: data loss ---------------

RAW = ReadSchema(None, "raw", None, dead_letter=False, arrow=ROW_SCHEMA)


@pytest.fixture
def orphan_at_the_end(broker, topic_name, monkeypatch: pytest.MonkeyPatch) -> MessageId:
    """p0, p1, then the first chunk of "orphan" (1 of 3; the producer stopped) as the
    topic's last entry; readers wait 0.5 s for chunks. Its first chunk's id."""
    monkeypatch.setattr(PartitionReader, "CHUNK_WAIT", 0.5)
    entries = [(pb.MessageMetadata(), b"p0"), (pb.MessageMetadata(), b"p1")]
    send_prepared(
        broker.service_url, topic_name, [*entries, first_chunk_only("orphan")], encrypted=False
    )
    with PulsarClient(broker.service_url) as client:
        last = client.get_last_message_id(topic_name)
    assert last is not None
    return MessageId(last.ledger, last.entry, -1, -1)


def _batch_read(url: str, topic: str, **options: str) -> list[bytes]:
    """A batch read as Spark runs it: planned, then each task's rows (their values)."""
    from pulsar_spark.spark.reader import PulsarBatchReader

    parsed = parse_options({"service.url": url, "topic": topic, **options})
    reader = PulsarBatchReader(parsed, RAW, spark_schema(ROW_SCHEMA))
    return [
        value
        for part in reader.partitions()
        for batch in reader.read(part)
        for value in batch.column("value").to_pylist()
    ]


def _stream_read(url: str, topic: str, end: MessageId, **options: str) -> list[bytes]:
    """One micro-batch of a stream, from the earliest message to ``end``, as Spark reads it."""
    from pulsar_spark.spark.stream.reader import PulsarStreamPartition, PulsarStreamReader

    parsed = parse_options({"service.url": url, "topic": topic, **options}).for_stream_read()
    reader = PulsarStreamReader(parsed, RAW, spark_schema(ROW_SCHEMA))
    part = PulsarStreamPartition(topic=topic, start=Position.earliest(), end=Position.after(end))
    return [v for batch in reader.read(part) for v in batch.column("value").to_pylist()]


@pytest.mark.parametrize("read", ["batch", "stream"])
def test_a_message_never_completed_fails_the_task_with_data_loss(
    broker, topic_name, orphan_at_the_end, read: str
) -> None:
    with pytest.raises(DataLossError) as err:
        if read == "batch":
            _batch_read(broker.service_url, topic_name)
        else:
            _stream_read(broker.service_url, topic_name, orphan_at_the_end)
    text = str(err.value)
    assert text.startswith(f"{topic_name}: reading {topic_name}[earliest, after:")
    assert f"chunked message 'orphan' (first chunk {orphan_at_the_end})" in text
    assert "never completed: no further chunk came for" in text
    assert "Set failOnDataLoss=false" in text


@pytest.mark.parametrize("read", ["batch", "stream"])
def test_without_fail_on_data_loss_it_is_skipped_with_a_warning(
    broker, topic_name, orphan_at_the_end, read: str, caplog
) -> None:
    with caplog.at_level(logging.WARNING, logger="pulsar_spark.spark.ranges"):
        if read == "batch":
            values = _batch_read(broker.service_url, topic_name, failOnDataLoss="false")
        else:
            values = _stream_read(
                broker.service_url, topic_name, orphan_at_the_end, failOnDataLoss="false"
            )
    assert values == [b"p0", b"p1"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert f"chunked message 'orphan' (first chunk {orphan_at_the_end})" in warnings[0]
    assert warnings[0].endswith("skipped, reading on (failOnDataLoss=false)")


def test_dropping_chosen_drops_it_with_a_warning_whatever_fail_on_data_loss(
    broker, topic_name, orphan_at_the_end, caplog
) -> None:
    with caplog.at_level(logging.WARNING):
        values = _batch_read(
            broker.service_url, topic_name, autoAckOldestChunkedMessageOnQueueFull="true"
        )
    assert values == [b"p0", b"p1"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        f"dropping chunked message 'orphan' (first chunk {orphan_at_the_end})" in w
        for w in warnings
    ), warnings
    assert not [w for w in warnings if "failOnDataLoss" in w]
