"""A bounded soak (Apache Pulsar): continuous produce and consume with periodic unloads;
the client's memory and file descriptors stay flat, every acknowledged message is read
exactly once, and nothing is left pending at the end.

The consumer is the stream source itself, driven the way Spark drives it (one
``PulsarStreamReader``: ``latestOffset``, ``partitions``, each partition's ``read`` with a
client of its own as a task opens, ``commit``), in this process and without a JVM, so
that RSS and descriptors measured are the client's and the source's, not Spark's. The
producer is the client's own (``send`` + ``flush``), 50 messages at a time. The topic
(2 partitions) is unloaded every 10 s, each time once the reader got rows on since the
last unload (an unload the broker refuses is tried again), so both reconnect again and
again; the run goes on past its duration until the unloads due by then landed. The broker
deduplicates: a batch the broker stored but whose receipt the unload cut off is sent again
after the reconnect (at-least-once), and must be stored once, so any copy read twice is the
reader's.

Duration: ``PULSAR_SPARK_SOAK_SECONDS`` (default 300). Tolerances, after a warm-up of a
fifth of the run (30 s at least): RSS may grow by at most 32 MiB between the median of
the first third of samples and that of the last third; open descriptors by at most 4
between the maxima of those thirds.

Pending requests: the client has no public count of them; the test reads each pooled
connection's table of requests waiting for an answer (``Connection._waiters``) and the
producer's unconfirmed messages (``Producer._pending``), both private.
"""

from __future__ import annotations

import os
import statistics
import threading
import time

import pytest

from pulsar_spark import PulsarDataSource
from pulsar_spark.client import PulsarClient
from pulsar_spark.spark.compat import spark_version
from tests.support.faults import unload_storm
from tests.support.spark_faults import figure

SOAK_SECONDS = float(os.environ.get("PULSAR_SPARK_SOAK_SECONDS", "300"))
UNLOAD_EVERY = 10.0
SAMPLE_EVERY = 2.0
RSS_TOLERANCE = 32 << 20
FD_TOLERANCE = 4
#: Messages a second the producer aims at (ids index a preallocated table).
RATE = 400
CAPACITY = int(RATE * SOAK_SECONDS * 1.5) + 10_000


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _latest(reader, start):
    if spark_version() >= (4, 2):
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        return reader.latestOffset(start, ReadAllAvailable())
    return reader.latestOffset()


def _pending_requests(client: PulsarClient) -> int:
    return sum(len(c._waiters) for c in client._pool._connections.values())


@pytest.mark.waits
def test_soak_produce_consume_and_unload(apache_pulsar_dedup, topic_name, record_property):
    url, admin = apache_pulsar_dedup.service_url, apache_pulsar_dedup.admin
    admin.create_partitioned_topic(topic_name, 2)
    # Keep closed ledgers (the fixture's default, set here too so that the soak holds on
    # any broker): with retention 0 a ledger closed by an unload goes at the next retention
    # check, before a non-durable reader got to it: a real loss, reported as one (CI saw it).
    admin.apply_retention(topic_name, minutes=-1, size_mb=-1)
    seen = bytearray(CAPACITY)  # times each id was read
    acked = 0
    stop = threading.Event()
    errors: list[str] = []
    producer_client = PulsarClient(url)
    producer = producer_client.create_producer(topic_name, batch_max_delay=0.005)

    def produce() -> None:
        nonlocal acked
        next_id = 0
        t0 = time.monotonic()
        try:
            while not stop.is_set() and next_id + 50 < CAPACITY:
                for i in range(next_id, next_id + 50):
                    producer.send(b"%010d" % i)
                producer.flush()
                next_id += 50
                acked = next_id
                ahead = next_id / RATE - (time.monotonic() - t0)
                if ahead > 0:
                    stop.wait(ahead)
        except Exception as exc:
            errors.append(f"producer: {type(exc).__name__}: {exc}")

    source = PulsarDataSource(
        {"service.url": url, "topic": topic_name, "startingOffsets": "earliest"}
    )
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    samples: list[tuple[float, int, int]] = []
    threads = [threading.Thread(target=produce, daemon=True)]
    rows_read = 0
    # An unload every 10 s, once the reader got rows on since the last one; the run lasts
    # until the unloads due in SOAK_SECONDS landed (those the machine's pace put off too).
    due = int(SOAK_SECONDS // UNLOAD_EVERY) - 2
    storm = unload_storm(
        admin, topic_name, lambda: rows_read, at_least=max(due, 0), interval=UNLOAD_EVERY
    )
    t0 = time.monotonic()
    for thread in threads:
        thread.start()
    micro_batches = 0
    last_sample = 0.0
    with storm:  # leaving it fails the test if the unloads did not land
        try:
            while (
                not errors
                and storm.failure is None
                and (time.monotonic() - t0 < SOAK_SECONDS or storm.landed < storm.at_least)
            ):
                if time.monotonic() - t0 > 2 * SOAK_SECONDS + 60:
                    break  # the unloads due did not land: the end of the ``with`` says so
                end = _latest(reader, start)
                for partition in reader.partitions(start, end):
                    for batch in reader.read(partition):
                        for value in batch.column("value").to_pylist():
                            n = int(value)
                            seen[n] = min(seen[n] + 1, 255)
                            rows_read += 1
                reader.commit(end)
                start = end
                micro_batches += 1
                now = time.monotonic()
                if now - last_sample >= SAMPLE_EVERY:
                    samples.append((now - t0, _rss(), _fds()))
                    last_sample = now
                time.sleep(0.2)
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
        assert errors == []  # (before the storm's own check)
    # Drain: everything acknowledged is read.
    for _ in range(50):
        end = _latest(reader, start)
        for partition in reader.partitions(start, end):
            for batch in reader.read(partition):
                for value in batch.column("value").to_pylist():
                    seen[int(value)] = min(seen[int(value)] + 1, 255)
        reader.commit(end)
        start = end
        if all(seen[i] for i in range(acked)):
            break
        time.sleep(0.2)
    lost = sum(1 for i in range(acked) if seen[i] == 0)
    duplicated = sum(seen[i] - 1 for i in range(acked) if seen[i] > 1)
    unexpected = sum(1 for i in range(acked, CAPACITY) if seen[i])
    producer_pending = sum(len(p._pending) for p in producer.producers)  # private
    requests_pending = _pending_requests(producer_client) + (
        _pending_requests(reader._client) if reader._client is not None else 0
    )
    producer.close()
    producer_client.close()
    reader.stop()

    warm = max(30.0, SOAK_SECONDS / 5)
    steady = [s for s in samples if s[0] >= warm]
    third = max(1, len(steady) // 3)
    first, last = steady[:third], steady[-third:]
    rss_growth = statistics.median(s[1] for s in last) - statistics.median(s[1] for s in first)
    fd_growth = max(s[2] for s in last) - max(s[2] for s in first)
    figure(
        record_property,
        "soak",
        seconds=round(time.monotonic() - t0, 1),
        acked=acked,
        lost=lost,
        duplicated=duplicated,
        unexpected=unexpected,
        unloads=storm.landed,
        micro_batches=micro_batches,
        rss_start_mib=round(first[0][1] / 2**20, 1),
        rss_growth_mib=round(rss_growth / 2**20, 1),
        fds_start=first[0][2],
        fd_growth=fd_growth,
        pending_requests=requests_pending,
        producer_pending=producer_pending,
    )
    assert (lost, duplicated, unexpected) == (0, 0, 0)
    assert rss_growth <= RSS_TOLERANCE
    assert fd_growth <= FD_TOLERANCE
    assert requests_pending == 0
    assert producer_pending == 0
