"""Incomplete chunked messages bounded by age and count (:class:`ChunkLimits`), mid-read:
a message older than the expiry (from its first chunk's arrival) fails the read naming
it and its first chunk, or is dropped with a WARNING naming them when dropping was
chosen; the limits come from the client's configuration (Spark's options set it).

At a range's end: a message begun in the range whose other chunks never come (none for
the reader's ``CHUNK_WAIT``, or the topic terminated) is lost data. The read's
``chunk_loss`` report is told (it may skip it); without one the read fails with
``ChunkError`` naming it; dropping, when chosen, drops it with a WARNING. Id scans skip
it with a WARNING.

End to end on pulsar-lite (and Apache Pulsar): a bare producer stores the first chunk of
a message whose other chunks never come, between plain messages and a whole chunked
message, or as the range's last entry.
"""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import pytest

from pulsar_spark.client import PartitionReader, PulsarClient
from pulsar_spark.client.errors import InvalidArgument
from pulsar_spark.client.names import parse_topic
from pulsar_spark.client.read.chunk_bounds import ChunkBounds, IncompleteChunked, skip_incomplete
from pulsar_spark.client.read.chunk_limits import ChunkLimits
from pulsar_spark.protocol import MessageId, pb
from pulsar_spark.protocol.errors import ChunkError
from tests.support.raw_wire import chunk_metadata, first_chunk_only, send_prepared

LOG = logging.getLogger("test.chunk_expiry")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _bounds(
    limits: ChunkLimits | None = None, config: object = None, wait: float = 60.0, **kwargs
) -> ChunkBounds:
    reader = SimpleNamespace(topic=parse_topic("t"), partition=-1, CHUNK_WAIT=wait)
    if config is not None:
        reader.lookup = SimpleNamespace(config=config)
    return ChunkBounds(reader, LOG, limits=limits, **kwargs)


# -- the age bound ------------------------------------------------------------------------


def test_an_incomplete_message_past_the_expiry_fails_naming_its_first_chunk() -> None:
    clock = Clock()
    bounds = _bounds(ChunkLimits(expiry=60.0), clock=clock)
    assert bounds.add(7, 3, chunk_metadata("old", 0, 3, 30), b"x" * 10) is None
    clock.now += 30
    assert bounds.add(7, 4, chunk_metadata("young", 0, 2, 20), b"y" * 10) is None
    clock.now += 30  # "old" is 60 s old: not beyond the expiry yet
    assert bounds.add(7, 5, chunk_metadata("old", 1, 3, 30), b"x" * 10) is None
    clock.now += 1
    with pytest.raises(ChunkError, match="expireTimeOfIncompleteChunkedMessageMillis") as err:
        bounds.add(7, 6, chunk_metadata("young", 1, 2, 20), b"y" * 10)  # completes "young"
    text = str(err.value)
    assert "'old' (first chunk 7:3:-1:-1)" in text
    assert "61.0 s after its first chunk came" in text
    assert err.value.message_id == "7:3:-1:-1"


def test_a_message_completed_by_the_chunk_that_comes_is_kept_whatever_its_age() -> None:
    clock = Clock()
    bounds = _bounds(ChunkLimits(expiry=1.0), clock=clock)
    bounds.add(1, 0, chunk_metadata("slow", 0, 2, 2), b"a")
    clock.now += 5
    whole = bounds.add(1, 1, chunk_metadata("slow", 1, 2, 2), b"b")
    assert whole is not None and whole.payload == b"ab"
    assert bounds.pending == 0


def test_a_message_begun_again_is_aged_from_its_new_first_chunk() -> None:
    clock = Clock()
    bounds = _bounds(ChunkLimits(expiry=10.0), clock=clock)
    bounds.add(1, 0, chunk_metadata("m", 0, 2, 2), b"a")
    clock.now += 8
    bounds.add(1, 1, chunk_metadata("m", 0, 2, 2), b"a")  # the producer sent it again
    clock.now += 8  # 16 s after the first copy, 8 s after the second
    bounds.add(1, 2, chunk_metadata("other", 0, 2, 2), b"o")
    whole = bounds.add(1, 3, chunk_metadata("m", 1, 2, 2), b"b")
    assert whole is not None and whole.first == (1, 1)


def test_an_expiry_of_zero_is_no_age_bound() -> None:
    clock = Clock()
    bounds = _bounds(ChunkLimits(expiry=0), clock=clock)
    bounds.add(1, 0, chunk_metadata("old", 0, 2, 2), b"a")
    clock.now += 1e6
    bounds.add(1, 1, chunk_metadata("other", 0, 2, 2), b"o")
    assert bounds.pending == 2


