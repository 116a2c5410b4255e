"""Planning partition ranges from options, without a broker (a stand-in client)."""

from __future__ import annotations

import dataclasses

import pytest

from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.protocol import MessageId, Position
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.ranges import PartitionRange, plan_ranges, resolve_topics
from pulsar_spark.spark.read_schema import ReadSchema
from pulsar_spark.spark.spark_types import spark_schema
from pulsar_spark.spark.splits import _entry_boundaries, _Probe, _shares
from pulsar_spark.spark.stream.reader import PulsarStreamReader

NS = "persistent://public/default/"


class StandIn:
    """What planning asks of a client: partitions and the namespace listing."""

    def __init__(self, partitions: dict[str, int], listing: list[str] | None = None) -> None:
        self.partitions = {NS + k: v for k, v in partitions.items()}
        self.listing = listing

    def get_partitions(self, topic: str) -> list[str]:
        n = self.partitions.get(topic, 0)
        return [topic] if n == 0 else [f"{topic}-partition-{i}" for i in range(n)]

    def list_topics(self, namespace: str) -> list[str]:
        if self.listing is None:
            msg = "no answer to GET_TOPICS_OF_NAMESPACE"
            raise TimeoutError(msg)
        return self.listing


def _plan(client: StandIn, **options: str) -> list[PartitionRange]:
    return plan_ranges(client, parse_options({"service.url": "pulsar://h:6650", **options}))


def test_offsets_per_topic_and_partition() -> None:
    client = StandIn({"p": 3, "q": 0})
    ranges = _plan(
        client,
        topics="p,q",
        startingOffsets='{"p": "5:6:1:2", "p-partition-2": -1, "q": "7:8"}',
        endingOffsets='{"q": "9:9:-1:4"}',
    )
    assert ranges == [
        PartitionRange(NS + "p-partition-0", "earliest", "latest", True),
        PartitionRange(NS + "p-partition-1", "5:6:1:2", "latest", True),  # the id's partition
        PartitionRange(NS + "p-partition-2", "latest", "latest", True),
        PartitionRange(NS + "q", "7:8:-1:-1", "9:9:-1:4", False),  # ends are exclusive
    ]


def test_times_become_positions() -> None:
    ranges = _plan(
        StandIn({"t": 2}), topic="t", startingTime="1000", endingTime="1970-01-01T00:00:02Z"
    )
    assert {(str(r.start), str(r.end), r.end_inclusive) for r in ranges} == {
        ("time:1000", "time:2000", False)
    }


def test_offsets_errors_name_the_option() -> None:
    client = StandIn({"p": 2})
    with pytest.raises(PulsarOptionError, match=r"'startingOffsets'.*per partition"):
        _plan(client, topic="p", startingOffsets='{"p": "5:6"}')
    with pytest.raises(PulsarOptionError, match=r"'endingOffsets'.*does not include"):
        _plan(client, topic="p", endingOffsets='{"other": -1}')
    with pytest.raises(PulsarOptionError, match=r"'startingOffsets'.*partition 7 of"):
        _plan(client, topic="p", startingOffsets='{"p": {"7": -2}}')
    with pytest.raises(PulsarOptionError, match="names partition 0, not 1"):
        _plan(client, topic="p", startingOffsets='{"p-partition-1": "5:6:0:-1"}')


def test_an_offsets_key_naming_no_partition_is_refused() -> None:
    with pytest.raises(
        PulsarOptionError,
        match=r"'startingOffsets'.*names partition -1 of \S+/t, which this read does not include",
    ):
        _plan(StandIn({"t": 2}), topic="t", startingOffsets='{"t": {"-1": "1:2"}}')
    with pytest.raises(PulsarOptionError, match=r"'endingOffsets'.*names partition 2 of"):
        _plan(StandIn({"t": 2}), topic="t", endingOffsets='{"t-partition-2": "1:2"}')
    # A topic without partitions is its own partition -1.
    ranges = _plan(StandIn({"u": 0}), topic="u", startingOffsets='{"u": {"-1": "1:2"}}')
    assert ranges == [PartitionRange(NS + "u", "1:2:-1:-1", "latest", True)]


def test_admission_moves_past_the_greatest_id_with_the_options_window() -> None:
    # A chunked message (first chunk 1:1) completes after a message stored at 1:2,
    # between its chunks: the next micro-batch starts after 1:2, not after 1:1.
    from pulsar_spark.client.read.sized_scan import SizedRef
    from pulsar_spark.spark.stream.admission import _take

    ids = [MessageId(1, 2), MessageId(1, 1), MessageId(1, 5)]
    windows: list[int | None] = []

    class Scanner:
        def scan_sizes(self, topic, start, end, limit, receiver_queue_size=None):
            windows.append(receiver_queue_size)
            for message_id in ids[:limit]:
                yield SizedRef(message_id, 0, 10)

    options = parse_options({"service.url": "pulsar://h:6650", "topic": "t"})
    options = dataclasses.replace(options, receiver_queue_size=7)
    read = ReadSchema(None, "raw", None, dead_letter=False, arrow=ROW_SCHEMA)
    reader = PulsarStreamReader(options, read, spark_schema(ROW_SCHEMA))
    reader._client = Scanner()  # type: ignore[assignment]
    end = Position.after(MessageId(1, 9))
    share = _take(reader._scan_sizes, NS + "t", Position.earliest(), end, 2, None, False)
    assert (share.rows, share.nbytes) == (2, 20)
    assert (share.end, share.exhausted) == (Position.after(MessageId(1, 2)), False)
    assert windows == [7]


