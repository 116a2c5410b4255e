"""The exactly-once sinks' bookkeeping after a commit (issue 26): moving a registry or
commit-log subscription forward, and recording that a batch job is done, happen after
the rows are committed. A broker failure there is logged and never fails the commit (a
Spark job reported failed whose rows are all visible invites a rerun that writes them
twice); the next commit or job does the bookkeeping again."""

from __future__ import annotations

import logging

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol import pb
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.spark.stream.commit_log import CommitLog, Record
from pulsar_spark.spark.txn_registry import Registry
from tests.support.net import free_port


def test_registry_bookkeeping_on_an_unreachable_broker_is_logged_not_raised(caplog) -> None:
    registry = Registry("persistent://public/default/__pulsar_spark_txns")
    url = f"pulsar://127.0.0.1:{free_port()}"  # nothing listens there
    with (
        PulsarClient(url, connect_timeout=1, operation_timeout=1) as client,
        caplog.at_level(logging.WARNING, logger="pulsar_spark.spark.txn_registry"),
    ):
        registry.moved(client, "job-1", MessageId(3, 4))
        registry.finish(client, "job-1", "committed")
    messages = [r.getMessage() for r in caplog.records]
    assert any("moving subscription" in m and "next commit moves it" in m for m in messages)
    assert any("job job-1 committed, but recording it" in m for m in messages)
    assert any("deleting job-1's subscription" in m for m in messages)


def test_a_committed_jobs_bookkeeping_under_its_hold_never_raises(
    pulsar_lite, fault_proxy, topic_name, caplog
) -> None:
    # The driver holds the job's registry subscription; the broker then goes silent.
    # Recording the job done, deleting the subscription through the hold and the hold's
    # release all fail, and are logged: the job, whose rows are committed, succeeds.
    silent = {"on": False}
    proxy = fault_proxy(pulsar_lite, frame_hook=lambda frame, raw: b"" if silent["on"] else raw)
    registry = Registry(f"{topic_name}-txns")
    with PulsarClient(proxy.service_url, operation_timeout=1) as client:
        hold = registry.lock(client, "job-2")
        assert hold.held
        silent["on"] = True
        with caplog.at_level(logging.INFO, logger="pulsar_spark.spark.txn_registry"), hold:
            registry.finish(client, "job-2", "committed", hold)
    assert not hold.held
    messages = [r.getMessage() for r in caplog.records]
    assert any("job job-2 committed, but recording it" in m for m in messages)
    assert any("deleting job-2's subscription" in m for m in messages)


def test_a_commit_log_record_stands_when_moving_the_log_forward_fails(
    pulsar_lite, fault_proxy, topic_name, caplog
) -> None:
    # The second record's receipt comes through, then the proxy swallows every frame
    # from the broker after the producer's close is answered: the acknowledgement that
    # lets retention take the first record gets no answer.
    seen = {"receipts": 0, "closed": False}

    def hook(frame, raw: bytes) -> bytes:
        kind = frame.command.type
        if seen["closed"]:
            return b""
        if kind == pb.BaseCommand.SEND_RECEIPT:
            seen["receipts"] += 1
        elif kind == pb.BaseCommand.SUCCESS and seen["receipts"] == 2:
            seen["closed"] = True  # the second producer's close: the last frame through
        return raw

    proxy = fault_proxy(pulsar_lite, frame_hook=hook)
    topic = f"{topic_name}-log"
    first, second = Record("q", 0, ("1:2",)), Record("q", 1, ("1:3",))
    with PulsarClient(proxy.service_url, operation_timeout=2) as client:
        log = CommitLog(client, topic)
        log.append(first, None)
        found = log.last()
        assert found is not None
        with caplog.at_level(logging.WARNING, logger="pulsar_spark.spark.txn_registry"):
            log.append(second, found[0])  # returns: the record is written
    assert seen["closed"]
    assert any("moving subscription" in r.getMessage() for r in caplog.records)
    with PulsarClient(pulsar_lite.service_url) as client:
        last = CommitLog(client, topic).last()
    assert last is not None and last[1] == second