def test_dropping_an_expired_message_warns_naming_it_and_skips_its_late_chunks(caplog) -> None:
    clock = Clock()
    bounds = _bounds(ChunkLimits(expiry=5.0, drop_incomplete=True), clock=clock)
    bounds.add(2, 0, chunk_metadata("gone", 0, 2, 2), b"g")
    clock.now += 6
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        bounds.add(2, 1, chunk_metadata("next", 0, 2, 2), b"n")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "'gone' (first chunk 2:0:-1:-1)" in warnings[0]
    assert "expireTimeOfIncompleteChunkedMessageMillis" in warnings[0]
    assert bounds.pending == 1 and bounds.held_bytes == 1
    dropped = bounds._assembler.dropped
    assert bounds.add(2, 2, chunk_metadata("gone", 1, 2, 2), b"G") is None  # its tail: skipped
    assert bounds._assembler.dropped == dropped + 1
    whole = bounds.add(2, 3, chunk_metadata("next", 1, 2, 2), b"N")
    assert whole is not None and whole.payload == b"nN"


# -- at the range's end: a message whose later chunks never come -----------------------


def _orphan_at_the_end(**kwargs) -> tuple[ChunkBounds, Clock]:
    """Bounds that began "orphan" (first chunk 7:3, 1 of 3) and waited 31 s for more."""
    clock = Clock()
    bounds = _bounds(wait=30.0, clock=clock, **kwargs)
    assert bounds.add(7, 3, chunk_metadata("orphan", 0, 3, 30), b"o" * 10) is None
    clock.now += 29
    assert not bounds.past_end_done()  # still waited for
    assert not bounds.nothing_to_wait_for()
    clock.now += 2
    return bounds, clock


def test_a_message_never_completed_fails_a_read_without_a_report_naming_it() -> None:
    bounds, _ = _orphan_at_the_end()
    with pytest.raises(ChunkError, match="chunk_loss") as err:
        bounds.nothing_to_wait_for()
    text = str(err.value)
    assert "persistent://public/default/t: chunked message 'orphan'" in text
    assert "(first chunk 7:3:-1:-1) is incomplete: no further chunk came for 31.0 s" in text
    assert "producer stopped mid-message, or the remaining chunks were removed" in text
    assert err.value.message_id == "7:3:-1:-1"
    assert bounds.pending == 0 and bounds.held_bytes == 0


@pytest.mark.parametrize("where", ["past the end", "nothing more", "terminated"])
def test_a_message_never_completed_goes_to_the_reads_report(where: str, caplog) -> None:
    lost: list[IncompleteChunked] = []
    bounds, _ = _orphan_at_the_end(report=lost.append)
    with caplog.at_level(logging.WARNING):
        if where == "past the end":
            assert bounds.past_end_done()
        elif where == "nothing more":
            assert bounds.nothing_to_wait_for()
        else:
            bounds.give_up("the topic was terminated before its last chunk")
    first = MessageId(7, 3, -1, -1)
    cause = (
        "the topic was terminated before its last chunk"
        if where == "terminated"
        else "no further chunk came for 31.0 s (say, the producer stopped mid-message, "
        "or the remaining chunks were removed)"
    )
    assert lost == [IncompleteChunked("persistent://public/default/t", "orphan", first, cause)]
    assert not caplog.records  # the report says what it does with it
    assert bounds.pending == 0 and bounds.past_end_done()
    # Its later chunks, should they come after all, are not taken for a new message.
    assert bounds.add(7, 9, chunk_metadata("orphan", 1, 3, 30), b"o" * 10) is None
    assert bounds.pending == 0


def test_a_report_that_raises_fails_the_read() -> None:
    def fail(lost: IncompleteChunked) -> None:
        msg = f"lost {lost.uuid}"
        raise RuntimeError(msg)

    bounds, _ = _orphan_at_the_end(report=fail)
    with pytest.raises(RuntimeError, match="lost orphan"):
        bounds.past_end_done()


def test_dropping_chosen_drops_a_message_never_completed_with_a_warning(caplog) -> None:
    lost: list[IncompleteChunked] = []
    limits = ChunkLimits(drop_incomplete=True)
    bounds, _ = _orphan_at_the_end(limits=limits, report=lost.append)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert bounds.past_end_done()
    assert lost == []  # the user's choice: no loss to report
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "dropping chunked message 'orphan' (first chunk 7:3:-1:-1)" in warnings[0]
    assert "no further chunk came for 31.0 s" in warnings[0]


