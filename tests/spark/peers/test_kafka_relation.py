"""Spark's ``KafkaRelationSuite`` (batch reads), translated to Pulsar: per-partition offsets
are message ids (``startingOffsets``/``endingOffsets`` JSON, ``-2`` earliest, ``-1`` latest),
Kafka's record timestamps are publish times (``startingTimestamp``/``endingTimestamp``, here
also ``startingTime``/``endingTime``), Kafka headers are the ``properties`` map.

Where the semantics differ on purpose, the test asserts ours and its docstring says so: a
DataFrame keeps the range fixed when it was planned (Kafka binds ``latest`` again at every
execution), a start time with nothing after it reads nothing (Kafka fails), and a start time
with start offsets is refused (Kafka prefers the time).
"""

from __future__ import annotations

import time

import pytest

from tests.spark.peers.support import send, send_to_partitions


def _ints(df) -> list[int]:
    return sorted(int(r.value) for r in df.selectExpr("CAST(value AS STRING) value").collect())


def _partition(message_id: str) -> int:
    return int(message_id.split(":")[2])


@pytest.fixture
def three(apache_pulsar, topic_name) -> dict[int, list[str]]:
    """``topic_name`` with 3 partitions: 0..9, 10..19 and 20, 21; the ids by partition."""
    apache_pulsar.admin.create_partitioned_topic(topic_name, 3)
    url = apache_pulsar.service_url
    return send_to_partitions(url, topic_name, {0: range(10), 1: range(10, 20), 2: [20, 21]})


def test_explicit_earliest_and_latest_and_default_offsets(
    apache_pulsar, three, topic_name, read_pulsar
) -> None:
    """Spark KafkaRelationSuite: 'explicit earliest to latest offsets' and 'default starting
    and ending offsets'."""
    url = apache_pulsar.service_url
    explicit = read_pulsar(
        url, topic=topic_name, startingOffsets="earliest", endingOffsets="latest"
    )
    assert _ints(explicit) == list(range(22))
    assert _ints(read_pulsar(url, topic=topic_name)) == list(range(22))


def test_a_dataframe_reads_the_range_fixed_when_it_was_planned(
    pulsar_lite, topic_name, read_pulsar
) -> None:
    """Spark KafkaRelationSuite: 'explicit earliest to latest offsets' ("latest" should late
    bind to the current offset in the df) and 'SPARK-30656: minPartitions' (reused ``rdd``
    and ``df`` see the new data): here the opposite, by design: a DataFrame's range is fixed
    when it is planned, so a recomputed DataFrame reads the same messages (exactly the
    range); a new ``load()`` reads the new ones."""
    url = pulsar_lite.service_url
    send(url, topic_name, range(10))
    df = read_pulsar(url, topic=topic_name, startingOffsets="earliest", endingOffsets="latest")
    assert _ints(df) == list(range(10))
    send(url, topic_name, range(10, 15))
    assert _ints(df) == list(range(10))
    assert _ints(read_pulsar(url, topic=topic_name)) == list(range(15))


def test_explicit_offsets_per_partition(apache_pulsar, three, topic_name, read_pulsar) -> None:
    """Spark KafkaRelationSuite: 'explicit offsets': partitions 0 and 1 from earliest (-2) to
    latest (-1), partition 2 from its first message to its second (exclusive). Messages
    written afterwards to partition 2 are past its end; a new read takes partition 1's new
    messages, which end at latest."""
    url = apache_pulsar.service_url
    options = {
        "topic": topic_name,
        "startingOffsets": f'{{"{topic_name}": {{"0": -2, "1": -2, "2": "{three[2][0]}"}}}}',
        "endingOffsets": f'{{"{topic_name}": {{"0": -1, "1": -1, "2": "{three[2][1]}"}}}}',
    }
    assert _ints(read_pulsar(url, **options)) == list(range(21))
    send_to_partitions(url, topic_name, {2: range(31, 40)})
    assert _ints(read_pulsar(url, **options)) == list(range(21))
    send_to_partitions(url, topic_name, {1: range(21, 31)})
    assert _ints(read_pulsar(url, **options)) == list(range(31))


