"""``readCompacted``: batch and stream reads of a topic's compacted view on Apache Pulsar
after a compaction triggered through the admin API (the latest value per key up to the
compaction horizon, then every message after it); every message without the option;
refused on pulsar-lite, which has no compaction; bad values name the option."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.spark.compat import spark_version
from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from tests.client.test_compacted_reads import compact
from tests.support.official import produce
from tests.support.spark import available_now_values

URL = "pulsar://localhost:6650"


def test_the_option_and_its_java_spelling_reach_the_client() -> None:
    for key in ("readCompacted", "pulsar.reader.readCompacted", "READCOMPACTED"):
        parsed = parse_options({"service.url": URL, "topic": "t", key: "true"})
        assert parsed.read_compacted is True
        with open_client(parsed) as client:
            assert client.config.read_compacted is True
    assert parse_options({"service.url": URL, "topic": "t"}).read_compacted is False
    with pytest.raises(PulsarOptionError) as info:
        parse_options({"service.url": URL, "topic": "t", "readCompacted": "yes please"})
    assert info.value.option == "readCompacted"


def _history() -> list:
    """Four keys, three values each, interleaved, and a keyless message: compaction
    keeps each key's last value and drops the keyless one."""
    out: list = [{"key": f"k{k}", "value": f"k{k}-v{r}"} for r in range(3) for k in range(4)]
    return [*out, b"no-key"]


AFTER = [{"key": "k0", "value": "k0-after"}, {"key": "k7", "value": "k7-after"}, b"no-key-after"]
COMPACTED = [*(f"k{k}-v2" for k in range(4)), "k0-after", "k7-after", "no-key-after"]


@pytest.fixture
def compacted_topic(apache_pulsar, topic_name) -> str:
    url = apache_pulsar.service_url
    produce(url, topic_name, _history(), batching=True, batching_max_messages=5)
    compact(apache_pulsar.admin, topic_name)
    produce(url, topic_name, AFTER, batching=False)
    return topic_name


def _values(df) -> list[str]:
    return [r.value for r in df.selectExpr("cast(value as string) value").collect()]


def test_batch_reads_of_the_compacted_view(spark, apache_pulsar, compacted_topic) -> None:
    options = {"service.url": apache_pulsar.service_url, "topic": compacted_topic}
    compacted = spark.read.format("pulsar").options(**options, readCompacted="true").load()
    assert sorted(_values(compacted)) == sorted(COMPACTED)
    # In topic order: each key's latest, then what came after the horizon.
    ordered = compacted.selectExpr("cast(value as string) value", "publishTime").collect()
    assert [r.value for r in sorted(ordered, key=lambda r: r.publishTime)][-3:] == COMPACTED[-3:]
    everything = spark.read.format("pulsar").options(**options).load()
    assert len(_values(everything)) == len(_history()) + len(AFTER)


def _stream(spark, options: dict[str, str], checkpoint: Path, **extra: str) -> list[list[str]]:
    return available_now_values(spark, {**options, **extra}, checkpoint)


def test_streams_of_the_compacted_view(spark, apache_pulsar, compacted_topic, tmp_path) -> None:
    url = apache_pulsar.service_url
    options = {
        "service.url": url,
        "topic": compacted_topic,
        "startingOffsets": "earliest",
        "readCompacted": "true",
    }
    batches = _stream(spark, options, tmp_path / "one")
    assert sorted(v for b in batches for v in b) == sorted(COMPACTED)
    # Messages produced later come on the next run, from the checkpoint: once each.
    produce(url, compacted_topic, [{"key": "k1", "value": "k1-later"}], batching=False)
    later = _stream(spark, options, tmp_path / "one")
    assert [v for b in later for v in b] == ["k1-later"]
    if spark_version() >= (4, 2):  # admission control counts what a compacted read returns
        small = _stream(spark, options, tmp_path / "two", maxRecordsPerTrigger="3")
        assert sorted(v for b in small for v in b) == sorted([*COMPACTED, "k1-later"])
        assert all(len(b) <= 3 for b in small) and len(small) == 3
    plain = {k: v for k, v in options.items() if k != "readCompacted"}
    everything = _stream(spark, plain, tmp_path / "all")
    assert sum(len(b) for b in everything) == len(_history()) + len(AFTER) + 1


def test_a_compaction_between_triggers_is_no_data_loss(
    spark, apache_pulsar, topic_name, tmp_path
) -> None:
    """The stream's position is a value a later compaction removed, in a ledger trimmed
    since: the next trigger goes on from the compacted view (failOnDataLoss=true)."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    ids = produce(url, topic_name, _history()[:-1], batching=False)
    options = {
        "service.url": url,
        "topic": topic_name,
        "startingOffsets": "earliest",
        "readCompacted": "true",
        "failOnDataLoss": "true",
    }
    first = _stream(spark, options, tmp_path / "cp")  # nothing compacted yet: everything
    assert sum(len(b) for b in first) == len(ids)
    admin.unload(topic_name)  # a new ledger: the stream's position stays in the first one
    # An unload that closes the stream subscription's cursor while it persists the last
    # acknowledgement loses it ("Failed to update cursor metadata ... cursor already
    # closed"): the subscription would then hold the first ledger. Acknowledge it again.
    cursors = admin.internal_stats(topic_name)["cursors"]
    with PulsarClient(url) as client:
        for sub in (c for c in cursors if c.startswith("pulsar-spark-stream-")):
            client.acknowledge_cumulative(topic_name, sub, ids[-1])
    newer = [{"key": f"k{k}", "value": f"k{k}-new"} for k in range(4)]
    produce(url, topic_name, newer, batching=False)
    compact(admin, topic_name)  # every value of the first ledger is superseded
    path = "persistent/" + topic_name.split("://", 1)[-1]
    first_ledger = int(ids[0].split(":")[0])
    deadline = time.monotonic() + 60
    while any(x["ledgerId"] == first_ledger for x in admin.internal_stats(topic_name)["ledgers"]):
        assert time.monotonic() < deadline, "the first ledger was not trimmed"
        admin.request("POST", f"{path}/trim")
        time.sleep(0.5)
    second = _stream(spark, options, tmp_path / "cp")
    assert sorted(v for b in second for v in b) == sorted(f"k{k}-new" for k in range(4))


def test_pulsar_lite_refuses_compacted_reads(spark, pulsar_lite, topic_name) -> None:
    produce(pulsar_lite.service_url, topic_name, [{"key": "k", "value": "v"}] * 3)
    options = {"service.url": pulsar_lite.service_url, "topic": topic_name}
    df = spark.read.format("pulsar").options(**options, readCompacted="true").load()
    with pytest.raises(Exception, match="no topic compaction") as info:
        df.count()
    assert topic_name in str(info.value)
