"""StreamNative's offsets JSON (message ids as Java's toByteArray() bytes) and per-topic
startingTime/endingTime JSON, through real reads.

The ids are the official client's ``MessageId.serialize()`` bytes (what Java's
``toByteArray()`` gives, and what StreamNative's ``JsonUtils.topicOffsets`` writes, as
signed bytes). Every topic is written once per broker kind and shared by the tests.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pulsar_spark.protocol import MessageId
from pulsar_spark.protocol.ids.serialized import id_to_bytes
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from tests.support.official import official_client

pulsar: Any = pytest.importorskip("pulsar")

UTC = dt.timezone.utc
#: What topic ``a`` holds, in order: single messages m0..m5, one batch entry b0..b2, n0, n1.
A_VALUES = [*(f"m{i}" for i in range(6)), "b0", "b1", "b2", "n0", "n1"]
C_VALUES = ["c0", "c1", "c2"]


@dataclass
class Topics:
    """Two topics on one broker: ``a`` (A_VALUES) and ``c`` (C_VALUES)."""

    url: str
    a: str
    c: str
    ids: dict[str, Any]  # value -> the official client's MessageId
    times: dict[str, int]  # value -> publish time (ms)

    def sn(self, value: str) -> list[int]:
        """The id of ``value`` as StreamNative's JSON holds it: signed bytes."""
        return signed(self.ids[value].serialize())


def signed(raw: bytes) -> list[int]:
    return [b - 256 if b > 127 else b for b in raw]


def _write(url: str) -> Topics:
    suffix = secrets.token_hex(4)
    a = f"persistent://public/default/sn-offsets-a-{suffix}"
    c = f"persistent://public/default/sn-offsets-c-{suffix}"
    ids: dict[str, Any] = {}
    with official_client(url) as client:
        single = client.create_producer(a, batching_enabled=False)
        batched = client.create_producer(
            a, batching_enabled=True, batching_max_messages=3, batching_max_publish_delay_ms=5000
        )
        for value in A_VALUES[:6]:
            ids[value] = single.send(value.encode())
            time.sleep(0.005)  # distinct publish times
        for value in A_VALUES[6:9]:
            batched.send_async(value.encode(), lambda _r, mid, v=value: ids.__setitem__(v, mid))
        batched.flush()
        for value in A_VALUES[9:]:
            time.sleep(0.005)
            ids[value] = single.send(value.encode())
        other = client.create_producer(c, batching_enabled=False)
        for value in C_VALUES:
            time.sleep(0.005)  # distinct publish times: the tests start at c1's or c2's
            ids[value] = other.send(value.encode())
    assert len({(m.ledger_id(), m.entry_id()) for v, m in ids.items() if v[0] == "b"}) == 1
    return Topics(url, a, c, ids, {})


@pytest.fixture(scope="module", params=["lite", "apache"])
def topics(request: pytest.FixtureRequest, spark) -> Topics:
    broker = request.getfixturevalue("pulsar_lite" if request.param == "lite" else "apache_pulsar")
    written = _write(broker.service_url)
    rows = (
        spark.read.format("pulsar")
        .option("service.url", written.url)
        .option("topics", f"{written.a},{written.c}")
        .load()
        .select("value", "publishTime")
        .collect()
    )
    written.times = {
        bytes(r.value).decode(): int(r.publishTime.replace(tzinfo=UTC).timestamp() * 1000)
        for r in rows
    }
    assert sorted(written.times) == sorted(A_VALUES + C_VALUES)
    return written


@pytest.fixture
def lite_topics(topics: Topics) -> Topics:
    """The shared topics, on pulsar-lite only (tests that show one thing once: marked
    :data:`ON_LITE`)."""
    return topics


#: Tests that show one thing once, on pulsar-lite: ``topics`` takes only that parameter.
ON_LITE = pytest.mark.parametrize("topics", ["lite"], indirect=True)


def _values(spark, t: Topics, **options: str) -> list[str]:
    reader = spark.read.format("pulsar").option("service.url", t.url)
    reader = reader.option("topics", f"{t.a},{t.c}")
    for name, value in options.items():
        reader = reader.option(name, value)
    rows = reader.load().orderBy("topic", "publishTime", "messageId").select("value").collect()
    return [bytes(r.value).decode() for r in rows]


def _offsets(mapping: dict[str, object]) -> str:
    return json.dumps(mapping)


# -- batch reads: StreamNative's offsets ---------------------------------------------------


def test_a_batch_reads_between_streamnative_ids_both_included(spark, topics: Topics) -> None:
    t = topics
    got = _values(
        spark,
        t,
        startingOffsets=_offsets({t.a: t.sn("m2"), t.c: t.sn("c1")}),
        endingOffsets=_offsets({t.a: t.sn("n0"), t.c: t.sn("c1")}),
    )
    # As StreamNative reads it: the start's and the end's messages are both read.
    assert got == ["m2", "m3", "m4", "m5", "b0", "b1", "b2", "n0", "c1"]


