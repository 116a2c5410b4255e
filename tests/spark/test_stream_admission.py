"""Admission control and lag of stream reads: maxBytesPerTrigger (with maxRecordsPerTrigger),
minRecordsPerTrigger with maxTriggerDelay, Trigger.AvailableNow, and the messages behind the
latest positions in StreamingQueryProgress. Fast tests of the parsers, the fair share, the
minimum's clock and the backlog count first, then three Spark streams on pulsar-lite."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Generator
from pathlib import Path

import pytest

from pulsar_spark.client.read.sized_scan import SizedRef
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.spark import compat
from pulsar_spark.spark.errors import PulsarOptionError, SparkVersionError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.options.values import duration_ms
from pulsar_spark.spark.stream.admission import MinimumGate, TriggerLimits, admit
from pulsar_spark.spark.stream.lag import Backlog, lag_report
from pulsar_spark.spark.stream.offsets import EARLIEST, order_key
from tests.support.official import produce

needs_admission_control = pytest.mark.skipif(
    compat.spark_version() < (4, 2), reason="admission control needs Spark 4.2+"
)
URL = "pulsar://localhost:6650"


# -- options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [("15m", 900_000), ("30s", 30_000), ("500ms", 500), ("250", 250), (" 2H ", 7_200_000),
     ("1d", 86_400_000), ("3min", 180_000), ("5000us", 5)],
)  # fmt: skip
def test_durations_read_as_spark_reads_them(text: str, ms: int) -> None:
    assert duration_ms("maxTriggerDelay", text) == ms


@pytest.mark.parametrize("text", ["", "15 minutes", "-1s", "1.5s", "0", "1us", "m"])
def test_bad_durations_name_the_option(text: str) -> None:
    with pytest.raises(PulsarOptionError) as info:
        duration_ms("maxTriggerDelay", text)
    assert info.value.option == "maxTriggerDelay"


def _limits(**options: str) -> TriggerLimits:
    return TriggerLimits.of(parse_options({"service.url": URL, "topic": "t", **options}))


def test_limit_options_parse_and_combine() -> None:
    limits = _limits(maxBytesPerTrigger="4096", minOffsetsPerTrigger="5", maxRecordsPerTrigger="9")
    assert limits == TriggerLimits(9, 4096, 5, 900_000)
    assert _limits(minRecordsPerTrigger="5", maxTriggerDelay="30s").max_delay_ms == 30_000
    assert _limits(minRecordsPerTrigger="5", maxRecordsPerTrigger="5").min_rows == 5
    for name in ("maxBytesPerTrigger", "minRecordsPerTrigger"):
        with pytest.raises(PulsarOptionError) as info:
            _limits(**{name: "0"})
        assert info.value.option == name
    with pytest.raises(PulsarOptionError, match="maxRecordsPerTrigger") as info:
        _limits(minOffsetsPerTrigger="10", maxRecordsPerTrigger="9")
    assert info.value.option == "minRecordsPerTrigger"
    with pytest.raises(PulsarOptionError, match="minRecordsPerTrigger") as info:
        _limits(maxTriggerDelay="1m")
    assert info.value.option == "maxTriggerDelay"


@needs_admission_control
def test_the_limit_spark_carries_is_one_marker() -> None:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxRows,
        ReadMinRows,
    )

    assert TriggerLimits().read_limit() == ReadAllAvailable()
    assert TriggerLimits(max_rows=5, max_bytes=9).read_limit() == ReadMaxRows(5)
    assert TriggerLimits(max_bytes=9, min_rows=2).read_limit() == ReadMaxBytes(9)
    assert TriggerLimits(min_rows=2).read_limit() == ReadMinRows(2)


@pytest.mark.parametrize(
    "option", ["maxRecordsPerTrigger", "maxBytesPerTrigger", "minRecordsPerTrigger"]
)
def test_an_older_spark_refuses_every_limit_naming_the_version(monkeypatch, option) -> None:
    monkeypatch.setattr(compat, "spark_version", lambda: (4, 1))
    with pytest.raises(SparkVersionError, match=rf"'{option}'.*needs Spark 4\.2 or newer"):
        _limits(**{option: "10"})
    _limits()  # no limit: nothing needs 4.2


# -- the fair share ------------------------------------------------------------------------


def _partitions(sizes: dict[str, list[int]]) -> dict[str, list[SizedRef]]:
    return {
        topic: [SizedRef(MessageId(1, i, p, -1), 0, size) for i, size in enumerate(values)]
        for p, (topic, values) in enumerate(sorted(sizes.items()))
    }


def _fake_scan(parts: dict[str, list[SizedRef]]):
    def scan(topic: str, start: Position, end: Position, limit: int | None):
        count = 0
        for ref in parts[topic]:
            key = order_key(Position.after(ref.message_id))
            if order_key(start) < key <= order_key(end):
                if count == limit:
                    return
                count += 1
                yield ref

    return scan


def _latest(parts: dict[str, list[SizedRef]]) -> dict[str, Position]:
    return {topic: Position.after(refs[-1].message_id) for topic, refs in parts.items()}


def _taken(parts, start, ends) -> dict[str, list[int]]:
    got = {}
    for topic, refs in parts.items():
        low, high = order_key(start.get(topic, EARLIEST)), order_key(ends[topic])
        got[topic] = [r.size for r in refs if low < order_key(Position.after(r.message_id)) <= high]
    return got


def _drain(parts, max_rows, max_bytes) -> list[dict[str, list[int]]]:
    """Every micro-batch admit() makes until nothing is left."""
    scan, latest, start, batches = _fake_scan(parts), _latest(parts), {}, []
    while start != latest:
        ends, taken = admit(scan, start, latest, max_rows, max_bytes)
        got = _taken(parts, start, ends)
        assert {t: len(v) for t, v in got.items()} == taken
        batches.append(got)
        start = ends
    return batches


def test_rows_are_shared_fairly_and_what_one_cannot_use_goes_to_the_others() -> None:
    parts = _partitions({"a": [1] * 40, "b": [1] * 3, "c": [1] * 40})
    _, taken = admit(_fake_scan(parts), {}, _latest(parts), 30, None)
    assert taken == {"a": 14, "b": 3, "c": 13}
    batches = _drain(parts, 30, None)
    assert [sum(len(v) for v in b.values()) for b in batches] == [30, 30, 23]


def test_bytes_and_rows_both_bound_a_micro_batch() -> None:
    sizes = {"a": [100 + 37 * i % 400 for i in range(60)], "b": [250] * 30, "c": [10] * 5}
    parts = _partitions(sizes)
    for max_rows, max_bytes in ((None, 2000), (12, 2000), (40, 1000)):
        batches = _drain(parts, max_rows, max_bytes)
        for batch in batches:
            assert sum(sum(v) for v in batch.values()) <= max_bytes
            assert max_rows is None or sum(len(v) for v in batch.values()) <= max_rows
        for topic, values in sizes.items():  # every message once, in order
            assert [s for b in batches for s in b[topic]] == values
    first = _drain(parts, None, 2000)[0]
    assert all(first[t] for t in sizes)  # every partition has a share of the first


def test_a_message_larger_than_the_budget_goes_alone() -> None:
    parts = _partitions({"a": [50, 5000, 50], "b": [60] * 4})
    batches = _drain(parts, None, 200)
    assert [5000] in [b["a"] for b in batches]
    alone = next(b for b in batches if b["a"] == [5000])
    assert alone["b"] == []
    assert [s for b in batches for s in b["a"]] == [50, 5000, 50]
    assert [s for b in batches for s in b["b"]] == [60] * 4
    for batch in batches:
        total = sum(sum(v) for v in batch.values())
        assert total <= 200 or sum(len(v) for v in batch.values()) == 1


# -- the minimum's clock and the backlog ---------------------------------------------------


def test_the_minimum_holds_until_enough_or_the_delay() -> None:
    now = [100.0]
    gate = MinimumGate(10, 5_000, clock=lambda: now[0])
    assert not gate.hold(0)  # the first trigger of a query is not held (as Kafka's)
    now[0] += 1
    assert gate.hold(9)
    assert not gate.hold(10)  # enough: let through, the wait starts again
    now[0] += 4.9
    assert gate.hold(3)
    now[0] += 0.1
    assert not gate.hold(3)  # 5 s since the last trigger let through
    assert gate.hold(3)


def _fake_ids(parts: dict[str, list[SizedRef]], calls: list[int]):
    scan = _fake_scan(parts)

    def ids(topic: str, start: Position, end: Position, limit: int) -> Generator[MessageId]:
        for ref in scan(topic, start, end, limit):
            calls.append(1)
            yield ref.message_id

    return ids


def test_the_backlog_is_counted_once_and_bounded_per_trigger() -> None:
    parts = _partitions({"a": [1] * 25})
    latest, calls = _latest(parts)["a"], []
    backlog = Backlog(_fake_ids(parts, calls), cap=20, floor=3)
    assert (backlog.share(2), backlog.share(10), backlog.share(0)) == (10, 3, 20)
    assert backlog.behind("a", EARLIEST, latest, 10) == (10, False)  # at least 10
    assert backlog.behind("a", EARLIEST, latest, 10) == (20, False)
    assert backlog.behind("a", EARLIEST, latest, 10) == (25, True)
    assert len(calls) == 25
    end = Position.after(parts["a"][6].message_id)
    backlog.moved("a", EARLIEST, end, 7)
    assert backlog.behind("a", end, latest, 10) == (18, True)
    assert len(calls) == 25  # nothing scanned again
    parts["a"] += [SizedRef(MessageId(1, 25 + i, 0, -1), 0, 1) for i in range(4)]
    assert backlog.behind("a", end, _latest(parts)["a"], 10) == (22, True)
    assert len(calls) == 29  # only what arrived
    other = Position.after(parts["a"][2].message_id)  # not where the count was: anew
    assert backlog.behind("a", other, _latest(parts)["a"], 10) == (10, False)


def test_the_report_has_kafkas_figures_and_says_when_they_are_lower_bounds() -> None:
    from pulsar_spark.spark.stream.lag import Behind

    report = lag_report({"p0": Behind(4, True), "p1": Behind(0, True), "p2": Behind(11, False)})
    assert report["avgOffsetsBehindLatest"] == 5.0
    assert (report["maxOffsetsBehindLatest"], report["minOffsetsBehindLatest"]) == (11, 0)
    assert report["totalOffsetsBehindLatest"] == 15
    assert report["offsetsBehindLatest"] == {"p0": 4, "p1": 0, "p2": 11}
    assert report["exact"] is False and report["atLeast"] == ["p2"]
    assert lag_report({})["maxOffsetsBehindLatest"] == 0


# -- the reader as Spark drives it, without a session -------------------------------------


def _reader(url: str, **options: str):
    from pulsar_spark.columnar import ROW_SCHEMA
    from pulsar_spark.spark.read_schema import ReadSchema
    from pulsar_spark.spark.spark_types import spark_schema
    from pulsar_spark.spark.stream.reader import PulsarStreamReader

    parsed = parse_options({"service.url": url, "startingOffsets": "earliest", **options})
    read = ReadSchema(None, "raw", None, dead_letter=False, arrow=ROW_SCHEMA)
    return PulsarStreamReader(parsed.for_stream_read(), read, spark_schema(ROW_SCHEMA))


def _send(url: str, topic: str, count: int) -> None:
    from pulsar_spark.client import PulsarClient

    with PulsarClient(url) as client, client.create_producer(topic, batching=False) as producer:
        for i in range(count):
            producer.send(b"v%d" % i)
        producer.flush()


@needs_admission_control
def test_a_held_trigger_returns_its_start_and_once_or_available_now_are_not_held(
    pulsar_lite, topic_name
) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMinRows

    url = pulsar_lite.service_url
    _send(url, topic_name, 3)
    reader = _reader(url, topic=topic_name, minOffsetsPerTrigger="5", maxTriggerDelay="1h")
    try:
        assert reader.getDefaultReadLimit() == ReadMinRows(5)
        start = reader.initialOffset()
        first = reader.latestOffset(start, ReadMinRows(5))  # the first trigger: not held
        assert first != start
        assert reader.reportLatestOffset()["lag"]["maxOffsetsBehindLatest"] == 0
        _send(url, topic_name, 2)
        assert reader.latestOffset(first, ReadMinRows(5)) == first  # 2 < 5: held, as given
        report = reader.reportLatestOffset()
        assert report["lag"]["offsetsBehindLatest"] == {_topic_key(report): 2}
        assert report["lag"]["exact"] is True
        # The positions, the lag, and the durable subscription holding them.
        assert set(report) == {_topic_key(report), "lag", "subscription"}
        assert report["subscription"] == reader.subscription_name
        # Trigger.Once passes ReadAllAvailable: everything, whatever the options.
        assert reader.latestOffset(first, ReadAllAvailable()) != first
        reader.prepareForTriggerAvailableNow()  # AvailableNow: never held
        last = reader.latestOffset(first, ReadMinRows(5))
        assert last != first
        assert reader.reportLatestOffset()["lag"]["totalOffsetsBehindLatest"] == 0
    finally:
        reader.stop()


def _topic_key(report: dict) -> str:
    return next(key for key in report if key != "lag")


# -- Spark -------------------------------------------------------------------------------


def _stream(spark, url: str, **options: str):
    reader = spark.readStream.format("pulsar").option("service.url", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _collect_into(batches: list):
    def collect(frame, batch_id: int) -> None:
        rows = frame.select("value", "partition", "messageId").collect()
        batches.append((batch_id, time.monotonic(), [r.asDict() for r in rows]))

    return collect


def _available_now(df, checkpoint: Path, batches: list):
    writer = df.writeStream.option("checkpointLocation", str(checkpoint))
    query = writer.trigger(availableNow=True).foreachBatch(_collect_into(batches)).start()
    query.awaitTermination(240)
    assert not query.isActive, "the query did not finish in time"
    if query.exception() is not None:
        raise query.exception()
    return query


@needs_admission_control
def test_bytes_and_rows_bound_each_micro_batch_and_available_now_ignores_the_minimum(
    spark, pulsar_lite_partitioned, topic_name, tmp_path
) -> None:
    url = pulsar_lite_partitioned.service_url
    sent = [b"%04d:" % i + b"x" * (80 + (i * 131) % 900) for i in range(100)]
    sent[70] = b"big:" + b"y" * 20000  # larger than the whole budget: a micro-batch of its own
    produce(url, topic_name, sent, batching_max_messages=8, compression="LZ4")
    df = _stream(
        spark, url, topic=topic_name, startingOffsets="earliest", maxBytesPerTrigger="12000",
        maxRecordsPerTrigger="25", minOffsetsPerTrigger="25", maxTriggerDelay="1h",
    )  # fmt: skip
    batches: list = []
    _available_now(df, tmp_path / "c", batches)
    sizes = [[len(r["value"]) for r in rows] for _, _, rows in batches if rows]
    for batch in sizes:
        assert len(batch) <= 25, sizes
        assert sum(batch) <= 12000 or len(batch) == 1, sizes
    assert [20004] in sizes
    # Under Trigger.AvailableNow the minimum does not hold the tail (fewer than 25 left).
    got = [r["value"] for _, _, rows in batches for r in rows]
    assert sorted(got) == sorted(sent)
    ids = [r["messageId"] for _, _, rows in batches for r in rows]
    assert len(set(ids)) == len(ids) == 100
    assert len(sizes) >= 100 * 500 // 12000


def _wait_for(batches: list, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while sum(1 for b in batches if b[2]) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sum(1 for b in batches if b[2]) >= count, batches


def _started(query, batch_id: int) -> float:
    """When the trigger that planned micro-batch ``batch_id`` started (epoch seconds): it
    called latestOffset, where the reader decides to hold or not, just after."""
    deadline = time.monotonic() + 30  # a micro-batch's progress comes once it is done
    while True:
        found = [p for p in query.recentProgress if p.batchId == batch_id and p.numInputRows]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert found, (batch_id, [p.batchId for p in query.recentProgress])
    return dt.datetime.fromisoformat(found[-1].timestamp.replace("Z", "+00:00")).timestamp()


@needs_admission_control
def test_a_micro_batch_waits_for_the_minimum_or_the_delay(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, [b"a%d" % i for i in range(3)])
    df = _stream(
        spark, url, topic=topic_name, startingOffsets="earliest", minRecordsPerTrigger="10",
        maxTriggerDelay="15s",
    )  # fmt: skip
    batches: list = []
    writer = df.writeStream.option("checkpointLocation", str(tmp_path / "c"))
    query = writer.foreachBatch(_collect_into(batches)).start()
    try:
        _wait_for(batches, 1, 120)  # the first trigger is not held (Kafka's way)
        assert [r["value"] for r in batches[-1][2]] == [b"a%d" % i for i in range(3)]
        produce(url, topic_name, [b"b0", b"b1"])
        _wait_for(batches, 2, 90)  # 2 < 10: only the delay lets them through
        assert [r["value"] for r in batches[-1][2]] == [b"b0", b"b1"]
        held = _started(query, batches[-1][0]) - _started(query, batches[0][0])
        assert held >= 13, f"held {held:.1f} s, maxTriggerDelay is 15 s"
        produce(url, topic_name, [b"c%d" % i for i in range(4)])
        time.sleep(3)
        assert sum(1 for b in batches if b[2]) == 2, "4 < 10 messages: held"
        produce(url, topic_name, [b"d%d" % i for i in range(6)])
        _wait_for(batches, 3, 15)
        assert sorted(r["value"] for r in batches[-1][2]) == sorted(
            [b"c%d" % i for i in range(4)] + [b"d%d" % i for i in range(6)]
        )
        soon = _started(query, batches[-1][0]) - _started(query, batches[1][0])
        assert soon < 14, f"10 messages there: let through after {soon:.1f} s, not the delay"
    finally:
        query.stop()
    assert query.exception() is None


@needs_admission_control
def test_lag_per_partition_and_in_total_shows_in_progress(
    spark, pulsar_lite_partitioned, topic_name, tmp_path
) -> None:
    url = pulsar_lite_partitioned.service_url
    produce(url, topic_name, [b"m%03d" % i for i in range(130)], batching_max_messages=6)
    df = _stream(
        spark, url, topic=topic_name, startingOffsets="earliest", maxRecordsPerTrigger="40"
    )
    batches: list = []
    query = _available_now(df, tmp_path / "c", batches)
    rows = {batch_id: got for batch_id, _, got in batches}
    total: dict[int, int] = {}
    for got in rows.values():
        for r in got:
            total[r["partition"]] = total.get(r["partition"], 0) + 1
    assert sum(total.values()) == 130 and len(total) == 4
    progress = {p.batchId: p for p in query.recentProgress if p.numInputRows}
    assert sorted(progress) == sorted(b for b, got in rows.items() if got)
    read: dict[int, int] = dict.fromkeys(total, 0)
    for batch_id in sorted(progress):
        for r in rows[batch_id]:
            read[r["partition"]] += 1
        lag = json.loads(progress[batch_id].sources[0].latestOffset)["lag"]
        per = {int(t.rsplit("-", 1)[1]): n for t, n in lag["offsetsBehindLatest"].items()}
        expected = {p: total[p] - read[p] for p in total}
        assert per == expected, (batch_id, lag)
        assert lag["exact"] is True and lag["atLeast"] == []
        assert lag["totalOffsetsBehindLatest"] == sum(expected.values())
        assert lag["maxOffsetsBehindLatest"] == max(expected.values())
        assert lag["minOffsetsBehindLatest"] == min(expected.values())
        assert lag["avgOffsetsBehindLatest"] == pytest.approx(sum(expected.values()) / 4)
    assert len(progress) >= 4
    last = json.loads(query.lastProgress["sources"][0]["latestOffset"])
    assert last["lag"]["maxOffsetsBehindLatest"] == 0 and last["lag"]["exact"] is True


# -- encrypted topics -----------------------------------------------------------------


@pytest.fixture(scope="module")
def rsa_reader_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(public, private) PEM files of one RSA-2048 key."""
    from tests.support.keys import KeyPair

    pair = KeyPair(tmp_path_factory.mktemp("admission-keys"), "app")
    return pair.pub, pair.priv