def test_skip_incomplete_warns_naming_the_message(caplog) -> None:
    lost = IncompleteChunked("persistent://public/default/t", "m", MessageId(1, 2, 0, -1), "why")
    with caplog.at_level(logging.WARNING, logger="pulsar_spark.client.read.chunk_bounds"):
        skip_incomplete(lost)
    assert caplog.records[0].getMessage() == (
        "persistent://public/default/t: chunked message 'm' (first chunk 1:2:0:-1) is "
        "incomplete: why; skipped, the read goes on without it"
    )


# -- the count bound and where the limits come from ------------------------------------


def test_the_limits_come_from_the_readers_client_config() -> None:
    config = SimpleNamespace(chunk_limits=ChunkLimits(max_pending=2))
    bounds = _bounds(config=config)
    assert bounds.limits.max_pending == 2
    bounds.add(1, 0, chunk_metadata("a", 0, 2, 2), b"a")
    bounds.add(1, 1, chunk_metadata("b", 0, 2, 2), b"b")
    with pytest.raises(ChunkError, match=r"more than 2 .*maxPendingChunkedMessage.*'a'"):
        bounds.add(1, 2, chunk_metadata("c", 0, 2, 2), b"c")
    assert _bounds().limits == ChunkLimits()  # a reader without a client: the defaults
    lenient = _bounds(config=SimpleNamespace(chunk_limits=ChunkLimits(1, 60, True)))
    lenient.add(1, 0, chunk_metadata("a", 0, 2, 2), b"a")
    lenient.add(1, 1, chunk_metadata("b", 0, 2, 2), b"b")  # "a" dropped, with a warning
    assert lenient.pending == 1


def test_chunk_limits_refuse_values_that_bound_nothing() -> None:
    with pytest.raises(InvalidArgument, match="max_pending"):
        ChunkLimits(max_pending=0)
    with pytest.raises(InvalidArgument, match="expiry"):
        ChunkLimits(expiry=-1)
    with PulsarClient("pulsar://127.0.0.1:1") as client:  # nothing connects
        assert client.config.chunk_limits == ChunkLimits(100, 60.0, False)
    with PulsarClient("pulsar://127.0.0.1:1", chunk_limits=ChunkLimits(3, 1.5)) as client:
        reader = PartitionReader(client._lookup, parse_topic("t"))
        assert reader._chunks.limits == ChunkLimits(3, 1.5)


# -- end to end: a message whose later chunks never come ---------------------------------


def _topic_with_an_orphan(url: str, topic: str) -> None:
    """``orphan`` (chunk 0 of 3 only), p0, p1, ``whole`` (2 chunks), p2."""
    plain = [(pb.MessageMetadata(), f"p{i}".encode()) for i in range(3)]
    send_prepared(
        url,
        topic,
        [
            (chunk_metadata("orphan", 0, 3, 30), b"o" * 10),
            plain[0],
            plain[1],
            (chunk_metadata("whole", 0, 2, 20), b"w" * 10),
            (chunk_metadata("whole", 1, 2, 20), b"W" * 10),
            plain[2],
        ],
        encrypted=False,
    )


def _read_slowly(client: PulsarClient, topic: str, got: list[bytes]) -> None:
    """Read row by row, pausing 1.5 s after the first: the chunks after it come
    more than the expiry (0.5 s) after the orphan's first chunk."""
    reader = PartitionReader(client._lookup, parse_topic(topic), batch_rows=1)
    for batch in reader:
        got.extend(batch.column("value").to_pylist())
        if len(got) == 1:
            time.sleep(1.5)


