"""The connection and the reader against pulsar-lite, with the official client as peer."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import time

import pyarrow as pa
import pytest

from pulsar_spark.client import (
    ClientError,
    ConnectError,
    ConnectionClosed,
    InvalidServiceUrl,
    OperationTimeout,
    PulsarClient,
)
from pulsar_spark.client.net.connection import Connection
from pulsar_spark.client.net.dispatch import IdKind
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.protocol import MessageId, Position, commands, pb
from tests.support.official import CODECS, produce
from tests.support.official import mixed_messages as _messages

T = pb.BaseCommand


def _rows(client: PulsarClient, topic: str, **kwargs) -> list[dict]:
    rows = []
    for batch in client.read_batches(topic, **kwargs):
        assert batch.schema == ROW_SCHEMA
        rows.extend(batch.to_pylist())
    return rows


def _partition_request(conn: Connection, topic: str) -> pb.CommandPartitionedTopicMetadataResponse:
    frame = conn.request(commands.partitioned_metadata(conn.new_id(IdKind.REQUEST), topic))
    return frame.command.partitionMetadataResponse


# -- connection ------------------------------------------------------------------


def test_handshake_and_request_matching_under_concurrency(broker, topic_name) -> None:
    host, port = broker.instance.host, broker.instance.port
    with Connection.open(host, port) as conn:
        assert conn.server_version
        if broker.kind == "lite":
            assert conn.max_message_size is None  # pulsar-lite quirk: CONNECTED has none
        else:
            assert conn.max_message_size == 5 * 1024 * 1024
        answers: dict[int, int] = {}

        def ask(i: int) -> None:
            response = _partition_request(conn, f"{topic_name}-{i}")
            answers[i] = response.request_id

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(answers) == 32
        assert len(set(answers.values())) == 32  # each got the answer to its own request


def test_idle_connection_survives_keepalive(fresh_pulsar_lite, topic_name) -> None:
    broker = fresh_pulsar_lite(keep_alive_interval_secs=1)
    with Connection.open(broker.host, broker.port) as conn:
        time.sleep(4.5)  # several broker keep-alive intervals, nothing sent by us
        assert not conn.closed
        assert conn.pings_answered >= 2
        assert _partition_request(conn, topic_name).partitions == 0


def test_unreachable_broker_fails_fast_and_retriably() -> None:
    # Lookups are retried (a broker restarting) within the operation timeout, then fail
    # with the connection's error.
    started = time.monotonic()
    with (
        pytest.raises(ConnectError) as info,
        PulsarClient("pulsar://127.0.0.1:1", connect_timeout=2, operation_timeout=3) as client,
    ):
        client.get_partitions("t")
    assert time.monotonic() - started < 8
    assert "127.0.0.1:1" in str(info.value)
    assert info.value.retriable


def test_wrong_scheme_is_rejected_before_connecting() -> None:
    with pytest.raises(InvalidServiceUrl, match="http://localhost:8080"):
        PulsarClient("http://localhost:8080")


def test_pending_request_fails_when_the_broker_dies(fresh_pulsar_lite) -> None:
    broker = fresh_pulsar_lite()
    conn = Connection.open(broker.host, broker.port)
    broker.kill()
    deadline = time.monotonic() + 10
    while not conn.closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert conn.closed
    with pytest.raises(ConnectionClosed):
        _partition_request(conn, "persistent://public/default/x")


# -- reading -----------------------------------------------------------------------


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
@pytest.mark.parametrize("codec", CODECS)
def test_reads_what_the_official_client_produced(
    broker, topic_name, codec: str, batching: bool
) -> None:
    sent = _messages(120)
    ids = produce(broker.service_url, topic_name, sent, batching=batching, compression=codec)
    with PulsarClient(broker.service_url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == [m["value"] for m in sent]
    assert [r["key"] for r in rows] == [m.get("key", "").encode() or None for m in sent]
    assert [dict(r["properties"]) for r in rows] == [m.get("properties", {}) for m in sent]
    assert [
        None if r["eventTime"] is None else int(r["eventTime"].timestamp() * 1000) for r in rows
    ] == [m.get("event_time") for m in sent]
    expected_ids = [i if batching else i.rsplit(":", 1)[0] + ":-1" for i in ids]
    assert [r["messageId"] for r in rows] == expected_ids
    assert {r["topic"] for r in rows} == {topic_name}
    assert {r["partition"] for r in rows} == {-1}


def test_empty_payloads_and_empty_topic(broker, topic_name) -> None:
    with PulsarClient(broker.service_url) as client:
        started = time.monotonic()
        assert _rows(client, topic_name) == []  # pulsar-lite: "Topic has no messages"
        assert time.monotonic() - started < 5
        produce(broker.service_url, topic_name, [b"", b"x", b""])
        assert [r["value"] for r in _rows(client, topic_name)] == [b"", b"x", b""]


def test_start_and_end_inside_batches(broker, topic_name) -> None:
    sent = _messages(300)
    ids = produce(broker.service_url, topic_name, sent, batching=True, batching_max_messages=40)
    values = [m["value"] for m in sent]
    with PulsarClient(broker.service_url) as client:
        got = _rows(client, topic_name, start=ids[45], end=ids[211])
        assert [r["value"] for r in got] == values[45:212]
        got = _rows(client, topic_name, start=ids[45], start_inclusive=False)
        assert [r["value"] for r in got] == values[46:]
        got = _rows(client, topic_name, start=ids[-1])
        assert [r["value"] for r in got] == values[-1:]
        assert _rows(client, topic_name, start=ids[-1], start_inclusive=False) == []
        assert _rows(client, topic_name, start="latest") == []
        # An end inside the topic's last batch (pulsar-lite's last id has no batch index).
        got = _rows(client, topic_name, start=ids[250], end=ids[-3])
        assert [r["value"] for r in got] == values[250:-2]


def test_exclusive_ends_inside_and_at_batches(broker, topic_name) -> None:
    sent = _messages(120)
    ids = produce(broker.service_url, topic_name, sent, batching=True, batching_max_messages=40)
    values = [m["value"] for m in sent]
    with PulsarClient(broker.service_url) as client:
        got = _rows(client, topic_name, end=ids[57], end_inclusive=False)
        assert [r["value"] for r in got] == values[:57]
        entry_of_80 = ":".join(ids[80].split(":")[:3]) + ":-1"  # the whole entry holding 80
        got = _rows(client, topic_name, start=ids[10], end=entry_of_80, end_inclusive=False)
        assert [r["value"] for r in got] == values[10:80]
        assert _rows(client, topic_name, start=ids[80], end=entry_of_80, end_inclusive=False) == []
        assert _rows(client, topic_name, start=ids[57], end=ids[57], end_inclusive=False) == []


def _published_in_bursts(url: str, topic: str, bursts: int, size: int) -> list[dict]:
    """``bursts`` batches of ``size`` messages, each batch published a little later."""
    sent: list[dict] = []
    for b in range(bursts):
        burst = _messages(size, start=b * size)
        produce(url, topic, burst, batching=True, batching_max_messages=size)
        sent.extend(burst)
        time.sleep(0.02)
    return sent


def test_start_and_end_by_publish_time(broker, topic_name) -> None:
    url = broker.service_url
    sent = _published_in_bursts(url, topic_name, bursts=6, size=5)
    values = [m["value"] for m in sent]
    with PulsarClient(url) as client:
        rows = _rows(client, topic_name)
        assert [r["value"] for r in rows] == values
        times = [r["publishTime"] for r in rows]
        assert times == sorted(times)
        # A time inside a burst's batch starts at the batch: every item shares its time.
        t = times[12]
        first = times.index(t)
        assert _rows(client, topic_name, start=t) == rows[first:]
        assert _rows(client, topic_name, end=t) == rows[:first]
        assert client.message_id_at_time(topic_name, t) is not None
        assert str(client.message_id_at_time(topic_name, t)) == rows[first]["messageId"]
        # Consecutive time ranges cover the topic exactly once.
        cuts = sorted({times[i] for i in (7, 12, 23)})
        bounds = ["earliest", *cuts, "latest"]
        pieces = [_rows(client, topic_name, start=a, end=b) for a, b in itertools.pairwise(bounds)]
        assert [r for piece in pieces for r in piece] == rows
        assert all(pieces)
        # Before everything, and after everything (pulsar-lite drops the connection on a
        # SEEK past the newest message: the reader looks first).
        early, late = times[0] - dt.timedelta(days=1), times[-1] + dt.timedelta(seconds=1)
        assert _rows(client, topic_name, start=early) == rows
        assert _rows(client, topic_name, start=late) == []
        assert _rows(client, topic_name, end=early) == []
        assert client.message_id_at_time(topic_name, late) is None
        assert client.message_id_at_time(topic_name, int(early.timestamp() * 1000)) == (
            client.message_id_at_time(topic_name, early)
        )


def test_a_time_before_1970_reads_from_the_start(broker, topic_name) -> None:
    # Before every message (the SEEK's time is unsigned on the wire).
    produce(broker.service_url, topic_name, _messages(5))
    with PulsarClient(broker.service_url) as client:
        rows = _rows(client, topic_name)
        first = MessageId.parse(rows[0]["messageId"])
        for before in (Position.at_time(-5), dt.datetime(1969, 12, 31, tzinfo=dt.timezone.utc)):
            assert _rows(client, topic_name, start=before) == rows
            assert _rows(client, topic_name, end=before) == []
        assert client.message_id_at_time(topic_name, -5) == first
        assert client.message_id_at_time(topic_name, Position.at_time(-86_400_000)) == first


def test_time_bounds_on_an_empty_topic(broker, topic_name) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    with PulsarClient(broker.service_url) as client:
        assert _rows(client, topic_name, start=now) == []
        assert _rows(client, topic_name, end=now) == []
        assert client.message_id_at_time(topic_name, now) is None


def test_time_bounds_on_a_partitioned_topic(partitioned_broker, topic_name) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    url = partitioned_broker.service_url
    produce(url, topic_name, _messages(40))
    with PulsarClient(url) as client:
        rows = _rows(client, topic_name, start=now - dt.timedelta(minutes=5))
        assert len(rows) == 40
        with pytest.raises(ClientError, match="partitioned"):
            client.message_id_at_time(topic_name, now)
        assert any(
            client.message_id_at_time(f"{topic_name}-partition-{i}", now) is not None
            for i in range(4)
        )


def test_partitioned_topic(partitioned_broker, topic_name) -> None:
    url = partitioned_broker.service_url
    sent = _messages(200)
    produce(url, topic_name, sent)
    with PulsarClient(url) as client:
        partitions = client.get_partitions(topic_name)
        assert partitions == [f"{topic_name}-partition-{i}" for i in range(4)]
        rows = _rows(client, topic_name)
        assert sorted(r["value"] for r in rows) == sorted(m["value"] for m in sent)
        assert {r["partition"] for r in rows} <= {0, 1, 2, 3}
        assert {r["topic"] for r in rows} == {topic_name}
        one = _rows(client, partitions[1])
        assert one == [r for r in rows if r["partition"] == 1]


def test_small_queue_reads_everything_in_bounded_batches(broker, topic_name) -> None:
    sent = _messages(2000)
    produce(broker.service_url, topic_name, sent)
    with PulsarClient(broker.service_url) as client:
        batches = list(client.read_batches(topic_name, receiver_queue_size=10, batch_rows=256))
    assert all(b.num_rows <= 256 + 1000 for b in batches)  # bounded by rows + one entry
    assert [v for b in batches for v in b.column("value").to_pylist()] == [m["value"] for m in sent]


def test_dropped_connections_lose_and_duplicate_nothing(broker, fault_proxy, topic_name) -> None:
    sent = _messages(3000)
    produce(broker.service_url, topic_name, sent, batching_max_messages=50)
    # Every 25th frame cuts the connection. A resume costs ~10 frames (connect, lookup,
    # subscribe, the gap check's probe, flow): at 15, CI once saw a minute of reconnects that
    # never got to a message.
    proxy = fault_proxy(broker.service_url, drop_every_frames=25)
    with PulsarClient(proxy.service_url, operation_timeout=60) as client:
        rows = _rows(client, topic_name, receiver_queue_size=100)
    assert [r["value"] for r in rows] == [m["value"] for m in sent]
    assert len({r["messageId"] for r in rows}) == len(sent)
    assert proxy.stats()["drops"] > 0


def test_broker_restart_in_the_middle_of_a_read(fresh_pulsar_lite, topic_name) -> None:
    broker = fresh_pulsar_lite()
    sent = _messages(3000)
    produce(broker.service_url, topic_name, sent, batching_max_messages=50)
    values = []
    with PulsarClient(broker.service_url, operation_timeout=60) as client:
        for i, batch in enumerate(
            client.read_batches(topic_name, batch_rows=500, receiver_queue_size=100)
        ):
            values.extend(batch.column("value").to_pylist())
            if i == 1:
                broker.restart()
    assert values == [m["value"] for m in sent]


def test_a_small_compressed_message_that_inflates_past_the_frame_limit(broker, topic_name) -> None:
    # The broker bounds the compressed size only.
    value = b"abc" * (8 * 1024 * 1024)  # 24 MiB, a few KiB as LZ4
    produce(broker.service_url, topic_name, [value, b"next"], batching=False, compression="LZ4")
    with PulsarClient(broker.service_url) as client:
        rows = _rows(client, topic_name)
    assert [len(r["value"]) for r in rows] == [len(value), 4]
    assert rows[0]["value"] == value


def test_listing_topics_on_a_broker_that_cannot(pulsar_lite) -> None:
    # pulsar-lite leaves GetTopicsOfNamespace unanswered; listing works on Apache Pulsar
    # (tests/client/test_apache_*.py).
    with PulsarClient(pulsar_lite.service_url, operation_timeout=1) as client:
        with pytest.raises(ClientError, match="expected 'tenant/namespace'"):
            client.list_topics("public")
        with pytest.raises(ClientError, match="not a valid regular expression"):
            client.list_topics("public/default", pattern="(")
        started = time.monotonic()
        with pytest.raises(OperationTimeout, match="may not support GetTopicsOfNamespace"):
            client.list_topics("public/default")
        assert time.monotonic() - started < 5


def test_listing_topics_with_and_without_a_pattern(apache_pulsar, topic_name) -> None:
    admin = apache_pulsar.admin
    plain, parted = f"{topic_name}-plain", f"{topic_name}-parted"
    admin.create_topic(plain)
    admin.create_partitioned_topic(parted, 3)
    produce(apache_pulsar.service_url, parted, _messages(6))  # partitions exist on the broker
    short = topic_name.split("://", 1)[1]
    with PulsarClient(apache_pulsar.service_url) as client:
        listed = client.list_topics("public/default")
        assert {plain, parted} <= set(listed)
        assert not [t for t in listed if "-partition-" in t]  # partitions listed once
        assert listed == sorted(listed)
        assert client.list_topics("public/default", pattern=f"{topic_name}-p.*") == [parted, plain]
        assert client.list_topics("public/default", pattern=f"{short}-par.*") == [parted]
        assert client.list_topics("public/default", pattern="nothing-matches-this") == []


def test_a_consumer_the_broker_never_serves_is_re_created(
    broker, fault_proxy, topic_name, monkeypatch
) -> None:
    """A subscription that raced with an unload can stay on the closed topic: requests
    answered, no message ever dispatched. The reader re-subscribes after STALL seconds."""
    from pulsar_spark.client.read.reader import PartitionReader

    sent = _messages(50)
    produce(broker.service_url, topic_name, sent)
    starved: set[int] = set()

    def starve_the_first_consumer(frame, raw: bytes) -> bytes:
        if frame.command.type != T.MESSAGE:
            return raw
        consumer = frame.command.message.consumer_id
        if not starved:
            starved.add(consumer)
        return b"" if consumer in starved else raw

    proxy = fault_proxy(broker.service_url, frame_hook=starve_the_first_consumer)
    monkeypatch.setattr(PartitionReader, "STALL", 1.0)
    started = time.monotonic()
    with PulsarClient(proxy.service_url) as client:
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == [m["value"] for m in sent]
    assert starved  # the first consumer got nothing
    assert time.monotonic() - started < 15


# -- chunked messages across range ends ------------------------------------------


def _chunked_topic(url: str, topic: str) -> tuple[list[bytes], list[str]]:
    """ "a", a message in 5 chunks, "b": one entry each; the values and the row ids."""
    import random

    sent = [b"a", random.Random(5).randbytes(20_000), b"b"]
    with PulsarClient(url) as client:
        with client.create_producer(topic, batching=False, chunk_max_size=4096) as producer:
            for value in sent:
                producer.send(value)
        ids = [r["messageId"] for r in _rows(client, topic)]
    return sent, ids


def test_a_range_end_between_chunks_keeps_the_message_whole(broker, topic_name) -> None:
    sent, ids = _chunked_topic(broker.service_url, topic_name)
    ledger, first, partition, _ = (int(x) for x in ids[0].split(":"))
    chunked_last = int(ids[1].split(":")[1])  # a chunked message's id is its last chunk's
    assert chunked_last - first >= 4  # chunks 1..5
    with PulsarClient(broker.service_url) as client:
        for cut in range(first + 1, chunked_last + 2):  # every entry of the chunks, and "b"
            at = f"{ledger}:{cut}:{partition}:-1"
            before = _rows(client, topic_name, end=at, end_inclusive=False)
            after = _rows(client, topic_name, start=at)
            values = [r["value"] for r in before + after]
            assert values == sent, cut
            # the message goes with its first chunk, whole, with its last chunk's id
            assert [r["messageId"] for r in before + after] == ids, cut


class _HeldChunks:
    """A producer that has sent "a" and the first two chunks of ``big``; the other
    chunks wait in a thread until :meth:`release`. Read with another client: this
    one's connection is the one holding the chunks back."""

    def __init__(
        self,
        client: PulsarClient,
        topic: str,
        big: bytes,
        monkeypatch: pytest.MonkeyPatch,
        pause: float = 0.0,
    ) -> None:
        self.producer = client.create_producer(topic, batching=False, chunk_max_size=4096)
        self.producer.send(b"a")
        time.sleep(pause)  # publish times apart
        self._release = threading.Event()
        conn = self.producer._conn
        real_send, sent = conn.send, []

        def send_two_chunks_then_wait(frame: bytes) -> None:
            if len(sent) >= 2:
                self._release.wait(30)
            sent.append(len(frame))
            real_send(frame)

        monkeypatch.setattr(conn, "send", send_two_chunks_then_wait)
        self._sender = threading.Thread(target=self.producer.send, args=(big,))
        self._sender.start()
        deadline = time.monotonic() + 10
        while len(sent) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # the two chunks stored: a read's end falls between chunks

    def release(self, after: float = 0.0) -> None:
        threading.Timer(after, self._release.set).start()

    def finish(self) -> None:
        self._release.set()
        self._sender.join(30)