def test_start_and_end_offsets_may_name_different_partitions(
    apache_pulsar, three, topic_name, read_pulsar
) -> None:
    """Spark KafkaRelationSuite: 'topic-partition for start offset and end offset must match':
    Kafka refuses the read; here partitions a JSON leaves out take the default (earliest for
    starts, latest for ends), so the read is the union of what each names."""
    url = apache_pulsar.service_url
    df = read_pulsar(
        url,
        topic=topic_name,
        startingOffsets=f'{{"{topic_name}": {{"0": "{three[0][1]}", "1": -2, "2": -2}}}}',
        endingOffsets=f'{{"{topic_name}": {{"0": "{three[0][3]}", "1": "{three[1][2]}"}}}}',
    )
    assert _ints(df) == [1, 2, 10, 11, 20, 21]


def test_a_start_after_the_end_reads_nothing(apache_pulsar, three, topic_name, read_pulsar):
    """Spark KafkaRelationSuite: 'unresolved start offset greater than end offset': Kafka
    refuses the read; here the range of that partition is empty."""
    url = apache_pulsar.service_url
    df = read_pulsar(
        url,
        topic=topic_name,
        startingOffsets=f'{{"{topic_name}": {{"0": "{three[0][5]}"}}}}',
        endingOffsets=f'{{"{topic_name}": {{"0": "{three[0][1]}"}}}}',
    )
    assert _ints(df) == list(range(10, 22))


def test_message_properties_are_read_as_a_map(pulsar_lite, topic_name, read_pulsar) -> None:
    """Spark KafkaRelationSuite: 'default starting and ending offsets with headers': Kafka's
    headers are Pulsar's message properties, read as a map (no message: an empty map; a
    property name holds one value)."""
    url = pulsar_lite.service_url
    from tests.support.official import produce

    produce(
        url,
        topic_name,
        [
            {"value": "1"},
            {"value": "2", "properties": {"a": "b", "c": "d"}},
            {"value": "3", "properties": {"e": "g"}},
        ],
    )
    rows = read_pulsar(url, topic=topic_name).selectExpr(
        "CAST(value AS STRING) value", "properties"
    )
    got = {r.value: r.properties for r in rows.collect()}
    assert got == {"1": {}, "2": {"a": "b", "c": "d"}, "3": {"e": "g"}}


@pytest.fixture
def timed(pulsar_lite_partitioned, topic_name) -> tuple[list[int], list[str]]:
    """0..9, 10..19 and 20..29 published at three times, unbatched over 4 partitions; the
    times ([before, second, third, after], epoch ms) and the message ids."""
    url = pulsar_lite_partitioned.service_url
    times, ids = [], []
    for group in range(3):
        time.sleep(0.03)
        times.append(int(time.time() * 1000))
        time.sleep(0.03)
        ids += send(url, topic_name, range(group * 10, group * 10 + 10), batching=False)
    time.sleep(0.03)
    times.append(int(time.time() * 1000))
    return times, ids


def test_publish_times_for_starting_and_ending(
    pulsar_lite_partitioned, timed, topic_name, read_pulsar
) -> None:
    """Spark KafkaRelationSuite: 'global timestamp provided for starting and ending',
    'timestamp provided for starting, offset provided for ending', 'timestamp provided for
    ending, offset provided for starting', 'timestamp provided for starting, ending not
    provided', 'timestamp provided for ending, starting not provided', 'no matched offset for
    timestamp - endingOffsets' (per-partition timestamps are not offered: one time for all)."""
    url = pulsar_lite_partitioned.service_url
    times, ids = timed

    def read(**options: object) -> list[int]:
        return _ints(read_pulsar(url, topic=topic_name, **{k: str(v) for k, v in options.items()}))

    assert read(startingTimestamp=times[1], endingTimestamp=times[2]) == list(range(10, 20))
    assert read(startingTime=times[1], endingTime=times[2]) == list(range(10, 20))
    # a time to start, an offset to end: partition 2 stops before its second message
    in_two = [i for i, m in enumerate(ids) if _partition(m) == 2]
    ending = f'{{"{topic_name}": {{"2": "{ids[in_two[1]]}"}}}}'
    expected = [i for i in range(30) if _partition(ids[i]) != 2 or i == in_two[0]]
    assert read(startingTimestamp=times[0], endingOffsets=ending) == expected
    assert read(startingOffsets="earliest", endingTimestamp=times[2]) == list(range(20))
    assert read(startingTimestamp=times[1]) == list(range(10, 30))
    assert read(endingTimestamp=times[2]) == list(range(20))
    assert read(endingTimestamp=times[3] + 60_000) == list(range(30))


