"""A batch read whose Python worker is killed mid-read: Spark retries the task, and the
DataFrame holds each message exactly once (Apache Pulsar; the query runs in a driver of its
own, ``local[2,4]``, so that Spark retries failed tasks)."""

from __future__ import annotations

import time

from tests.support.official import produce
from tests.support.spark_faults import Driver, figure, multiset_gaps


def test_a_killed_python_worker_is_retried_with_exact_rows(
    apache_pulsar, topic_name, tmp_path, record_property
) -> None:
    url = apache_pulsar.service_url
    apache_pulsar.admin.create_partitioned_topic(topic_name, 2)
    sent = [b"w%05d" % i for i in range(3000)]
    produce(url, topic_name, sent, batching_max_messages=50)
    job = {
        "mode": "batch",
        "source_format": "pulsar_killing",
        "source_options": {"service.url": url, "topic": topic_name},
    }
    t0 = time.monotonic()
    with Driver(job, tmp_path / "control") as driver:
        result = driver.wait(300)
    assert result.get("error") is None, f"{result['error']}\n{driver.tail()}"
    assert (tmp_path / "control" / "killed-batch-worker").exists()  # it did die once
    assert "Python worker exited unexpectedly" in driver.tail(200_000), driver.tail()
    got = [bytes.fromhex(v) for v in result["values"]]
    gaps = multiset_gaps(sent, got)
    figure(
        record_property,
        "batch_worker_killed",
        rows=len(got),
        **gaps,
        workers_killed=1,
        query_seconds=result["seconds"],
        test_seconds=round(time.monotonic() - t0, 1),
    )
    assert gaps == {"lost": 0, "duplicated": 0, "unexpected": 0}