def test_topics_pattern_matches_base_names() -> None:
    listing = [
        NS + "orders-partition-0",
        NS + "orders-partition-1",
        NS + "orders-eu",
        NS + "refunds",
    ]
    client = StandIn({}, listing)
    options = parse_options({"service.url": "pulsar://h:6650", "topicsPattern": "orders.*"})
    assert resolve_topics(client, options) == [NS + "orders", NS + "orders-eu"]
    with pytest.raises(PulsarOptionError, match=r"'topicsPattern'.*GetTopicsOfNamespace"):
        resolve_topics(StandIn({}), options)


def test_a_topics_pattern_skips_the_exactly_once_sinks_own_topics() -> None:
    listing = [NS + "orders", NS + "__pulsar_spark_txns", NS + "__pulsar_spark_txn_log-q1"]
    client = StandIn({}, listing)
    options = parse_options({"service.url": "pulsar://h:6650", "topicsPattern": ".*"})
    assert resolve_topics(client, options) == [NS + "orders"]


def test_shares_and_entry_cuts() -> None:
    assert _shares([100, 100], 4) == [2, 2]
    assert _shares([300, 100], 4) == [3, 1]
    assert sum(_shares([5, 1, 1], 10)) == 10
    assert min(_shares([1000, 1, 1], 5)) == 1
    probe = _Probe(MessageId(3, 10, 0, 4), 0, MessageId(3, 19, 0, -1), True)
    cuts = _entry_boundaries(probe, 5)
    assert cuts == [MessageId(3, e, 0, -1) for e in (12, 14, 16, 18)]
    few = _Probe(MessageId(3, 10, 0, -1), 0, MessageId(3, 11, 0, -1), True)
    assert _entry_boundaries(few, 8) == [MessageId(3, 11, 0, -1)]  # no empty pieces


# -- ends fixed at planning (a broker) --------------------------------------------------


def _batch_reader(url: str, **options: str):
    from pulsar_spark.spark.reader import PulsarBatchReader

    parsed = parse_options({"service.url": url, **options})
    read = ReadSchema(None, "raw", None, dead_letter=False, arrow=ROW_SCHEMA)
    return PulsarBatchReader(parsed, read, spark_schema(ROW_SCHEMA))


def _task_rows(reader, partitions) -> list[tuple[str, bytes]]:
    rows = []
    for part in partitions:
        for batch in reader.read(part):
            ids, values = batch.column("messageId"), batch.column("value")
            rows.extend(zip(ids.to_pylist(), values.to_pylist(), strict=True))
    return sorted(rows)


@pytest.mark.parametrize("ending", [{}, {"endingTime": "2999-01-01T00:00:00Z"}])
def test_a_planned_batch_read_reads_the_same_rows_on_every_run(
    pulsar_lite_partitioned, topic_name, ending
) -> None:
    # A retried task or a recomputed DataFrame runs its planned partitions again:
    # messages produced after planning are not in them, however often they run.
    from pulsar_spark.client import PulsarClient

    url = pulsar_lite_partitioned.service_url
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for i in range(40):
            producer.send(f"before-{i}".encode())
        producer.flush()
        reader = _batch_reader(url, topic=topic_name, **ending)
        partitions = reader.partitions()
        assert len(partitions) == 4
        assert {p.end.kind for p in partitions} <= {"after", "from", "earliest"}  # fixed
        first = _task_rows(reader, partitions)
        for i in range(40):
            producer.send(f"after-{i}".encode())
        producer.flush()
        again = _task_rows(reader, partitions)
    assert len(first) == 40
    assert {v for _, v in first} == {f"before-{i}".encode() for i in range(40)}
    assert again == first


def test_empty_partitions_read_nothing_whatever_comes_later(
    pulsar_lite_partitioned, topic_name
) -> None:
    from pulsar_spark.client import PulsarClient

    url = pulsar_lite_partitioned.service_url
    reader = _batch_reader(url, topic=topic_name)
    partitions = reader.partitions()
    assert [p.end for p in partitions] == [Position.earliest()] * 4  # one task each
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for i in range(20):
            producer.send(f"later-{i}".encode())
    assert _task_rows(reader, partitions) == []


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "warn"])
def test_a_partition_deleted_and_created_again_after_planning_is_data_loss(
    apache_pulsar, topic_name, fail
) -> None:
    from pulsar_spark.client import PulsarClient
    from pulsar_spark.spark.errors import DataLossError

    url = apache_pulsar.service_url
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for i in range(50):
            producer.send(f"old-{i}".encode())
    reader = _batch_reader(url, topic=topic_name, failOnDataLoss=str(fail).lower())
    partitions = reader.partitions()
    apache_pulsar.admin.delete(topic_name, force=True)
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        producer.send(b"new")  # created again, with messages past the planned end
    if fail:
        with pytest.raises(DataLossError, match="failOnDataLoss"):
            _task_rows(reader, partitions)
    else:
        assert _task_rows(reader, partitions) == []  # the old messages are gone