@ON_LITE
def test_streamnative_ids_in_a_batch_name_its_whole_entry(spark, lite_topics: Topics) -> None:
    t = lite_topics
    # StreamNative positions are entries: a start in a batch reads it from its first
    # message, an end in a batch to its last.
    got = _values(
        spark,
        t,
        startingOffsets=_offsets({t.a: t.sn("b1")}),
        endingOffsets=_offsets({t.a: t.sn("b1"), t.c: t.sn("c0")}),
    )
    assert got == ["b0", "b1", "b2", "c0"]


@ON_LITE
def test_streamnative_sentinels_and_readable_ids_mix(spark, lite_topics: Topics) -> None:
    t = lite_topics
    earliest = signed(pulsar.MessageId.earliest.serialize())
    latest = signed(pulsar.MessageId.latest.serialize())
    readable = "{}:{}:{}:{}".format(t.ids["n0"].ledger_id(), t.ids["n0"].entry_id(), -1, -1)
    got = _values(
        spark,
        t,
        startingOffsets=_offsets({t.a: readable, t.c: earliest}),
        endingOffsets=_offsets({t.a: latest}),  # c: latest, the default
    )
    assert got == ["n0", "n1", *C_VALUES]


def test_streamnative_partition_keys(spark, apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    apache_pulsar.admin.create_partitioned_topic(topic_name, 2)
    ids = {}
    with official_client(url) as client:
        for partition in (0, 1):
            producer = client.create_producer(
                f"{topic_name}-partition-{partition}", batching_enabled=False
            )
            for i in range(3):
                ids[f"p{partition}-{i}"] = producer.send(f"p{partition}-{i}".encode())

    def read(**options: str) -> list[str]:
        reader = spark.read.format("pulsar").option("service.url", url)
        reader = reader.option("topic", topic_name)
        for name, value in options.items():
            reader = reader.option(name, value)
        rows = reader.load().orderBy("partition", "publishTime").select("value").collect()
        return [bytes(r.value).decode() for r in rows]

    # StreamNative's keys are the partitions' full names; a topic's name with an id
    # that names its partition (as a partitioned producer's ids do) works too.
    start = signed(ids["p1-1"].serialize())
    by_partition = read(startingOffsets=_offsets({f"{topic_name}-partition-1": start}))
    assert by_partition == ["p0-0", "p0-1", "p0-2", "p1-1", "p1-2"]
    first = ids["p0-0"]
    end = signed(pulsar.MessageId(0, first.ledger_id(), first.entry_id(), -1).serialize())
    assert read(endingOffsets=_offsets({topic_name: end})) == ["p0-0", "p1-0", "p1-1", "p1-2"]


# -- per-topic publish times -----------------------------------------------------------------


@ON_LITE
def test_starting_and_ending_time_per_topic(spark, lite_topics: Topics) -> None:
    t = lite_topics
    got = _values(
        spark,
        t,
        startingTime=json.dumps({t.a: t.times["m4"]}),  # c left out: from its first message
        endingTime=json.dumps({t.a: t.times["n1"], t.c: -2}),
    )
    assert got == ["m4", "m5", "b0", "b1", "b2", "n0", *C_VALUES]


# -- streams -----------------------------------------------------------------------------------


def _stream_values(spark, t: Topics, checkpoint: Path, **options: str) -> list[str]:
    reader = spark.readStream.format("pulsar").option("service.url", t.url)
    reader = reader.option("topics", f"{t.a},{t.c}")
    for name, value in options.items():
        reader = reader.option(name, value)
    batches: list[list[Any]] = []

    def collect(frame, _batch_id: int) -> None:
        batches.append(frame.orderBy("topic", "publishTime", "messageId").collect())

    query = (
        reader.load()
        .writeStream.option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .foreachBatch(collect)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive, "the query did not finish in time"
    if query.exception() is not None:
        raise query.exception()
    return [bytes(r.value).decode() for rows in batches for r in rows]


@ON_LITE
def test_a_stream_starts_at_a_streamnative_id_included(
    spark, lite_topics: Topics, tmp_path: Path
) -> None:
    t = lite_topics
    got = _stream_values(
        spark,
        t,
        tmp_path / "c",
        startingOffsets=_offsets({t.a: t.sn("m5")}),  # c left out: a stream's latest
        subscriptionMode="nonDurable",
    )
    assert got == ["m5", "b0", "b1", "b2", "n0", "n1"]


@ON_LITE
def test_a_stream_starts_at_a_time_per_topic(spark, lite_topics: Topics, tmp_path: Path) -> None:
    t = lite_topics
    got = _stream_values(
        spark,
        t,
        tmp_path / "c",
        startingTime=json.dumps({t.c: t.times["c2"]}),  # a left out: a stream's latest
        subscriptionMode="nonDurable",
    )
    assert got == ["c2"]


# -- errors ---------------------------------------------------------------------------------


@ON_LITE
def test_a_key_the_read_does_not_include_is_named(spark, lite_topics: Topics) -> None:
    t = lite_topics
    # (startingOffsets' readable keys go through the same check: test_options.py)
    other = "persistent://public/default/not-read"
    with pytest.raises(Exception, match=r"(?s)pulsar option 'startingTime'.*not-read.*does not"):
        _values(spark, t, startingTime=json.dumps({other: 1}))


URL = "pulsar://localhost:6650"
EARLIEST = signed(pulsar.MessageId.earliest.serialize())


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("startingOffsets", {"t": [1, 2]}, r"'t': 2 bytes that are not a serialized MessageIdData"),
        ("startingOffsets", {"t": [8, 12]}, r"'t': .*entryId missing"),
        ("startingOffsets", {"t": [8, 300]}, r"'t': a message id's bytes are a list of integers"),
        ("startingOffsets", {"t": []}, r"'t': a message id's bytes"),
        ("startingOffsets", {"t": {"0": ["8"]}}, r"'t' partition 0: a message id's bytes"),
        ("endingOffsets", {"t": EARLIEST}, r"'t': an ending position cannot be MessageId.earliest"),
        ("startingTime", {"t": "soon"}, r"'t': expected epoch milliseconds or an ISO-8601"),
        ("startingTime", {"t": [1]}, r"'t': a time is epoch milliseconds"),
        ("endingTime", {"t-partition-1": -1}, r"'t-partition-1': an ending time cannot be"),
        ("startingOffsets", [], r"the JSON must be a non-empty object keyed by topic"),
    ],
)
def test_bad_json_names_the_option_the_topic_and_the_fault(
    option: str, value: object, says: str
) -> None:
    with pytest.raises(PulsarOptionError, match=rf"pulsar option '{option}': {says}"):
        parse_options({"service.url": URL, "topic": "t", option: json.dumps(value)})