def test_a_read_fails_on_a_chunked_message_older_than_the_expiry(pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    _topic_with_an_orphan(url, topic_name)
    got: list[bytes] = []
    with (
        PulsarClient(url, chunk_limits=ChunkLimits(expiry=0.5)) as client,
        pytest.raises(ChunkError, match=r"'orphan'.*expireTimeOfIncompleteChunkedMessageMillis"),
    ):
        _read_slowly(client, topic_name, got)
    assert got[:1] == [b"p0"]  # what came before the expiry was seen


def test_a_read_that_drops_expired_messages_warns_and_ends_without_waiting(
    pulsar_lite, topic_name, caplog
) -> None:
    url = pulsar_lite.service_url
    _topic_with_an_orphan(url, topic_name)
    got: list[bytes] = []
    started = time.monotonic()
    limits = ChunkLimits(expiry=0.5, drop_incomplete=True)
    with (
        caplog.at_level(logging.WARNING, logger="pulsar_spark.client.read.reader"),
        PulsarClient(url, chunk_limits=limits) as client,
    ):
        _read_slowly(client, topic_name, got)
    took = time.monotonic() - started
    assert got == [b"p0", b"p1", b"w" * 10 + b"W" * 10, b"p2"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("'orphan' (first chunk" in w and ":0:-1:-1)" in w for w in warnings), warnings
    # Dropped mid-read: the read did not wait at its end for the orphan's chunks.
    assert took < 20, took


# -- end to end: a message begun at the range's end, never completed --------------------


@pytest.fixture
def orphan_at_the_end(broker, topic_name, monkeypatch: pytest.MonkeyPatch) -> MessageId:
    """p0, p1, then the first chunk of "orphan" (1 of 3) as the topic's last entry; the
    reader waits 0.5 s for chunks. Its first chunk's id."""
    monkeypatch.setattr(PartitionReader, "CHUNK_WAIT", 0.5)
    plain = [(pb.MessageMetadata(), f"p{i}".encode()) for i in range(2)]
    send_prepared(
        broker.service_url, topic_name, [*plain, first_chunk_only("orphan")], encrypted=False
    )
    with PulsarClient(broker.service_url) as client:
        last = client.get_last_message_id(topic_name)
    assert last is not None
    return MessageId(last.ledger, last.entry, -1, -1)


def _values(client: PulsarClient, topic: str, **kwargs) -> list[bytes]:
    return [v for b in client.read_batches(topic, **kwargs) for v in b.column("value").to_pylist()]


def test_a_read_without_a_report_fails_naming_the_message_never_completed(
    broker, topic_name, orphan_at_the_end
) -> None:
    started = time.monotonic()
    with (
        PulsarClient(broker.service_url) as client,
        pytest.raises(ChunkError, match=r"chunked message 'orphan'") as err,
    ):
        _values(client, topic_name)
    assert err.value.message_id == str(orphan_at_the_end)
    assert f"{topic_name}: chunked message 'orphan' (first chunk {orphan_at_the_end})" in str(
        err.value
    )
    assert "no further chunk came for" in str(err.value)
    assert time.monotonic() - started < 15


def test_a_read_reports_the_message_never_completed_and_returns_the_others(
    broker, topic_name, orphan_at_the_end, caplog
) -> None:
    lost: list[IncompleteChunked] = []
    with PulsarClient(broker.service_url) as client:
        assert _values(client, topic_name, chunk_loss=lost.append) == [b"p0", b"p1"]
        assert [(x.topic, x.uuid, x.first_chunk) for x in lost] == [
            (topic_name, "orphan", orphan_at_the_end)
        ]
        assert lost[0].cause.startswith("no further chunk came for")
        # An id scan plans reads: it skips the message with a WARNING.
        with caplog.at_level(logging.WARNING, logger="pulsar_spark.client.read.chunk_bounds"):
            ids = [ref.message_id for ref in client.scan_ids(topic_name)]
        assert len(ids) == 2
        assert f"chunked message 'orphan' (first chunk {orphan_at_the_end})" in caplog.text
    # Dropping, when chosen, drops it with a WARNING (no report, no failure).
    dropping = ChunkLimits(drop_incomplete=True)
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="pulsar_spark.client.read.reader"),
        PulsarClient(broker.service_url, chunk_limits=dropping) as client,
    ):
        assert _values(client, topic_name) == [b"p0", b"p1"]
    assert f"dropping chunked message 'orphan' (first chunk {orphan_at_the_end})" in caplog.text


def test_a_topic_terminated_before_the_last_chunk_loses_the_message(
    apache_pulsar, topic_name
) -> None:
    url = apache_pulsar.service_url
    send_prepared(
        url, topic_name, [(pb.MessageMetadata(), b"p0"), first_chunk_only("cut")], encrypted=False
    )
    apache_pulsar.admin.terminate(topic_name)
    lost: list[IncompleteChunked] = []
    started = time.monotonic()
    with PulsarClient(url) as client:  # CHUNK_WAIT as it is (60 s): the end says it all
        assert _values(client, topic_name, chunk_loss=lost.append) == [b"p0"]
    assert [(x.uuid, x.cause) for x in lost] == [
        ("cut", "the topic was terminated before its last chunk")
    ]
    assert time.monotonic() - started < 30
