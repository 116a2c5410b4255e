"""The stream reader's data-loss checks on Apache Pulsar 4.0, driven the way Spark drives
it (latestOffset, partitions, read, commit) without a Spark session: a ledger removed
by truncation with nothing after the stream's position lost (no error), with messages
lost (DataLossError, or a warning with failOnDataLoss=false), a topic deleted under
the stream (empty, or created again), a partitioned topic deleted from a pattern.
"""

from __future__ import annotations

import logging
import time

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.protocol import MessageId
from pulsar_spark.spark.errors import DataLossError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.read_schema import ReadSchema
from pulsar_spark.spark.spark_types import spark_schema
from pulsar_spark.spark.stream.offsets import EARLIEST, parse_offsets
from pulsar_spark.spark.stream.reader import PulsarStreamReader
from tests.support.admin import topic_path
from tests.support.faults import unload
from tests.support.figures import figure


def _stream(url: str, **options: str) -> PulsarStreamReader:
    parsed = parse_options({"service.url": url, "startingOffsets": "earliest", **options})
    read = ReadSchema(None, "raw", None, dead_letter=False, arrow=ROW_SCHEMA)
    return PulsarStreamReader(parsed.for_stream_read(), read, spark_schema(ROW_SCHEMA))


def _latest(reader: PulsarStreamReader, start: dict[str, str]) -> dict[str, str]:
    """latestOffset, as Spark asks it (all available)."""
    return reader._latest_offset(parse_offsets(start), None)


def _batch(reader: PulsarStreamReader, start: dict[str, str], end: dict[str, str]) -> list[bytes]:
    """Plan and read one micro-batch: its values."""
    values = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            values.extend(batch.column("value").to_pylist())
    return values


def _fill(url: str, topic: str, values: list[str]) -> None:
    with PulsarClient(url) as client, client.create_producer(topic, batching=False) as producer:
        for value in values:
            producer.send(value.encode())
        producer.flush()


def _ledgers(admin, topic: str) -> list[int]:
    return [ledger["ledgerId"] for ledger in admin.internal_stats(topic)["ledgers"]]


def _truncate(admin, topic: str) -> None:
    admin.request("DELETE", f"{topic_path(topic)}/truncate")


def _first_ledger_removed(apache_pulsar, topic_name, first: list[str], second: list[str]):
    """A stream that read ``first`` (one ledger, closed by an unload); ``second`` in a new
    ledger; the first ledger truncated away. Returns (reader, offsets read to)."""
    admin, url = apache_pulsar.admin, apache_pulsar.service_url
    _fill(url, topic_name, first)
    reader = _stream(url, topic=topic_name)
    start = reader.initialOffset()
    end = _latest(reader, start)
    assert _batch(reader, start, end) == [v.encode() for v in first]
    reader.commit(end)
    unload(admin, topic_name)  # the ledger is closed; the next message opens another
    _fill(url, topic_name, second)
    return reader, end


