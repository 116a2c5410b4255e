"""spark.readStream / writeStream with format "pulsar": checkpoints, admission control,
new partitions, data loss, and the deduplicated sink."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.spark.compat import spark_version
from tests.support.official import produce, read_all

#: Tests of features that need a newer Spark than the oldest supported (4.0); that
#: those features are refused there with a clear error is tested on its own.
needs_admission_control = pytest.mark.skipif(
    spark_version() < (4, 2), reason="maxRecordsPerTrigger needs Spark 4.2+"
)


def _stream(spark, url: str, **options: str):
    reader = spark.readStream.format("pulsar").option("service.url", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _run_available_now(df, checkpoint: Path, *, sink: Path | None = None, batches=None):
    """Run ``df`` with Trigger.AvailableNow into parquet at ``sink`` (or collect each
    micro-batch's rows into ``batches``) from ``checkpoint``; wait until it ends."""
    writer = df.writeStream.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True)
    if batches is not None:

        def collect(frame, batch_id: int) -> None:
            batches.append((batch_id, [r.asDict() for r in frame.collect()]))

        query = writer.foreachBatch(collect).start()
    else:
        assert sink is not None
        query = writer.format("parquet").option("path", str(sink)).start()
    query.awaitTermination(180)
    assert not query.isActive, "the query did not finish in time"
    if query.exception() is not None:
        raise query.exception()
    return query


def _values(spark, sink: Path) -> list[bytes]:
    return [bytes(r.value) for r in spark.read.parquet(str(sink)).select("value").collect()]


def test_restart_from_the_checkpoint_reads_each_message_once(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, [b"a%d" % i for i in range(40)], batching_max_messages=7)
    df = _stream(spark, url, topic=topic_name, startingOffsets="earliest")
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "out"
    _run_available_now(df, checkpoint, sink=sink)
    assert sorted(_values(spark, sink)) == sorted(b"a%d" % i for i in range(40))
    produce(url, topic_name, [b"b%d" % i for i in range(25)], batching_max_messages=7)
    _run_available_now(df, checkpoint, sink=sink)
    got = spark.read.parquet(str(sink))
    assert got.count() == 65
    assert got.select("messageId").distinct().count() == 65
    assert sorted(_values(spark, sink)) == sorted(
        [b"a%d" % i for i in range(40)] + [b"b%d" % i for i in range(25)]
    )


def test_a_stream_starts_at_latest_by_default(spark, pulsar_lite, topic_name, tmp_path) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, [b"old"] * 5)
    df = _stream(spark, url, topic=topic_name)
    batches: list = []
    _run_available_now(df, tmp_path / "c", batches=batches)
    assert [row for _, rows in batches for row in rows] == []
    produce(url, topic_name, [b"new"] * 3)
    _run_available_now(df, tmp_path / "c", batches=batches)
    assert [row["value"] for _, rows in batches for row in rows] == [b"new"] * 3


def test_max_records_per_trigger_bounds_every_micro_batch(
    spark, pulsar_lite_partitioned, topic_name, tmp_path
) -> None:
    url = pulsar_lite_partitioned.service_url
    sent = [b"m%03d" % i for i in range(230)]
    produce(url, topic_name, sent, batching_max_messages=10)
    df = _stream(
        spark, url, topic=topic_name, startingOffsets="earliest", maxRecordsPerTrigger="50"
    )
    batches: list = []
    if spark_version() < (4, 2):  # no admission control: refused, not ignored
        with pytest.raises(Exception, match=r"'maxRecordsPerTrigger'.*needs Spark 4\.2"):
            _run_available_now(df, tmp_path / "c", batches=batches)
        return
    _run_available_now(df, tmp_path / "c", batches=batches)
    sizes = [len(rows) for _, rows in batches if rows]
    assert all(size <= 50 for size in sizes), sizes
    assert sum(sizes) == 230
    assert len(sizes) >= 5
    got = [row["value"] for _, rows in batches for row in rows]
    assert sorted(got) == sent  # every message once
    ids = [row["messageId"] for _, rows in batches for row in rows]
    assert len(set(ids)) == len(ids)


