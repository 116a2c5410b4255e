"""The producer under faults the broker and the link cause (issue 14): lost receipts on a
live connection, the send timeout per message (and none), SEND_ERROR handled per
producer, and the first creation retried (the window bounded by bytes: test_links.py).

Faults come from the fault proxy's frame hook (tests/support/fault_proxy.py): it can
swallow one SEND_RECEIPT, turn one into a SEND_ERROR, or answer a PRODUCER with an
ERROR the way a broker does during an unload.
"""

from __future__ import annotations

import logging
import sys
import threading
import time

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.errors import OperationTimeout
from pulsar_spark.client.write.producer import Producer
from pulsar_spark.protocol import Frame, encode_command, pb
from pulsar_spark.protocol.errors import ServerError
from tests.support.faults import unload_storm

T = pb.BaseCommand


def _values(url: str, topic: str) -> list[bytes]:
    with PulsarClient(url) as client:
        return [v for b in client.read_batches(topic) for v in b.column("value").to_pylist()]


def _swallow_receipts(*sequence_ids: int):
    """A frame hook that swallows the first SEND_RECEIPT of each of ``sequence_ids``."""
    left = set(sequence_ids)
    swallowed: list[int] = []

    def hook(frame: Frame, raw: bytes) -> bytes:
        if frame.command.type == T.SEND_RECEIPT:
            seq = frame.command.send_receipt.sequence_id
            if seq in left:
                left.discard(seq)
                swallowed.append(seq)
                return b""
        return raw

    hook.swallowed = swallowed  # type: ignore[attr-defined]
    return hook


# -- lost receipts on a live connection ------------------------------------------------


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_lost_receipt_is_detected_and_the_message_sent_again(
    pulsar_lite, fault_proxy, topic_name, caplog
) -> None:
    # Receipts come in order: the one for 4 while 3 waits shows 3's was lost. The
    # producer is re-created on the same connection and 3 goes again; without broker
    # deduplication it is stored twice (and a warning says so), never lost.
    hook = _swallow_receipts(3)
    proxy = fault_proxy(pulsar_lite, frame_hook=hook)
    sent = [b"m%d" % i for i in range(10)]
    with (
        caplog.at_level(logging.WARNING, logger="pulsar_spark.client.write.producer"),
        PulsarClient(proxy.service_url) as client,
    ):
        producer = client.create_producer(topic_name, batching=False, send_timeout=60)
        for value in sent:
            producer.send(value)
        started = time.monotonic()
        producer.flush(timeout=30)
        assert time.monotonic() - started < 15  # not the send timeout
        producer.close()
    assert hook.swallowed == [3]
    warned = [w for w in _warnings(caplog) if "no receipt for sequence ids 3 " in w]
    assert len(warned) == 1, _warnings(caplog)
    assert topic_name in warned[0] and "sending them again" in warned[0]
    assert "may be stored twice" in warned[0]
    assert proxy.connections_accepted == 1  # the connection stayed
    values = _values(pulsar_lite.service_url, topic_name)
    assert list(dict.fromkeys(values)) == sent
    assert values.count(b"m3") == 2 and len(values) == 11


def test_a_lost_receipt_with_deduplication_is_stored_once(
    apache_pulsar_dedup, fault_proxy, topic_name
) -> None:
    hook = _swallow_receipts(3, 7)
    proxy = fault_proxy(apache_pulsar_dedup.service_url, frame_hook=hook)
    sent = [b"m%d" % i for i in range(12)]
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(
            topic_name, producer_name="lost-receipt", batching=False, send_timeout=0
        )
        for value in sent:
            producer.send(value)
        producer.flush(timeout=60)
        producer.close()
    assert sorted(hook.swallowed) == [3, 7]
    assert proxy.connections_accepted == 1
    assert _values(apache_pulsar_dedup.service_url, topic_name) == sent


def _flush_within(producer: Producer, seconds: float) -> float:
    """flush() with no timeout, as the Spark sink calls it, in a thread given
    ``seconds``: the time it took (the test fails, and the thread is left, past it)."""
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            producer.flush()
        except BaseException as exc:  # reported below
            errors.append(exc)

    started = time.monotonic()
    flusher = threading.Thread(target=flush, daemon=True)
    flusher.start()
    flusher.join(seconds)
    assert not flusher.is_alive(), f"flush() still waiting after {seconds:g} s"
    assert not errors, errors
    return time.monotonic() - started


