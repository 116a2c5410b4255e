"""Behaviours only the real broker has: chunking, broker entry metadata, deduplication,
unload, terminate and partition growth, against Apache Pulsar 4.0 (tests/support/apache.py).

Our client (:class:`PulsarClient`) on one side, the official client (``tests/support/official.py``
helpers) or the admin REST API (``tests/support/admin.py``) on the other.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import threading
import time
from collections.abc import Callable

import pytest

from pulsar_spark.client import PartitionReader, PulsarClient
from pulsar_spark.client.names import parse_topic
from pulsar_spark.client.net.connection import Connection
from pulsar_spark.client.net.dispatch import IdKind
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.protocol import commands, pb
from pulsar_spark.protocol.entry import open_entry
from pulsar_spark.protocol.entry_messages import messages
from pulsar_spark.protocol.framing import Frame, encode_command
from tests.support.admin import AdminError
from tests.support.fault_proxy import FrameHook
from tests.support.faults import try_to_land, unload, unload_storm
from tests.support.official import official_client, produce, read_all

T = pb.BaseCommand
MIB = 1024 * 1024


def _rows(client: PulsarClient, topic: str, **kwargs) -> list[dict]:
    rows = []
    for batch in client.read_batches(topic, **kwargs):
        assert batch.schema == ROW_SCHEMA
        rows.extend(batch.to_pylist())
    return rows


def _big(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def _values(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(n)]


# -- chunking ----------------------------------------------------------------------


def test_official_chunked_messages_are_read_whole(apache_pulsar, topic_name) -> None:
    # Above the broker's 5 MiB maxMessageSize: the official producer must chunk.
    big = _big(6 * MIB + 12345, 1)
    sent = [b"before", big, b"between", _big(11 * MIB, 2), b"after"]
    produce(apache_pulsar.service_url, topic_name, sent, batching=False, chunking_enabled=True)
    stats = apache_pulsar.admin.internal_stats(topic_name)
    assert stats["numberOfEntries"] >= len(sent) + 3  # 2 + 3 chunks at least
    with PulsarClient(apache_pulsar.service_url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == sent
    assert len({r["messageId"] for r in rows}) == len(sent)


def test_our_chunked_messages_are_read_whole_by_the_official_client(
    apache_pulsar, topic_name
) -> None:
    big = _big(6 * MIB + 777, 3)
    with PulsarClient(apache_pulsar.service_url) as client:
        with client.create_producer(topic_name, batching=False) as producer:
            producer.send(b"before")
            producer.send(big, key="big", properties={"size": str(len(big))})
            producer.send(b"after")
        ours = _rows(client, topic_name)
    assert apache_pulsar.admin.internal_stats(topic_name)["numberOfEntries"] >= 4
    got = read_all(apache_pulsar.service_url, topic_name, at_least=3)
    assert [g["value"] for g in got] == [b"before", big, b"after"]
    assert got[1]["key"] == "big"
    assert got[1]["properties"] == {"size": str(len(big))}
    assert [r["value"] for r in ours] == [b"before", big, b"after"]


# -- broker entry metadata -----------------------------------------------------------


def _raw_frames(service_url: str, topic: str, count: int, timeout: float = 20.0) -> list[Frame]:
    """The first ``count`` MESSAGE frames of ``topic``, from a bare consumer on our
    connection (so the test sees exactly what the broker sent)."""
    host, port = service_url.removeprefix("pulsar://").split(":")
    frames: list[Frame] = []
    got = threading.Condition()

    class Inbox:
        def frame_received(self, frame: Frame) -> None:
            with got:
                if frame.command.type == T.MESSAGE:
                    frames.append(frame)
                got.notify_all()

        def connection_closed(self, error: Exception) -> None:
            pass

    with Connection.open(host, int(port)) as conn:
        key = conn.new_key(IdKind.CONSUMER)
        conn.add_handler(key, Inbox())
        subscribe = commands.subscribe(
            conn.new_id(IdKind.REQUEST),
            key.ident,
            topic=topic,
            subscription=f"raw-{secrets.token_hex(4)}",
            durable=False,
            earliest=True,
        )
        conn.request(subscribe)
        conn.send_command(commands.flow(key.ident, 10_000))
        deadline = time.monotonic() + timeout
        with got:
            while len(frames) < count:
                left = deadline - time.monotonic()
                assert left > 0, f"only {len(frames)} of {count} entries came from {topic}"
                got.wait(left)
    return frames


def test_broker_entry_metadata_gives_broker_time_and_index(apache_pulsar_dedup, topic_name) -> None:
    url = apache_pulsar_dedup.service_url
    before = int(time.time() * 1000)
    # 3 batches of 10, then 5 single messages: indexes count messages, not entries.
    produce(
        url, topic_name, _values(30), batching_max_messages=10, batching_max_publish_delay_ms=1000
    )
    produce(url, topic_name, _values(5, "single"), batching=False)
    after = int(time.time() * 1000)
    frames = _raw_frames(url, topic_name, 8)
    msgs = []
    for frame in frames:
        assert frame.broker_entry_metadata is not None, "no broker entry metadata on the wire"
        assert before <= frame.broker_publish_time <= after + 1000
        mid = frame.command.message.message_id
        entry = open_entry(
            mid.ledgerId,
            mid.entryId,
            -1,
            frame.metadata,
            frame.payload,
            broker_entry_metadata=frame.broker_entry_metadata,
        )
        msgs.extend(messages(entry))
    total = len(msgs)
    assert total == 35
    assert [m.broker_index for m in msgs] == list(range(total))
    assert all(before <= (m.broker_publish_time or 0) <= after + 1000 for m in msgs)
    # Our Arrow reader reads such frames unharmed.
    with PulsarClient(url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == _values(30) + _values(5, "single")


def test_arrow_rows_carry_broker_publish_time_and_index(apache_pulsar_dedup, topic_name) -> None:
    url = apache_pulsar_dedup.service_url
    before = int(time.time() * 1000)
    produce(
        url, topic_name, _values(20), batching_max_messages=7, batching_max_publish_delay_ms=1000
    )
    produce(url, topic_name, _values(3, "single"), batching=False)
    after = int(time.time() * 1000)
    with PulsarClient(url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == _values(20) + _values(3, "single")
    assert [r["index"] for r in rows] == list(range(23))
    for r in rows:
        broker_ms = int(r["brokerPublishTime"].timestamp() * 1000)
        assert before <= broker_ms <= after + 1000
        assert broker_ms >= int(r["publishTime"].timestamp() * 1000)  # producer time first


def test_without_entry_metadata_the_broker_columns_are_null(apache_pulsar, topic_name) -> None:
    produce(apache_pulsar.service_url, topic_name, _values(3))
    with PulsarClient(apache_pulsar.service_url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == _values(3)
    assert {r["brokerPublishTime"] for r in rows} == {None}
    assert {r["index"] for r in rows} == {None}


# -- deduplication -------------------------------------------------------------------


def _official_sends(url: str, topic: str, name: str, items: list[tuple[int, bytes]]) -> list[str]:
    """Send ``(sequence_id, value)`` pairs with an official producer named ``name``."""
    from tests.support.official import message_id_str

    ids = []
    with official_client(url) as client:
        producer = client.create_producer(topic, producer_name=name, batching_enabled=False)
        try:
            for seq, value in items:
                ids.append(message_id_str(producer.send(value, sequence_id=seq)))
        finally:
            producer.close()
    return ids


def test_replayed_sends_of_a_producer_name_are_dropped(apache_pulsar_dedup, topic_name) -> None:
    url = apache_pulsar_dedup.service_url
    name = f"replayer-{secrets.token_hex(4)}"
    # (The official Python client ignores sequence_id=0: `if sequence_id:`. A new producer
    # name starts at 0 anyway.)
    _official_sends(url, topic_name, name, [(0, b"a"), (1, b"b"), (2, b"c")])
    assert apache_pulsar_dedup.admin.get_deduplication(topic_name) is True
    # The same producer name again, replaying sequence ids 1 and 2, then a new one.
    _official_sends(url, topic_name, name, [(1, b"b-again"), (2, b"c-again"), (3, b"d")])
    with PulsarClient(url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == [b"a", b"b", b"c", b"d"]
    assert [r["sequenceId"] for r in rows] == [0, 1, 2, 3]
    assert {r["producerName"] for r in rows} == {name}


def test_our_producer_name_and_sequence_ids_deduplicate(apache_pulsar_dedup, topic_name) -> None:
    url = apache_pulsar_dedup.service_url
    name = f"ours-{secrets.token_hex(4)}"
    with PulsarClient(url) as client:
        with client.create_producer(topic_name, producer_name=name, batching=False) as producer:
            for value in _values(3):
                producer.send(value)
        # Someone replays our sequence ids under our name: the broker drops them. (Not
        # 0: the official Python client would take sequence_id=0 for "unset".)
        _official_sends(url, topic_name, name, [(1, b"y"), (2, b"z")])
        # A new producer of ours under the same name continues after the last id.
        with client.create_producer(topic_name, producer_name=name, batching=True) as producer:
            for value in _values(2, "next"):
                producer.send(value)
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == _values(3) + _values(2, "next")
    assert [r["sequenceId"] for r in rows] == [0, 1, 2, 3, 4]


# -- unload --------------------------------------------------------------------------


def test_unload_in_the_middle_of_a_read_loses_and_repeats_nothing(
    apache_pulsar, topic_name
) -> None:
    sent = _values(3000)
    # Small batches: Apache's dispatcher first assumes one message per entry, so a FLOW of
    # 20 permits brings 20 entries; with big batches the reader would hold the rest of the
    # topic in memory before the unloads and finish without needing to reconnect.
    produce(apache_pulsar.service_url, topic_name, sent, batching_max_messages=5)
    admin = apache_pulsar.admin
    with PulsarClient(apache_pulsar.service_url) as client:
        reader = PartitionReader(
            client._lookup, parse_topic(topic_name), receiver_queue_size=20, batch_rows=100
        )
        got: list[bytes] = []
        ids: list[str] = []
        unloads = 0
        for batch in reader:
            got.extend(batch.column("value").to_pylist())
            ids.extend(batch.column("messageId").to_pylist())
            if unloads < 3 and len(got) >= 500 * (unloads + 1):
                unload(admin, topic_name)  # tried again while refused
                unloads += 1
    assert reader.reconnects >= 3
    assert len(ids) == len(set(ids))
    assert got == sent


def _wait_attached(admin, topic: str, producer, timeout: float = 20.0) -> None:
    """Until the broker lists ``producer`` on ``topic`` and its reconnect is over."""

    def attached() -> bool:
        names = [p.get("producerName") for p in admin.stats(topic)["publishers"]]
        return producer.name in names and not producer._reconnecting

    admin.wait_until(attached, timeout, f"producer {producer.name} attached to {topic}")


@pytest.mark.parametrize("which", ["plain", "dedup"])
def test_unload_in_the_middle_of_a_write_loses_and_repeats_nothing(
    request, topic_name, which: str
) -> None:
    broker = request.getfixturevalue("apache_pulsar" if which == "plain" else "apache_pulsar_dedup")
    admin = broker.admin
    sent = _values(3000)
    name = f"writer-{secrets.token_hex(4)}"
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(
            topic_name, producer_name=name, batch_max_messages=20, batch_max_delay=0.005
        ) as producer:
            for i, value in enumerate(sent):
                producer.send(value)
                if i in (500, 1500, 2500):
                    # Batches are in flight, unconfirmed: the broker closes the producer,
                    # ours re-creates it and sends them again with the same sequence ids.
                    unload(admin, topic_name)
                    # Let it re-attach before the next unload (an unload during the
                    # reconnect: see test_a_close_during_the_reconnect_is_not_lost).
                    _wait_attached(admin, topic_name, producer)
            producer.flush()
            epochs = producer._epoch
        rows = _rows(client, topic_name)
    assert epochs >= 3  # the producer was re-created after each unload
    values = [r["value"] for r in rows]
    if which == "dedup":
        # Resent batches carry their sequence ids: the broker drops what it has.
        assert len(values) == len(set(values)), f"{len(values) - len(set(values))} duplicates"
        assert values == sent
        assert [r["sequenceId"] for r in rows] == list(range(len(sent)))
    else:
        # Without deduplication the broker may have stored batches whose receipts it never
        # sent (it closed the producer first; seen: no receipt for the old producer after
        # CLOSE_PRODUCER): at least once. Nothing is lost and the order holds.
        assert list(dict.fromkeys(values)) == sent
        assert len(values) - len(sent) <= 2000


def _close_before_success_hook(admin, topic: str):
    """A fault-proxy hook that replays what Apache Pulsar does when a topic is unloaded
    while a producer is being re-created on it (seen in the broker log: "Disconnecting
    producer ... producerId=1" a millisecond before "Created new producer ... producerId=1").

    On the second PRODUCER_SUCCESS of the connection (the re-created producer, id 1) it
    unloads the topic, so the broker really closes that producer, and delivers the
    broker's CLOSE_PRODUCER for it *before* the PRODUCER_SUCCESS instead of after. An
    unload the broker refuses is tried again; ``hook.failure`` says why it did not land.
    """
    state = {"successes": 0, "swallow": False}

    def hook(frame: Frame, raw: bytes) -> bytes:
        kind = frame.command.type
        if kind == T.PRODUCER_SUCCESS and frame.command.producer_success.producer_ready:
            state["successes"] += 1
            if state["successes"] == 2:
                # The broker closes producer 1 and says so (swallowed below). A few tries
                # only: the producer's creation waits for this frame meanwhile.
                error = try_to_land(lambda: admin.unload(topic), tries=5)
                if error is not None:
                    why = f"the unload during the reconnect did not land after 5 tries: {error}"
                    hook.failure = why  # type: ignore[attr-defined]
                    return raw
                state["swallow"] = True
                close = pb.CommandCloseProducer(producer_id=1, request_id=2**63 - 1)
                return encode_command(T(type=T.CLOSE_PRODUCER, close_producer=close)) + raw
        if (
            kind == T.CLOSE_PRODUCER
            and state["swallow"]
            and frame.command.close_producer.producer_id == 1
        ):
            state["swallow"] = False
            return b""
        return raw

    hook.failure = None  # type: ignore[attr-defined]
    return hook


def test_a_close_during_the_reconnect_is_not_lost(apache_pulsar, fault_proxy, topic_name) -> None:
    admin = apache_pulsar.admin
    hook = _close_before_success_hook(admin, topic_name)
    proxy = fault_proxy(apache_pulsar.service_url, frame_hook=hook)
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(topic_name, batching=False, send_timeout=15)
        try:
            producer.send(b"before")
            producer.flush()
            unload(admin, topic_name)  # producer 0 closed: ours re-creates it (producer 1)
            producer.send(b"after")
            producer.flush()  # waits for "after": hangs when the close was lost
        finally:
            with contextlib.suppress(Exception):
                producer.close()
        rows = _rows(client, topic_name)
    if hook.failure is not None:
        pytest.fail(hook.failure)
    assert [r["value"] for r in rows] == [b"before", b"after"]


def _receipts() -> tuple[FrameHook, Callable[[], int]]:
    """A fault-proxy hook that counts SEND_RECEIPTs, and the count (the writer's progress:
    receipts come back once its producer is attached again)."""
    count = [0]

    def hook(frame: Frame, raw: bytes) -> bytes:
        if frame.command.type == T.SEND_RECEIPT:
            count[0] += 1
        return raw

    return hook, lambda: count[0]


def test_a_write_under_an_unload_storm_is_exactly_once_with_dedup(
    apache_pulsar_dedup, fault_proxy, topic_name
) -> None:
    sent = _values(2000)
    hook, receipts = _receipts()
    proxy = fault_proxy(apache_pulsar_dedup.service_url, frame_hook=hook)
    with PulsarClient(proxy.service_url) as client:
        with client.create_producer(
            topic_name,
            producer_name=f"storm-{secrets.token_hex(4)}",
            batch_max_messages=20,
            batch_max_delay=0.005,
            send_timeout=30,
        ) as producer:
            producer.send(b"first")
            producer.flush()
            # An unload every 0.05 s once 5 more receipts came back (the producer is
            # attached again); the writer waits for the k-th before message 300 k: 5 at
            # least land in the middle of the sends, however slow the machine.
            storm = unload_storm(
                apache_pulsar_dedup.admin,
                topic_name,
                receipts,
                at_least=5,
                every=300,
                step=5,
                interval=0.05,
            )
            with storm:
                for i, value in enumerate(sent):
                    storm.wait_due(i)
                    producer.send(value)
                    time.sleep(0.001)  # spread the sends over the storm
            producer.flush()
        rows = _rows(client, topic_name)
    print(f"\n{storm.landed} unloads under the write")
    assert [r["value"] for r in rows] == [b"first", *sent]


def test_a_read_under_an_unload_storm_loses_and_repeats_nothing(apache_pulsar, topic_name) -> None:
    sent = _values(3000)
    produce(apache_pulsar.service_url, topic_name, sent, batching_max_messages=5)
    with PulsarClient(apache_pulsar.service_url) as client:
        reader = PartitionReader(
            client._lookup, parse_topic(topic_name), receiver_queue_size=20, batch_rows=20
        )
        got: list[bytes] = []
        # An unload every 0.1 s once the reader got 50 rows on (more than it holds: it
        # reconnected), 10 at most; the reader waits for the k-th before going past row
        # 400 k, so 5 at least land in the middle of the read, however slow the machine.
        storm = unload_storm(
            apache_pulsar.admin,
            topic_name,
            lambda: len(got),
            at_least=5,
            at_most=10,
            every=400,
            step=50,
            interval=0.1,
        )
        with storm:
            for batch in reader:
                got.extend(batch.column("value").to_pylist())
                storm.wait_due(len(got))
                time.sleep(0.02)  # a slow consumer: the storm lands in the middle
    print(f"\n{storm.landed} unloads under the read, {reader.reconnects} reconnects")
    assert reader.reconnects >= 3
    assert got == sent


# -- terminate -----------------------------------------------------------------------


def test_terminated_topic_reader_finishes_and_producer_is_refused(
    apache_pulsar, topic_name
) -> None:
    sent = _values(500)
    produce(apache_pulsar.service_url, topic_name, sent, batching_max_messages=25)
    admin = apache_pulsar.admin
    with PulsarClient(apache_pulsar.service_url, operation_timeout=10) as client:
        reader = PartitionReader(
            client._lookup, parse_topic(topic_name), receiver_queue_size=10, batch_rows=50
        )
        got: list[bytes] = []
        last = None
        t0 = time.monotonic()
        for batch in reader:
            got.extend(batch.column("value").to_pylist())
            if last is None:
                last = admin.terminate(topic_name)  # in the middle of the read
        assert time.monotonic() - t0 < 10
        assert got == sent
        assert last is not None and last.count(":") == 1
        # A read of the terminated topic from the start finishes too.
        assert [r["value"] for r in _rows(client, topic_name)] == sent
        # Writing is refused, with the broker's word for it.
        with (
            pytest.raises(Exception, match=r"(?i)terminated"),
            client.create_producer(topic_name) as producer,
        ):
            producer.send(b"too late")
            producer.flush()
    stats = admin.internal_stats(topic_name)
    assert stats["state"] == "Terminated"


# -- partitions grown ------------------------------------------------------------------


def test_partitions_grown_in_the_middle_of_a_run(apache_pulsar, topic_name) -> None:
    admin = apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 2)
    with PulsarClient(apache_pulsar.service_url) as client:
        assert client.get_partitions(topic_name) == [
            f"{topic_name}-partition-{i}" for i in range(2)
        ]
        with client.create_producer(topic_name) as producer:
            for i, value in enumerate(_values(100, "first")):
                producer.send(value, key=f"k{i}")
            producer.flush()
            admin.update_partitions(topic_name, 4)
            assert admin.partitions(topic_name) == 4
            # The producer made for 2 partitions keeps writing to those.
            for i, value in enumerate(_values(50, "old-producer")):
                producer.send(value, key=f"k{i}")
        assert client.get_partitions(topic_name) == [
            f"{topic_name}-partition-{i}" for i in range(4)
        ]
        with client.create_producer(topic_name) as producer:
            for i, value in enumerate(_values(200, "second")):
                producer.send(value, key=f"key-{i}")
        rows = _rows(client, topic_name)
    values = [r["value"] for r in rows]
    assert len(values) == len(set(values))
    assert sorted(values) == sorted(
        _values(100, "first") + _values(50, "old-producer") + _values(200, "second")
    )
    by_partition: dict[int, set[bytes]] = {}
    for r in rows:
        by_partition.setdefault(r["partition"], set()).add(r["value"])
    assert sorted(by_partition) == [0, 1, 2, 3]
    new = by_partition[2] | by_partition[3]
    assert new and all(v.startswith(b"second-") for v in new)
    # The official reader agrees.
    assert len(read_all(apache_pulsar.service_url, topic_name, at_least=350)) == 350


def test_partitions_cannot_shrink_and_the_admin_error_names_url_and_body(
    apache_pulsar, topic_name
) -> None:
    admin = apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 3)
    with pytest.raises(AdminError) as info:
        admin.update_partitions(topic_name, 2)
    err = info.value
    assert err.status is not None and 400 <= err.status < 500
    assert apache_pulsar.http_url in str(err) and "/partitions" in str(err)
    assert err.body


def test_one_connection_reaches_a_standalone_broker(apache_pulsar, topic_name) -> None:
    # Standalone answers lookups with proxy_through_service_url: the broker is the
    # service URL's own host, so no second, proxied connection is opened to it.
    with PulsarClient(apache_pulsar.service_url) as client:
        with client.create_producer(topic_name) as producer:
            producer.send(b"one")
        assert [r["value"] for r in _rows(client, topic_name)] == [b"one"]
        keys = [key for key, conn in client._pool._connections.items() if not conn.closed]
    assert len(keys) == 1, keys
    assert keys[0][2] is None  # not asked to proxy