def _produce_encrypted(url: str, topic: str, values: list[bytes], files, **options) -> None:
    import pulsar

    reader = pulsar.CryptoKeyReader(*(str(f) for f in files))
    produce(url, topic, values, encryption_key="app", crypto_key_reader=reader, **options)


def test_sized_scans_count_an_encrypted_payloads_plaintext_without_the_key(
    pulsar_lite, topic_name, rsa_reader_files
) -> None:
    """The id scan cannot open an encrypted batch (no key), but its metadata keeps the
    plaintext's size in clear: that is what is counted, not the (compressed) ciphertext."""
    from pulsar_spark.client import PulsarClient

    url = pulsar_lite.service_url
    batch = [b"%02d:" % i + b"x" * 500 for i in range(8)]  # LZ4 makes it ~100 bytes
    _produce_encrypted(url, topic_name, batch, rsa_reader_files, compression="LZ4",
                       batching_max_messages=8)  # fmt: skip
    single = [b"s" * 3000, b"t" * 700]
    _produce_encrypted(url, topic_name, single[:1], rsa_reader_files, batching=False)
    _produce_encrypted(url, topic_name, single[1:], rsa_reader_files, batching=False,
                       compression="ZSTD")  # fmt: skip
    with PulsarClient(url) as client:
        refs = list(client.scan_sizes(topic_name))
    sizes = [r.size for r in refs]
    assert len(refs) == 10 and sizes[1:8] == [0] * 7, sizes
    # A batch: its values and their per-item metadata (a few bytes each), decompressed.
    assert sum(map(len, batch)) <= sizes[0] <= sum(map(len, batch)) + 8 * 32, sizes
    assert sizes[8:] == [3000, 700], sizes  # single messages: exactly the value


