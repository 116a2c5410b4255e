"""Messages lost under a running read, on Apache Pulsar 4.0: a topic deleted (force) and
created again by a producer, a topic truncated. The read must say so (the
``missing_start`` callback, which Spark's ``failOnDataLoss`` raises from, or a WARNING),
never end quietly with fewer rows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from pulsar_spark.client import PartitionReader, PulsarClient
from pulsar_spark.client.names import parse_topic
from pulsar_spark.client.read.bounds import FROM_EARLIEST
from pulsar_spark.protocol import MessageId
from tests.support.admin import topic_path
from tests.support.faults import unload
from tests.support.figures import figure


class Lost(Exception):
    """What a test's loss callback raises (Spark raises DataLossError)."""


def _fill(client: PulsarClient, topic: str, n: int, prefix: str) -> None:
    with client.create_producer(topic, batching=False) as producer:
        for i in range(n):
            producer.send(f"{prefix}-{i:04d}".encode())
        producer.flush()


def _reader(client: PulsarClient, topic: str, report) -> PartitionReader:
    return PartitionReader(
        client._lookup,
        parse_topic(topic),
        start=FROM_EARLIEST,
        receiver_queue_size=10,
        batch_rows=10,
        operation_timeout=30,
        missing_start=report,
    )


def _values(batches: Iterator) -> list[bytes]:
    return [v for batch in batches for v in batch.column("value").to_pylist()]


def _loss_figure(record, case: str, got, found, took: float, written: int = 200) -> None:
    """One FIGURE line: rows written and read (None: the read failed, as it should), the
    rows lost, the loss reports, seconds."""
    read = "failed" if got is None else len(got)
    lost = "-" if got is None else written - len(got)
    figure(
        record,
        f"read_loss_{case}",
        written=written,
        read=read,
        lost=lost,
        reported=len(found),
        seconds=round(took, 1),
    )


def _read_with_fault(reader: PartitionReader, fault) -> list[bytes]:
    """Read 30 rows, run ``fault``, read on to the end."""
    batches = iter(reader)
    got = []
    while len(got) < 30:
        got.extend(next(batches).column("value").to_pylist())
    fault()
    got.extend(_values(batches))
    return got


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "warn"])
def test_a_topic_deleted_and_created_again_during_a_read_is_data_loss(
    apache_pulsar, topic_name, fail, record_property
) -> None:
    admin = apache_pulsar.admin
    found: list[tuple[MessageId, MessageId]] = []

    def report(held: MessageId, next_: MessageId) -> None:
        found.append((held, next_))
        if fail:
            msg = f"lost after {held} before {next_}"
            raise Lost(msg)

    with PulsarClient(apache_pulsar.service_url) as client:
        _fill(client, topic_name, 200, "old")

        def delete_and_recreate() -> None:
            admin.delete(topic_name, force=True)
            _fill(client, topic_name, 5, "new")  # created again by producing

        reader = _reader(client, topic_name, report)
        started = time.monotonic()
        got: list[bytes] = []
        if fail:
            with pytest.raises(Lost):
                _read_with_fault(reader, delete_and_recreate)
        else:
            got = _read_with_fault(reader, delete_and_recreate)
            assert 30 <= len(got) < 200
            assert all(v.startswith(b"old-") for v in got)  # the new topic is past the end
    took = time.monotonic() - started
    _loss_figure(
        record_property,
        f"deleted_and_recreated_{'fail' if fail else 'warn'}",
        got if not fail else None,
        found,
        took,
    )
    assert len(found) == 1
    held, next_ = found[0]
    assert held.entry >= 29  # at least the 30 rows read were held
    assert (next_.ledger, next_.entry) > (held.ledger, held.entry)


def test_a_topic_deleted_and_left_empty_during_a_read_is_data_loss(
    apache_pulsar, topic_name, record_property
) -> None:
    found: list[tuple[MessageId, MessageId]] = []
    with PulsarClient(apache_pulsar.service_url) as client:
        _fill(client, topic_name, 200, "old")
        reader = _reader(client, topic_name, lambda h, n: found.append((h, n)))
        started = time.monotonic()
        got = _read_with_fault(reader, lambda: apache_pulsar.admin.delete(topic_name, force=True))
    _loss_figure(record_property, "deleted_left_empty", got, found, time.monotonic() - started)
    assert 30 <= len(got) < 200
    assert len(found) == 1


def test_a_loss_without_a_callback_is_a_warning(
    apache_pulsar, topic_name, caplog, record_property
) -> None:
    with PulsarClient(apache_pulsar.service_url) as client:
        _fill(client, topic_name, 200, "old")
        reader = _reader(client, topic_name, None)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="pulsar_spark.client.read.gaps"):
            got = _read_with_fault(
                reader, lambda: apache_pulsar.admin.delete(topic_name, force=True)
            )
    assert len(got) < 200
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    gone = [w for w in warnings if "are gone" in w]
    figure(
        record_property,
        "read_loss_deleted_no_callback",
        written=200,
        read=len(got),
        lost=200 - len(got),
        warnings=len(gone),
        seconds=round(time.monotonic() - started, 1),
    )
    assert any(topic_name in w and "are gone" in w for w in warnings), warnings


def test_a_topic_truncated_during_a_read_is_data_loss(
    apache_pulsar, topic_name, record_property
) -> None:
    # Truncation deletes the ledgers behind the current one and moves cursors to the
    # end: the read's ledger goes, the read is told.
    admin = apache_pulsar.admin
    found: list[tuple[MessageId, MessageId]] = []
    with PulsarClient(apache_pulsar.service_url) as client:
        _fill(client, topic_name, 200, "old")
        unload(admin, topic_name)  # the 200 messages' ledger is closed: truncation takes it

        def truncate_and_write() -> None:
            admin.request("DELETE", f"{topic_path(topic_name)}/truncate")
            unload(admin, topic_name)  # the reader re-subscribes after the truncation
            _fill(client, topic_name, 5, "new")

        reader = _reader(client, topic_name, lambda h, n: found.append((h, n)))
        started = time.monotonic()
        got = _read_with_fault(reader, truncate_and_write)
    _loss_figure(record_property, "truncated", got, found, time.monotonic() - started)
    assert 30 <= len(got) < 200
    assert len(found) == 1, found


def test_no_loss_no_report_across_unloads(apache_pulsar, topic_name, record_property) -> None:
    # Ledgers closed by unloads (new ledgers, nothing removed) are not a loss.
    admin = apache_pulsar.admin
    found: list[tuple[MessageId, MessageId]] = []
    with PulsarClient(apache_pulsar.service_url) as client:
        for part in range(3):
            _fill(client, topic_name, 60, f"p{part}")
            unload(admin, topic_name)
        reader = _reader(client, topic_name, lambda h, n: found.append((h, n)))
        started = time.monotonic()
        got = _read_with_fault(reader, lambda: unload(admin, topic_name))
    _loss_figure(record_property, "unloads_no_loss", got, found, time.monotonic() - started, 180)
    assert len(got) == 180
    assert found == []