def test_no_message_at_or_after_the_starting_time_reads_nothing(
    pulsar_lite_partitioned, timed, topic_name, read_pulsar
) -> None:
    """Spark KafkaRelationSuite: 'no matched offset for timestamp - startingOffsets': Kafka
    fails ("No offset matched"); here a partition with nothing published at or after the time
    starts at its end, and reads nothing."""
    url = pulsar_lite_partitioned.service_url
    times, _ = timed
    assert _ints(read_pulsar(url, topic=topic_name, startingTimestamp=str(times[3]))) == []


def test_a_starting_time_with_starting_offsets_is_refused(
    pulsar_lite, topic_name, read_pulsar
) -> None:
    """Spark KafkaRelationSuite: 'preferences on offset related options': Kafka prefers the
    global timestamp, then per-partition timestamps, then offsets; here giving both a start
    time and start offsets is an error naming them."""
    with pytest.raises(Exception, match="startingOffsets"):
        read_pulsar(
            pulsar_lite.service_url,
            topic=topic_name,
            startingTimestamp="1000",
            startingOffsets="earliest",
        ).collect()


def test_reuse_same_dataframe_in_query(pulsar_lite, topic_name, read_pulsar) -> None:
    """Spark KafkaRelationSuite: 'reuse same dataframe in query'."""
    url = pulsar_lite.service_url
    send(url, topic_name, range(11))
    df = read_pulsar(url, topic=topic_name, startingOffsets="earliest", endingOffsets="latest")
    assert _ints(df.union(df)) == sorted([*range(11), *range(11)])


def test_late_binding_start_offsets(apache_pulsar, topic_name, read_pulsar) -> None:
    """Spark KafkaRelationSuite: 'test late binding start offsets': once the messages an
    ``earliest`` read returned are removed (a truncation here) and more are written, a read
    from earliest starts where the topic now begins."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    send(url, topic_name, range(10), batching=False)
    assert _ints(read_pulsar(url, topic=topic_name)) == list(range(10))
    admin.unload(topic_name)  # close the ledger, so the truncation removes it
    admin.request("DELETE", f"{topic_name.replace('://', '/')}/truncate")
    send(url, topic_name, range(10, 20), batching=False)
    assert _ints(read_pulsar(url, topic=topic_name, startingOffsets="earliest")) == list(
        range(10, 20)
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "t", "endingOffsets": "earliest"}, "endingOffsets"),
        ({"topic": "t", "endingOffsets": '{"t": -2}'}, "endingOffsets"),
        ({}, "one of topic, topics or topicsPattern"),
        ({"topics": "t", "topicsPattern": "t.*"}, "topicsPattern"),
        ({"subscribe": "t"}, "use topics"),
        ({"subscribePattern": "t.*"}, "use topicsPattern"),
        ({"topics": ""}, "topics"),
        ({"topicsPattern": ""}, "topicsPattern"),
    ],
    ids=["end-earliest", "end-json-earliest", "none", "two", "subscribe", "pattern", "empty",
         "empty-pattern"],
)  # fmt: skip
def test_bad_batch_query_options(pulsar_lite, read_pulsar, options, message) -> None:
    """Spark KafkaRelationSuite: 'bad batch query options' (Kafka also refuses a ``latest``
    start for a batch read; here it is an empty read, see the next test)."""
    with pytest.raises(Exception, match=message):
        read_pulsar(pulsar_lite.service_url, **options).collect()


def test_a_batch_read_from_latest_is_empty(pulsar_lite, topic_name, read_pulsar) -> None:
    """Spark KafkaRelationSuite: 'bad batch query options' ("starting offset can't be latest
    for batch queries"): accepted here, and empty."""
    url = pulsar_lite.service_url
    send(url, topic_name, range(3))
    assert read_pulsar(url, topic=topic_name, startingOffsets="latest").count() == 0


def test_min_partitions(pulsar_lite_partitioned, topic_name, read_pulsar) -> None:
    """Spark KafkaRelationSuite: 'SPARK-30656: minPartitions': at least 6 tasks, every message
    once."""
    url = pulsar_lite_partitioned.service_url
    send(url, topic_name, range(21), batching=False)
    df = read_pulsar(url, topic=topic_name, minPartitions="6").selectExpr(
        "CAST(value AS STRING) value"
    )
    parts = df.rdd.glom().collect()
    assert len(parts) >= 6
    assert sorted(int(r.value) for part in parts for r in part) == list(range(21))