@pytest.mark.parametrize("broker_kind", ["apache_pulsar_dedup", "pulsar_lite"])
def test_a_lost_last_receipt_without_send_timeout_is_sent_again(
    broker_kind, request, fault_proxy, topic_name, caplog
) -> None:
    # sendTimeout 0, as Pulsar's deduplication guide recommends, and the receipt of the
    # last message lost: no later receipt reveals it, and flush() used to wait for ever
    # (the Spark sink's does). Once it is overdue (the operation timeout, 3 s here, with
    # nothing moving on the connection) the producer is re-created and the message
    # sent again: stored once with deduplication, at least once without.
    broker = request.getfixturevalue(broker_kind)
    hook = _swallow_receipts(4)
    proxy = fault_proxy(broker.service_url, frame_hook=hook)
    sent = [b"m%d" % i for i in range(5)]
    with (
        caplog.at_level(logging.WARNING, logger="pulsar_spark.client"),
        PulsarClient(proxy.service_url, operation_timeout=3) as client,
    ):
        producer = client.create_producer(
            topic_name, producer_name=f"lost-last-{broker_kind}", batching=False, send_timeout=0
        )
        for value in sent:
            producer.send(value)
        elapsed = _flush_within(producer, 30)
        producer.close()
    print(f"\nlast receipt lost ({broker_kind}): flush() returned in {elapsed:.1f} s")
    assert hook.swallowed == [4]
    assert 2.5 <= elapsed < 20  # the operation timeout, then a resend
    assert proxy.connections_accepted == 1  # the producer alone was re-created
    warned = [w for w in _warnings(caplog) if "no receipt for sequence ids 4 " in w]
    assert len(warned) == 1, _warnings(caplog)
    values = _values(broker.service_url, topic_name)
    if broker_kind == "apache_pulsar_dedup":
        assert values == sent
    else:
        assert list(dict.fromkeys(values)) == sent and values.count(b"m4") <= 2


# -- the send timeout, per message -------------------------------------------------------


def test_a_message_without_receipt_fails_after_the_send_timeout_naming_it(
    pulsar_lite, fault_proxy, topic_name
) -> None:
    # The last receipt lost: no later one reveals it. The send timeout counts per
    # message from its sealing, without waiting for a flush.
    proxy = fault_proxy(pulsar_lite, frame_hook=_swallow_receipts(2))
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(topic_name, batching=False, send_timeout=2)
        for i in range(3):
            producer.send(b"%d" % i)
        time.sleep(4)
        with pytest.raises(OperationTimeout) as caught:
            producer.send(b"later")
        text = str(caught.value)
        assert topic_name in text and "sequence ids 2 to 2" in text, text
        assert "send timeout of 2 s" in text, text
        assert caught.value.retriable
        with pytest.raises(OperationTimeout):
            producer.flush(timeout=5)


def test_send_timeout_zero_means_no_limit(pulsar_lite, fault_proxy, topic_name) -> None:
    # sendTimeout(0), as Pulsar's deduplication guide recommends: a message may wait
    # as long as it takes; flush(timeout) still bounds one wait without failing it.
    proxy = fault_proxy(pulsar_lite, frame_hook=_swallow_receipts(4))
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(topic_name, batching=False, send_timeout=0)
        for i in range(5):
            producer.send(b"%d" % i)
        time.sleep(1.5)
        with pytest.raises(OperationTimeout, match="1 messages unconfirmed after 1 s"):
            producer.flush(timeout=1)
        assert producer._pending_messages == 1  # still waiting, not failed
        producer.send(b"5")  # its receipt reveals the lost one: 4 goes again
        producer.flush(timeout=30)
        producer.close()
    values = _values(pulsar_lite.service_url, topic_name)
    assert list(dict.fromkeys(values)) == [b"%d" % i for i in range(6)]


def test_a_negative_send_timeout_is_refused(pulsar_lite, topic_name) -> None:
    with (
        PulsarClient(pulsar_lite.service_url) as client,
        pytest.raises(ValueError, match="send_timeout must be 0"),
    ):
        client.create_producer(topic_name, send_timeout=-1)