def test_json_values_parse_as_streamnative_writes_them() -> None:
    mid = pulsar.MessageId(2, 12, 3, 1)  # partition 2, batch index 1
    raw = signed(mid.serialize())
    options = parse_options(
        {
            "service.url": URL,
            "topic": "t",
            "startingOffsets": json.dumps({"t-partition-2": raw, "u": "4:5"}),
            "endingTime": json.dumps({"t": 1_700_000_000_000, "u": {"1": "2023-11-14T22:13:20Z"}}),
        }
    )
    start = dict(options.starting_offsets.by_partition)
    assert str(start[("persistent://public/default/t", 2)]) == "from:12:3:2:-1"
    assert options.ending_time is not None
    assert [str(p) for _, p in options.ending_time.by_topic] == ["time:1700000000000"]
    assert [str(p) for _, p in options.ending_time.by_partition] == ["time:1700000000000"]
    end = parse_options({"service.url": URL, "topic": "t", "endingOffsets": json.dumps({"t": raw})})
    assert [str(p) for _, p in end.ending_offsets.by_topic] == ["after:12:3:2:-1"]
    stream = parse_options(
        {"service.url": URL, "topic": "t", "startingTime": json.dumps({"t": 5})}
    ).for_stream_read()
    assert stream.starting_time is not None and str(stream.starting_time.default) == "latest"


def test_a_chunked_messages_id_starts_at_its_first_chunk() -> None:
    raw = signed(id_to_bytes(MessageId(7, 9), first_chunk=MessageId(7, 6)))
    given = {"service.url": URL, "topic": "t"}
    start = parse_options({**given, "startingOffsets": json.dumps({"t": raw})})
    end = parse_options({**given, "endingOffsets": json.dumps({"t": raw})})
    assert str(start.starting_offsets.by_topic[0][1]) == "from:7:6:-1:-1"
    assert str(end.ending_offsets.by_topic[0][1]) == "after:7:9:-1:-1"


def test_single_times_take_streamnatives_sentinels() -> None:
    given = {"service.url": URL, "topic": "t"}
    start = parse_options({**given, "startingTime": "-2"}).starting_time
    assert start is not None and str(start.default) == "latest"
    start = parse_options({**given, "startingTime": "-1"}).starting_time
    assert start is not None and str(start.default) == "earliest"
    with pytest.raises(PulsarOptionError, match="'endingTime': an ending time cannot be earliest"):
        parse_options({**given, "endingTime": "-1"})
    with pytest.raises(PulsarOptionError, match="'endingTime': is before startingTime"):
        parse_options({**given, "startingTime": "2000", "endingTime": "1000"})