def test_a_read_waits_for_the_chunks_of_a_message_it_began(
    broker, topic_name, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    big = random.Random(6).randbytes(20_000)
    with PulsarClient(broker.service_url) as client:
        held = _HeldChunks(client, topic_name, big, monkeypatch)
        held.release(after=1.5)
        started = time.monotonic()
        with PulsarClient(broker.service_url) as reading:
            rows = _rows(reading, topic_name)
        waited = time.monotonic() - started
        held.finish()
        assert [r["value"] for r in rows] == [b"a", big]
        assert waited >= 1.0  # it read past its end for the chunks still to come
        held.producer.send(b"b")
        held.producer.close()
        later = _rows(client, topic_name, start=rows[-1]["messageId"], start_inclusive=False)
        assert [r["value"] for r in later] == [b"b"]


def test_a_message_whose_chunks_stop_coming_fails_the_read_or_is_reported(
    broker, topic_name, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its first chunks are in the range, the others never come (the producer stopped
    # mid-message): lost. Without a report the read fails naming it; a report is told
    # (and may skip it).
    import random

    from pulsar_spark.client.read.chunk_bounds import IncompleteChunked
    from pulsar_spark.client.read.reader import PartitionReader
    from pulsar_spark.protocol.errors import ChunkError

    monkeypatch.setattr(PartitionReader, "CHUNK_WAIT", 1.0)
    big = random.Random(7).randbytes(20_000)
    with PulsarClient(broker.service_url) as client:
        held = _HeldChunks(client, topic_name, big, monkeypatch)
        lost: list[IncompleteChunked] = []
        with PulsarClient(broker.service_url) as reading:
            with pytest.raises(ChunkError, match=r"no further chunk came for [\d.]+ s") as err:
                _rows(reading, topic_name)
            rows = _rows(reading, topic_name, chunk_loss=lost.append)
        assert [r["value"] for r in rows] == [b"a"]
        assert len(lost) == 1
        assert lost[0].topic == topic_name
        first = lost[0].first_chunk  # the entry after "a"'s
        a_id = MessageId.parse(rows[0]["messageId"])
        assert (first.ledger, first.entry, first.batch_index) == (a_id.ledger, a_id.entry + 1, -1)
        assert err.value.message_id == str(first)
        assert f"{lost[0].uuid!r} (first chunk {first})" in str(err.value)
        held.finish()
        held.producer.close()
        assert [r["value"] for r in _rows(client, topic_name)] == [b"a", big]


def test_an_abandoned_chunked_message_does_not_stall_a_read_past_it(
    broker, topic_name, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Its chunks stop while other producers go on: the read skips their messages past
    # its end (it moves on), gives the chunked message up after the wait, and ends,
    # even with a wait longer than the operation timeout.
    import random

    from pulsar_spark.client.read.chunk_limits import ChunkLimits
    from pulsar_spark.client.read.reader import PartitionReader

    monkeypatch.setattr(PartitionReader, "CHUNK_WAIT", 4.0)
    dropping = ChunkLimits(drop_incomplete=True)  # the user's choice: a WARNING, no failure
    with PulsarClient(broker.service_url) as client:
        held = _HeldChunks(client, topic_name, random.Random(9).randbytes(20_000), monkeypatch)
        with (
            PulsarClient(broker.service_url) as other,
            other.create_producer(topic_name, batching=False) as producer,
        ):
            for value in (b"b", b"c"):
                producer.send(value)
        with (
            caplog.at_level("WARNING", logger="pulsar_spark.client.read.reader"),
            PulsarClient(
                broker.service_url, operation_timeout=3.0, chunk_limits=dropping
            ) as reading,
        ):
            everything = _rows(reading, topic_name)
            assert [r["value"] for r in everything] == [b"a", b"b", b"c"]
            started = time.monotonic()
            upto_b = _rows(reading, topic_name, end=everything[1]["messageId"])
            assert [r["value"] for r in upto_b] == [b"a", b"b"]
            assert time.monotonic() - started < 20
        assert "dropping chunked message" in caplog.text
        held.finish()
        held.producer.close()


def test_a_chunked_message_begins_at_its_first_chunk_for_times_and_probes(
    broker, topic_name
) -> None:
    import random

    big = random.Random(8).randbytes(20_000)
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name, batching=False, chunk_max_size=4096) as producer:
            for value in (b"a", big, b"b"):
                producer.send(value)
                time.sleep(0.02)  # three publish times
        rows = _rows(client, topic_name)
        ledger, first, partition, _ = (int(x) for x in rows[0]["messageId"].split(":"))
        last_chunk = int(rows[1]["messageId"].split(":")[1])
        at = rows[1]["publishTime"]
        # The message begins at its first chunk, the entry after "a".
        found = client.message_id_at_time(topic_name, at)
        assert (found.ledger, found.entry, found.batch_index) == (ledger, first + 1, -1)
        before = _rows(client, topic_name, end=at)
        after = _rows(client, topic_name, start=at)
        assert [r["value"] for r in before] == [b"a"]
        assert [r["value"] for r in after] == [big, b"b"]
        # A chunk is an entry like any other to a probe.
        for entry in range(first, last_chunk + 2):
            assert client.entry_exists(topic_name, f"{ledger}:{entry}:{partition}:-1")
        assert not client.entry_exists(topic_name, f"{ledger}:{last_chunk + 2}:{partition}:-1")


def test_a_time_begins_at_a_chunked_message_a_later_message_completes_before(
    broker, topic_name, monkeypatch: pytest.MonkeyPatch
) -> None:
    # "a", the first two chunks of ``big``, "b" from another producer, big's other
    # chunks: "b" completes first, but the first message begun at big's publish time
    # is big, at its first chunk.
    import random

    big = random.Random(10).randbytes(20_000)
    with PulsarClient(broker.service_url) as client:
        held = _HeldChunks(client, topic_name, big, monkeypatch, pause=0.05)
        with (
            PulsarClient(broker.service_url) as other,
            other.create_producer(topic_name, batching=False) as producer,
        ):
            producer.send(b"b")
        held.finish()
        held.producer.close()
        rows = _rows(client, topic_name)
        assert [r["value"] for r in rows] == [b"a", b"b", big]  # as they complete
        ledger, first, partition, _ = (int(x) for x in rows[0]["messageId"].split(":"))
        at = rows[2]["publishTime"]
        assert rows[0]["publishTime"] < at <= rows[1]["publishTime"]
        found = client.message_id_at_time(topic_name, at)
        assert found == MessageId(ledger, first + 1, partition, -1)
        assert [r["value"] for r in _rows(client, topic_name, end=at)] == [b"a"]
        assert [r["value"] for r in _rows(client, topic_name, start=at)] == [b"b", big]


# -- id-level probes: the Arrow path's selection, no Arrow ---------------------------


def _arrow_refs(client: PulsarClient, topic: str, start, end, **kwargs) -> list[tuple[str, int]]:
    """(messageId, publish time in ms) of each row the Arrow path reads."""
    refs = []
    for batch in client.read_batches(topic, start, end, **kwargs):
        times = batch.column("publishTime").cast(pa.int64()).to_pylist()  # microseconds
        ids = batch.column("messageId").to_pylist()
        refs.extend((i, t // 1000) for i, t in zip(ids, times, strict=True))
    return refs


def _scanned(client: PulsarClient, topic: str, start, end, **kwargs) -> list[tuple[str, int]]:
    return [
        (str(r.message_id), r.publish_time) for r in client.scan_ids(topic, start, end, **kwargs)
    ]


@pytest.mark.parametrize("codec", ["NONE", "LZ4"])
def test_id_scan_selects_what_the_arrow_path_reads(broker, topic_name, codec: str) -> None:
    sent = _messages(300)
    ids = [
        MessageId.parse(i)
        for i in produce(
            broker.service_url,
            topic_name,
            sent,
            batching=True,
            batching_max_messages=40,
            compression=codec,
        )
    ]
    entry_of_80 = MessageId(ids[80].ledger, ids[80].entry, ids[80].partition, -1)
    bounds = [
        (Position.earliest(), Position.latest()),
        (Position.at(ids[45]), Position.after(ids[211])),  # inside batches, inclusive
        (Position.after(ids[45]), Position.at(ids[211])),  # both exclusive
        (Position.at(ids[10]), Position.at(entry_of_80)),  # ends before the entry of 80
        (Position.after(entry_of_80), Position.latest()),  # after that whole entry
        (Position.at(ids[-1]), Position.latest()),
        (Position.after(ids[-1]), Position.latest()),
        (Position.latest(), Position.latest()),
    ]
    with PulsarClient(broker.service_url) as client:
        for start, end in bounds:
            arrow = _arrow_refs(client, topic_name, start, end)
            assert _scanned(client, topic_name, start, end) == arrow, (start, end)
            first = client.first_message(topic_name, start, end)
            assert (None if first is None else (str(first[0]), first[1])) == (
                arrow[0] if arrow else None
            ), (start, end)
        # A position reads what the id with its inclusive flag reads.
        assert _arrow_refs(
            client, topic_name, Position.after(ids[45]), Position.at(ids[211])
        ) == _arrow_refs(
            client, topic_name, str(ids[45]), ids[211], start_inclusive=False, end_inclusive=False
        )
        assert [
            v
            for v, _ in _arrow_refs(
                client, topic_name, Position.at(ids[45]), Position.after(ids[211])
            )
        ] == [str(i) for i in ids[45:212]]
        # A limit, and leaving early.
        everything = _arrow_refs(client, topic_name, "earliest", "latest")
        assert _scanned(client, topic_name, "earliest", "latest", limit=7) == everything[:7]
        refs = client.scan_ids(topic_name)
        assert (str(next(refs).message_id),) == (everything[0][0],)
        refs.close()


def test_id_scan_by_publish_time(broker, topic_name) -> None:
    sent = _published_in_bursts(broker.service_url, topic_name, bursts=4, size=5)
    with PulsarClient(broker.service_url) as client:
        rows = _arrow_refs(client, topic_name, "earliest", "latest")
        assert len(rows) == len(sent)
        t = rows[7][1]
        start, end = Position.at_time(t), Position.at_time(rows[-1][1])
        arrow = _arrow_refs(client, topic_name, start, end)
        assert arrow and arrow[0][1] == t
        assert _scanned(client, topic_name, start, end) == arrow
        assert client.first_message(topic_name, start) == (MessageId.parse(arrow[0][0]), t)
        assert client.message_id_at_time(topic_name, start) == MessageId.parse(arrow[0][0])
        assert client.first_message(topic_name, Position.at_time(rows[-1][1] + 1)) is None


def test_id_scan_gives_a_chunked_message_by_its_first_chunk(broker, topic_name) -> None:
    _, ids = _chunked_topic(broker.service_url, topic_name)
    ledger, first, partition, _ = (int(x) for x in ids[0].split(":"))
    begins = MessageId(ledger, first + 1, partition, -1)  # the entry after "a"
    chunked_last = int(ids[1].split(":")[1])
    with PulsarClient(broker.service_url) as client:
        arrow = _arrow_refs(client, topic_name, "earliest", "latest")
        assert [i for i, _ in arrow] == ids
        scanned = list(client.scan_ids(topic_name))
        assert [str(r.message_id) for r in scanned] == [ids[0], str(begins), ids[2]]
        assert [r.publish_time for r in scanned] == [t for _, t in arrow]
        for cut in range(first + 1, chunked_last + 2):  # every entry of the chunks, and "b"
            at = Position.at(MessageId(ledger, cut, partition, -1))
            before = list(client.scan_ids(topic_name, Position.earliest(), at))
            after = list(client.scan_ids(topic_name, at, Position.latest()))
            assert [
                len(_rows(client, topic_name, end=at)),
                len(_rows(client, topic_name, start=at)),
            ] == [len(before), len(after)], cut
            assert before + after == scanned, cut  # the message goes with its first chunk
        # A range that ends after its first chunk holds it whole; the next range,
        # which starts there, leaves it to the range before.
        inside = Position.after(begins)
        upto = list(client.scan_ids(topic_name, Position.earliest(), inside))
        assert [str(r.message_id) for r in upto] == [ids[0], str(begins)]
        assert [r["messageId"] for r in _rows(client, topic_name, end=inside)] == ids[:2]
        assert [str(r.message_id) for r in client.scan_ids(topic_name, inside)] == [ids[2]]
        assert [r["messageId"] for r in _rows(client, topic_name, start=inside)] == ids[2:]
        assert client.first_message(topic_name, Position.at(begins)) == (
            begins,
            scanned[1].publish_time,
        )


def test_id_probes_take_one_partition(partitioned_broker, topic_name) -> None:
    url = partitioned_broker.service_url
    produce(url, topic_name, _messages(40))
    with PulsarClient(url) as client:
        with pytest.raises(ClientError, match="partitioned"):
            client.scan_ids(topic_name)
        with pytest.raises(ClientError, match="partitioned"):
            client.first_message(topic_name)
        for partition in client.get_partitions(topic_name):
            arrow = _arrow_refs(client, partition, "earliest", "latest")
            assert _scanned(client, partition, "earliest", "latest") == arrow