# -- SEND_ERROR, per producer ----------------------------------------------------------


def _send_error_once(code: int, message: str):
    done = [False]

    def hook(frame: Frame, raw: bytes) -> bytes:
        if frame.command.type != T.SEND_RECEIPT or done[0]:
            return raw
        done[0] = True
        receipt = frame.command.send_receipt
        error = pb.CommandSendError(
            producer_id=receipt.producer_id,
            sequence_id=receipt.sequence_id,
            error=code,
            message=message,
        )
        return encode_command(pb.BaseCommand(type=T.SEND_ERROR, send_error=error))

    return hook


def test_a_transient_send_error_leaves_a_reader_on_the_connection_alone(
    broker, fault_proxy, topic_name
) -> None:
    other = f"{topic_name}-read"
    with PulsarClient(broker.service_url) as client, client.create_producer(other) as p:
        for i in range(300):
            p.send(b"r%d" % i)
    proxy = fault_proxy(
        broker.service_url, frame_hook=_send_error_once(pb.PersistenceError, "bookie failed")
    )
    got: list[bytes] = []
    with PulsarClient(proxy.service_url) as client:
        batches = client.read_batches(other, batch_rows=50, receiver_queue_size=50)
        got.extend(next(batches).column("value").to_pylist())  # the reader is attached
        with client.create_producer(topic_name, batching=False) as producer:
            for i in range(20):
                producer.send(b"w%d" % i)
        for batch in batches:
            got.extend(batch.column("value").to_pylist())
    assert got == [b"r%d" % i for i in range(300)]
    assert proxy.connections_accepted == 1 and proxy.drops == 0  # nobody reconnected
    written = _values(broker.service_url, topic_name)
    assert list(dict.fromkeys(written)) == [b"w%d" % i for i in range(20)]


# -- the first creation, retried -----------------------------------------------------------


def _refuse_first_producer(code: int, message: str):
    """A hook that answers the first PRODUCER_SUCCESS with ERROR ``code`` instead."""
    done = [False]

    def hook(frame: Frame, raw: bytes) -> bytes:
        if frame.command.type != T.PRODUCER_SUCCESS or done[0]:
            return raw
        done[0] = True
        error = pb.CommandError(
            request_id=frame.command.producer_success.request_id, error=code, message=message
        )
        return encode_command(pb.BaseCommand(type=T.ERROR, error=error))

    return hook


def test_service_not_ready_while_unloading_is_retried(pulsar_lite, fault_proxy, topic_name) -> None:
    hook = _refuse_first_producer(pb.ServiceNotReady, "Namespace bundle is being unloaded")
    proxy = fault_proxy(pulsar_lite, frame_hook=hook)
    with PulsarClient(proxy.service_url) as client, client.create_producer(topic_name) as p:
        p.send(b"after the unload")
    assert _values(pulsar_lite.service_url, topic_name) == [b"after the unload"]


def test_a_producer_name_held_by_a_lost_executor_is_retried(
    apache_pulsar, fault_proxy, topic_name
) -> None:
    # A stream sink's fixed name: the lost executor's connection still holds it until
    # the broker drops that connection. Creating under the name waits for it.
    # (pulsar-lite does not refuse a second producer of the same name.)
    broker = apache_pulsar
    proxy = fault_proxy(broker.service_url)
    lost = PulsarClient(proxy.service_url)
    held = lost.create_producer(topic_name, producer_name="sink-0-0")
    held.send(b"from the lost executor")
    held.flush()

    def executor_lost() -> None:
        held._closed = True  # a dead executor re-creates nothing
        proxy.drop_all()  # and the broker finds its connection dead

    timer = threading.Timer(2.0, executor_lost)
    timer.start()
    try:
        with PulsarClient(broker.service_url) as client:
            started = time.monotonic()
            with client.create_producer(topic_name, producer_name="sink-0-0") as producer:
                waited = time.monotonic() - started
                producer.send(b"from the new executor")
    finally:
        timer.cancel()
        lost.close()
    assert waited >= 1.5
    values = _values(broker.service_url, topic_name)
    assert values == [b"from the lost executor", b"from the new executor"]