def test_a_removed_ledger_with_nothing_after_the_position_is_no_loss(
    apache_pulsar, topic_name, record_property
) -> None:
    started = time.monotonic()
    admin = apache_pulsar.admin
    first, second = [f"a-{i}" for i in range(10)], [f"b-{i}" for i in range(10)]
    reader, end1 = _first_ledger_removed(apache_pulsar, topic_name, first, second)
    try:
        end2 = _latest(reader, end1)
        parts = reader.partitions(end1, end2)  # planned while the first ledger is there
        old = MessageId.parse(end1[topic_name].split(":", 1)[1]).ledger
        _truncate(admin, topic_name)
        assert old not in _ledgers(admin, topic_name)
        values = [
            v
            for part in parts
            for batch in reader.read(part)
            for v in batch.column("value").to_pylist()
        ]
    finally:
        reader.stop()
    figure(
        record_property,
        "stream_loss_ledger_removed_before_position",
        expected=len(second),
        read=len(values),
        duplicated=len(values) - len(set(values)),
        data_loss_error=False,
        seconds=round(time.monotonic() - started, 1),
    )
    assert values == [v.encode() for v in second]  # no DataLossError, nothing twice


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "warn"])
def test_a_removed_ledger_with_messages_after_the_position_is_loss(
    apache_pulsar, topic_name, fail, caplog, record_property
) -> None:
    started = time.monotonic()
    name = f"stream_loss_ledger_removed_after_position_{'fail' if fail else 'warn'}"
    admin, url = apache_pulsar.admin, apache_pulsar.service_url
    _fill(url, topic_name, [f"a-{i}" for i in range(10)])
    reader = _stream(url, topic=topic_name, failOnDataLoss=str(fail).lower())
    try:
        reader.initialOffset()
        last = reader.client.get_last_message_id(topic_name)
        assert last is not None
        end1 = {topic_name: f"after:{last.ledger}:4:-1:-1"}  # half of the ledger read
        unload(admin, topic_name)
        _fill(url, topic_name, [f"b-{i}" for i in range(10)])
        end2 = _latest(reader, end1)
        parts = reader.partitions(end1, end2)
        _truncate(admin, topic_name)  # a-5 .. a-9 go
        if fail:
            with pytest.raises(DataLossError, match=r"after:\d+:4:-1:-1.*failOnDataLoss"):
                _ = [b for part in parts for b in reader.read(part)]
            seconds = round(time.monotonic() - started, 1)
            figure(record_property, name, lost=5, data_loss_error=True, seconds=seconds)
            return
        with caplog.at_level(logging.WARNING):
            values = [
                v
                for part in parts
                for batch in reader.read(part)
                for v in batch.column("value").to_pylist()
            ]
    finally:
        reader.stop()
    warned = sum("may be lost" in r.getMessage() for r in caplog.records)
    figure(
        record_property,
        name,
        lost=5,
        read_after=len(values),
        warnings=warned,
        data_loss_error=False,
        seconds=round(time.monotonic() - started, 1),
    )
    assert values == [f"b-{i}".encode() for i in range(10)]
    assert warned == 1


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "warn"])
def test_a_topic_deleted_under_the_stream_is_loss(
    apache_pulsar, topic_name, fail, record_property
) -> None:
    started = time.monotonic()
    name = f"stream_loss_topic_deleted_{'fail' if fail else 'warn'}"
    admin, url = apache_pulsar.admin, apache_pulsar.service_url
    _fill(url, topic_name, [f"a-{i}" for i in range(10)])
    reader = _stream(url, topic=topic_name, failOnDataLoss=str(fail).lower())
    try:
        start = reader.initialOffset()
        end1 = _latest(reader, start)
        assert len(_batch(reader, start, end1)) == 10
        admin.delete(topic_name, force=True)
        if fail:
            with pytest.raises(DataLossError, match="deleted"):
                _latest(reader, end1)
            seconds = round(time.monotonic() - started, 1)
            figure(record_property, name, data_loss_error=True, seconds=seconds)
            return
        end2 = _latest(reader, end1)  # the topic is empty now (created again)
        assert parse_offsets(end2) == {topic_name: EARLIEST}
        _fill(url, topic_name, ["c-0", "c-1"])
        end3 = _latest(reader, end2)
        after = _batch(reader, end2, end3)
        seconds = round(time.monotonic() - started, 1)
        figure(record_property, name, data_loss_error=False, new_read=len(after), seconds=seconds)
        assert after == [b"c-0", b"c-1"]  # from its new start
    finally:
        reader.stop()


def test_a_partitioned_topic_deleted_from_a_pattern_is_loss(
    apache_pulsar, topic_name, record_property
) -> None:
    started = time.monotonic()
    admin, url = apache_pulsar.admin, apache_pulsar.service_url
    admin.create_partitioned_topic(topic_name, 2)
    _fill(url, topic_name, [f"a-{i}" for i in range(10)])
    pattern = topic_name.rsplit("/", 1)[0] + "/" + topic_name.rsplit("/", 1)[1] + ".*"
    reader = _stream(url, topicsPattern=pattern)
    try:
        start = reader.initialOffset()
        end1 = _latest(reader, start)
        assert len(parse_offsets(end1)) == 2
        assert len(_batch(reader, start, end1)) == 10
        admin.delete_partitioned_topic(topic_name, force=True)
        with pytest.raises(DataLossError, match="partition is gone"):
            _latest(reader, end1)
    finally:
        reader.stop()
    figure(
        record_property,
        "stream_loss_pattern_partitioned_topic_deleted",
        partitions=2,
        data_loss_error=True,
        seconds=round(time.monotonic() - started, 1),
    )