def test_new_partitions_join_the_stream(spark, apache_pulsar, topic_name, tmp_path) -> None:
    admin = apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 2)
    url = apache_pulsar.service_url
    produce(url, topic_name, [b"x%d" % i for i in range(20)])
    df = _stream(spark, url, topic=topic_name, startingOffsets="earliest")
    checkpoint, sink = tmp_path / "checkpoint", tmp_path / "out"
    _run_available_now(df, checkpoint, sink=sink)
    admin.update_partitions(topic_name, 4)
    produce(url, topic_name, [b"y%d" % i for i in range(40)], batching_max_messages=3)
    _run_available_now(df, checkpoint, sink=sink)
    rows = spark.read.parquet(str(sink)).select("value", "partition").collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(
        [b"x%d" % i for i in range(20)] + [b"y%d" % i for i in range(40)]
    )
    assert {r.partition for r in rows} == {0, 1, 2, 3}


def _truncated_after_a_first_run(spark, apache_pulsar, topic_name: str, tmp_path: Path):
    """A stream read m0..m9; then m10..m19 were written and truncated away, and m20..m29
    written after: (dataframe factory, checkpoint)."""
    admin = apache_pulsar.admin
    url = apache_pulsar.service_url
    produce(url, topic_name, [b"m%d" % i for i in range(10)], batching=False)
    checkpoint = tmp_path / "checkpoint"

    def df(**options: str):
        return _stream(spark, url, topic=topic_name, startingOffsets="earliest", **options)

    _run_available_now(df(), checkpoint, batches=[])
    produce(url, topic_name, [b"m%d" % i for i in range(10, 20)], batching=False)
    admin.unload(topic_name)  # the next write opens a new ledger
    produce(url, topic_name, [b"m%d" % i for i in range(20, 30)], batching=False)
    admin.request("DELETE", f"{topic_name.replace('://', '/')}/truncate")
    return df, checkpoint


def test_truncated_messages_fail_the_stream(spark, apache_pulsar, topic_name, tmp_path) -> None:
    df, checkpoint = _truncated_after_a_first_run(spark, apache_pulsar, topic_name, tmp_path)
    with pytest.raises(Exception, match=r"no longer available.*failOnDataLoss=false"):
        _run_available_now(df(), checkpoint, batches=[])


def test_truncated_messages_are_skipped_without_fail_on_data_loss(
    spark, apache_pulsar, topic_name, tmp_path
) -> None:
    df, checkpoint = _truncated_after_a_first_run(spark, apache_pulsar, topic_name, tmp_path)
    batches: list = []
    _run_available_now(df(failOnDataLoss="false"), checkpoint, batches=batches)
    got = [row["value"] for _, rows in batches for row in rows]
    assert got == [b"m%d" % i for i in range(20, 30)]


@needs_admission_control
def test_a_stream_leaves_its_durable_subscription_and_only_that(
    spark, apache_pulsar, topic_name, tmp_path
) -> None:
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    produce(url, topic_name, [b"p%d" % i for i in range(30)], batching=False)

    def subscriptions() -> dict:
        return admin.stats(topic_name)["subscriptions"]

    def idle() -> bool:  # the driver's consumers closed when the query stopped
        return all(sub["consumers"] == [] for sub in subscriptions().values())

    _run_available_now(
        _stream(spark, url, topic=topic_name, startingOffsets="earliest",
                subscriptionMode="nonDurable"),
        tmp_path / "c1",
        batches=[],
    )  # fmt: skip
    admin.wait_until(lambda: subscriptions() == {}, 10, "nothing left")  # nothing durable
    _run_available_now(
        _stream(spark, url, topic=topic_name, startingOffsets="earliest"),
        tmp_path / "c2",
        batches=[],
    )
    admin.wait_until(idle, 10, "the query's consumers closed")
    (generated,) = subscriptions()  # the query's own, and nothing else
    assert generated.startswith("pulsar-spark-stream-")
    assert subscriptions()[generated]["msgBacklog"] == 0  # moved to the end it read
    df = _stream(
        spark,
        url,
        topic=topic_name,
        startingOffsets="earliest",
        subscriptionName="spark-progress",
        maxRecordsPerTrigger="12",
    )
    _run_available_now(df, tmp_path / "c3", batches=[])
    admin.wait_until(idle, 10, "the query's consumers closed")
    assert sorted(subscriptions()) == sorted([generated, "spark-progress"])
    # 30 = 12 + 12 + 6, each committed end acknowledged: the broker holds nothing back.
    assert subscriptions()["spark-progress"]["msgBacklog"] == 0