def test_a_busy_name_that_stays_busy_fails_within_the_operation_timeout(
    apache_pulsar, topic_name
) -> None:
    with (
        PulsarClient(apache_pulsar.service_url, operation_timeout=3) as client,
        client.create_producer(topic_name, producer_name="taken"),
    ):
        started = time.monotonic()
        with pytest.raises(ServerError, match=r"(?i)busy") as caught:
            client.create_producer(topic_name, producer_name="taken")
        elapsed = time.monotonic() - started
    assert 1 <= elapsed < 3 + 2
    if sys.version_info >= (3, 11):
        assert "attempts in 3 s" in " ".join(caught.value.__notes__)


def test_a_refused_connection_during_a_restart_is_retried(
    pulsar_lite, fault_proxy, topic_name
) -> None:
    # The broker restarting: connects are refused for two seconds. Producer() itself
    # retries (client.create_producer first asks for the partitions: see found.md).
    from pulsar_spark.client.names import parse_topic

    proxy = fault_proxy(pulsar_lite)
    with PulsarClient(proxy.service_url) as client:
        proxy.pause(refuse=True)
        timer = threading.Timer(2.0, proxy.resume)
        timer.start()
        started = time.monotonic()
        with Producer(client._lookup, parse_topic(topic_name)) as producer:
            waited = time.monotonic() - started
            producer.send(b"after the restart")
        timer.join()
    assert waited >= 1.5
    assert _values(pulsar_lite.service_url, topic_name) == [b"after the restart"]


def test_create_producer_during_a_broker_restart(fresh_pulsar_lite, topic_name) -> None:
    # The broker is started from this thread: setpriv --pdeathsig kills a broker whose
    # starting thread ends, so the creation waits in a thread of its own instead.
    broker = fresh_pulsar_lite()
    outcome: list[object] = []

    def create(client: PulsarClient) -> None:
        started = time.monotonic()
        try:
            with client.create_producer(topic_name) as producer:
                outcome.append(time.monotonic() - started)
                producer.send(b"after")
        except Exception as exc:  # reported below
            outcome.append(exc)

    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name) as producer:
            producer.send(b"before")
        broker.stop()
        creating = threading.Thread(target=create, args=(client,))
        creating.start()
        time.sleep(2)
        broker.start()
        creating.join(60)
    assert len(outcome) == 1 and isinstance(outcome[0], float), outcome
    assert outcome[0] >= 1.5
    assert _values(broker.service_url, topic_name) == [b"before", b"after"]


def test_producers_created_under_an_unload_storm(apache_pulsar, topic_name) -> None:
    # Unloads every 0.1 s, each once a producer was made since the last one, while
    # producers are created one after the other (at least 10, until 8 unloads landed): a
    # creation meets ServiceNotReady ("is being unloaded"), a lookup answered by a broker
    # losing the topic, or a closed producer; each retries. (An unload waits for a
    # creation that held on: a storm that never lets one finish would prove nothing.)
    admin = apache_pulsar.admin
    url = apache_pulsar.service_url
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        producer.send(b"first")
    created = 0
    storm = unload_storm(admin, topic_name, lambda: created, at_least=8, interval=0.1)
    with storm, PulsarClient(url, operation_timeout=20) as client:
        while created < 10 or storm.landed < storm.at_least:
            storm.check()  # an unload refused again and again ends the run
            with client.create_producer(topic_name, batching=False) as producer:
                producer.send(b"p%d" % created)
            created += 1
    print(f"\n{created} producers created under {storm.landed} unloads")
    values = _values(url, topic_name)
    assert list(dict.fromkeys(values)) == [b"first"] + [b"p%d" % i for i in range(created)]


def test_the_spark_option_send_timeout_ms_takes_zero() -> None:
    from pulsar_spark.spark.errors import PulsarOptionError
    from pulsar_spark.spark.options.parse import parse_options

    base = {"service.url": "pulsar://localhost:6650", "topic": "t"}
    assert parse_options({**base, "sendTimeoutMs": "0"}).send_timeout == 0.0
    assert parse_options(base).send_timeout == 30.0
    with pytest.raises(PulsarOptionError, match=r"expected 0 \(no limit\) or a positive"):
        parse_options({**base, "sendTimeoutMs": "-5"})