@needs_admission_control
def test_bytes_bound_micro_batches_of_an_encrypted_topic_as_of_a_plain_one(
    spark, pulsar_lite, topic_name, tmp_path, rsa_reader_files
) -> None:
    url = pulsar_lite.service_url
    sent = [b"%04d:" % i + b"x" * (300 + (i * 131) % 600) for i in range(96)]
    # Compressible: each batch of 8 (~5 KB of values) is ~200 bytes of ciphertext.
    _produce_encrypted(url, topic_name, sent, rsa_reader_files, compression="LZ4",
                       batching_max_messages=8)  # fmt: skip
    big = b"big:" + b"y" * 20000  # larger than the whole budget: a micro-batch of its own
    _produce_encrypted(url, topic_name, [big], rsa_reader_files, batching=False,
                       compression="LZ4")  # fmt: skip
    df = _stream(
        spark, url, topic=topic_name, startingOffsets="earliest", maxBytesPerTrigger="12000",
        privateKey=rsa_reader_files[1].as_uri(),
    )  # fmt: skip
    batches: list = []
    _available_now(df, tmp_path / "c", batches)
    sizes = [[len(r["value"]) for r in rows] for _, _, rows in batches if rows]
    for got in sizes:
        # within the budget, or one encrypted batch (never split: it is opened whole)
        assert sum(got) <= 12000 or len(got) <= 8, sizes
    assert [20004] in sizes
    got = [r["value"] for _, _, rows in batches for r in rows]
    assert sorted(got) == sorted([*sent, big])
    # ~60 KB of values in 12 KB budgets: at least 5 micro-batches, as for a plain topic
    # (counting ciphertext, ~2.4 KB for the lot, they all went in one).
    assert len(sizes) >= sum(map(len, sent)) // 12000 + 1, sizes