def _copy(spark, url: str, source: str, target: str, checkpoint: Path) -> None:
    """Stream ``source`` into ``target`` (key and value), 25 rows a micro-batch, until
    caught up (Trigger.AvailableNow)."""
    df = _stream(
        spark, url, topic=source, startingOffsets="earliest", maxRecordsPerTrigger="25"
    ).select("key", "value")
    query = (
        df.writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", target)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()


def _forget_last_commit(checkpoint: Path) -> None:
    """Delete the last micro-batch's commit, as a driver that died after writing its
    rows and before committing leaves the checkpoint: a restart runs it again."""
    commits = checkpoint / "commits"
    last = max((p for p in commits.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    last.unlink()
    (commits / f".{last.name}.crc").unlink(missing_ok=True)


@needs_admission_control
def test_pulsar_to_pulsar_is_effectively_once_with_deduplication(
    spark, apache_pulsar_dedup, topic_name, tmp_path
) -> None:
    """A micro-batch replayed from the checkpoint (its commit lost, as when the driver
    dies after writing) sends its rows again: the broker drops them."""
    url = apache_pulsar_dedup.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    produce(url, source, [b"r%d" % i for i in range(60)], batching_max_messages=9)
    checkpoint = tmp_path / "checkpoint"
    _copy(spark, url, source, target, checkpoint)
    _forget_last_commit(checkpoint)  # the restart re-runs that micro-batch
    _copy(spark, url, source, target, checkpoint)
    got = read_all(url, target, at_least=60)
    assert sorted(m["value"] for m in got) == sorted(b"r%d" % i for i in range(60))
    assert len(got) == 60  # no duplicates


@needs_admission_control
def test_without_deduplication_a_replay_duplicates(
    spark, apache_pulsar, topic_name, tmp_path
) -> None:
    """The same replay on a namespace without deduplication: at-least-once, measured."""
    url = apache_pulsar.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    produce(url, source, [b"r%d" % i for i in range(60)], batching_max_messages=9)
    checkpoint = tmp_path / "checkpoint"
    _copy(spark, url, source, target, checkpoint)
    _forget_last_commit(checkpoint)
    _copy(spark, url, source, target, checkpoint)
    with PulsarClient(url) as client:
        values = [v for b in client.read_batches(target) for v in b.column("value").to_pylist()]
    assert set(values) == {b"r%d" % i for i in range(60)}
    duplicates = len(values) - 60
    print(f"duplicates without deduplication after one replayed micro-batch: {duplicates}")
    assert duplicates == 10  # the last micro-batch: 60 = 25 + 25 + 10


def test_end_options_are_refused_for_streams(spark, pulsar_lite, topic_name) -> None:
    df = _stream(spark, pulsar_lite.service_url, topic=topic_name, endingOffsets="latest")
    with pytest.raises(Exception, match="endingOffsets"):
        df.writeStream.format("console").start().awaitTermination(30)


@pytest.mark.skipif(spark_version() >= (4, 1), reason="Spark 4.1+ has streaming Arrow writers")
def test_stream_writes_on_spark_4_0_say_what_they_need(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    url = pulsar_lite.service_url
    df = _stream(spark, url, topic=topic_name, startingOffsets="earliest")
    with pytest.raises(Exception, match=r"streaming writes to Pulsar.*needs Spark 4\.1 or newer"):
        query = (
            df.writeStream.format("pulsar")
            .option("service.url", url)
            .option("topic", f"{topic_name}-out")
            .option("checkpointLocation", str(tmp_path / "c"))
            .start()
        )
        query.awaitTermination(60)
        ran = f"the query ran: {query.exception()}"  # the pattern does not match this
        raise AssertionError(ran)


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_named_query_streams_into_pulsar_and_a_batch_load_takes_a_list_of_topics(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    """``queryName`` reaches the sink as an option (it used to fail every named query
    into Pulsar with "unknown option"); a batch ``load([t1, t2])`` reads both topics."""
    url = pulsar_lite.service_url
    first, second, target = f"{topic_name}-1", f"{topic_name}-2", f"{topic_name}-out"
    produce(url, first, [b"a%d" % i for i in range(5)])
    produce(url, second, [b"b%d" % i for i in range(5)])
    df = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("startingOffsets", "earliest")
        .option("topics", f"{first},{second}")
        .load()
        .select("value")
    )
    query = (
        df.writeStream.format("pulsar")
        .queryName("orders_copy")
        .option("service.url", url)
        .option("topic", target)
        .option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    assert query.name == "orders_copy"
    got = sorted(m["value"] for m in read_all(url, target, at_least=10))
    assert got == sorted([b"a%d" % i for i in range(5)] + [b"b%d" % i for i in range(5)])
    # A batch read of a list of paths (Spark passes them as "paths", a JSON array).
    batch = spark.read.format("pulsar").option("service.url", url).load([first, second])
    assert batch.count() == 10


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_an_aggregation_into_pulsar_is_pointed_to_foreach_batch_which_works(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    """Spark refuses ``outputMode("update")`` for Python sinks and asks the sink to
    overwrite in ``complete`` mode: the sink's error points to ``foreachBatch``, and the
    recipe the README gives sends each trigger's totals."""
    url = pulsar_lite.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-totals"
    produce(url, source, [b"abc"[i % 3 : i % 3 + 1] for i in range(30)])
    counts = (
        _stream(spark, url, topic=source, startingOffsets="earliest")
        .groupBy("value")
        .count()
        .selectExpr("value", "cast(count as string) as key")
    )

    def start(mode: str, sub: str):
        return (
            counts.writeStream.format("pulsar")
            .outputMode(mode)
            .option("service.url", url)
            .option("topic", target)
            .option("checkpointLocation", str(tmp_path / sub))
            .trigger(availableNow=True)
            .start()
        )

    with pytest.raises(Exception, match="Update mode"):
        start("update", "u").awaitTermination(60)
    with pytest.raises(Exception, match=r"(?s)outputMode\(\"complete\"\).*foreachBatch"):
        start("complete", "c").awaitTermination(120)

    def send(batch, batch_id: int) -> None:
        batch.write.format("pulsar").option("service.url", url).option("topic", target).mode(
            "append"
        ).save()

    recipe = (
        counts.writeStream.outputMode("update")
        .foreachBatch(send)
        .option("checkpointLocation", str(tmp_path / "f"))
        .trigger(availableNow=True)
        .start()
    )
    recipe.awaitTermination(180)
    assert recipe.exception() is None, recipe.exception()
    got = {(m["value"], m["key"]) for m in read_all(url, target, at_least=3)}
    assert got == {(b"a", "10"), (b"b", "10"), (b"c", "10")}


def test_min_partitions_splits_every_micro_batch_and_reads_each_message_once(
    spark, pulsar_lite, topic_name, tmp_path
) -> None:
    """One partition, batched entries, two runs from one checkpoint: each micro-batch with
    data runs as at least ``minPartitions`` tasks, and the rows are exactly those sent."""
    url = pulsar_lite.service_url
    first = [b"a%d" % i for i in range(60)]
    produce(url, topic_name, first, batching_max_messages=4)
    df = _stream(spark, url, topic=topic_name, startingOffsets="earliest", minPartitions="5")
    tasks: list[int] = []

    def collect(frame, batch_id: int) -> None:
        tasks.append(frame.rdd.getNumPartitions())
        rows.extend((bytes(r.value), r.messageId) for r in frame.collect())

    rows: list[tuple[bytes, object]] = []
    for run, values in enumerate((first, [b"b%d" % i for i in range(21)])):
        if run:
            produce(url, topic_name, values, batching_max_messages=4)
        query = (
            df.writeStream.option("checkpointLocation", str(tmp_path / "c"))
            .trigger(availableNow=True)
            .foreachBatch(collect)
            .start()
        )
        query.awaitTermination(180)
        assert not query.isActive and query.exception() is None
    assert tasks and min(tasks) >= 5, tasks
    assert sorted(v for v, _ in rows) == sorted(first + [b"b%d" % i for i in range(21)])
    assert len({m for _, m in rows}) == len(rows)
