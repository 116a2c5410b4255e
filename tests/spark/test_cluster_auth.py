"""OAuth2 and Kerberos on Spark with separate executor processes (``local-cluster[2,1,1024]``)
against the secure Apache broker, whose issuer and realm (:mod:`tests.support.identity`)
check every credential.

A driver subprocess writes from 4 Spark partitions, reads back split 4 ways and streams the
topic once (``availableNow``), with each method's options as users write them. The driver's
Python processes and each executor's Python workers build their own provider from the
options and fetch their own credential (an OAuth2 token from the token endpoint, a Kerberos
ticket-granting ticket from the KDC), then keep it for the connections that follow: the
issuer and the KDC count what they handed out, at least one per process and fewer than the
tasks that connected.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.support.apache import ApachePulsar
from tests.support.figures import figure
from tests.support.identity import AUDIENCE, CLIENT

REPO = Path(__file__).resolve().parents[2]
ROWS = 400
SPLITS = 4


def _job_options(broker: ApachePulsar) -> dict[str, dict[str, str]]:
    identity = broker.identity
    assert identity is not None and broker.secure is not None
    base = {
        "service.url": broker.service_url,
        "pulsar.client.tlsTrustCertsFilePath": broker.secure.ca_cert,
    }
    oauth2 = {
        "issuerUrl": identity.oidc.url,
        "privateKey": identity.credentials_file.as_uri(),
        "audience": AUDIENCE,
    }
    kerberos = {
        "principal": identity.principal,
        "keyTab": str(identity.keytab),
        "krb5Conf": str(identity.kdc.krb5_conf),
    }
    return {
        "oauth2": {
            **base,
            "pulsar.client.authPluginClassName": "oauth2",
            "pulsar.client.authParams": json.dumps(oauth2),
        },
        "kerberos": {
            **base,
            "pulsar.client.authPluginClassName": "sasl",
            "pulsar.client.authParams": json.dumps(kerberos),
        },
    }


def _tickets(broker: ApachePulsar) -> int:
    """Ticket-granting tickets the realm issued the Kerberos client principal so far."""
    assert broker.identity is not None
    return len(broker.identity.kdc.tgts_issued(broker.identity.principal))


def test_the_driver_and_each_executor_authenticate_on_their_own(
    apache_pulsar_secure, topic_name, tmp_path, record_property
) -> None:
    broker = apache_pulsar_secure
    assert broker.identity is not None
    job = {
        "options": _job_options(broker),
        "topic": topic_name,
        "out": str(tmp_path),
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.pop("KRB5_CONFIG", None)  # the options' krb5Conf says where the realm is
    tokens_before, tickets_before = broker.identity.oidc.issued[CLIENT], _tickets(broker)
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        done = subprocess.run(
            [sys.executable, __file__, json.dumps(job)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=600,
            check=False,
        )
    text = log.read_text(errors="replace")
    assert done.returncode == 0, text[-5000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["executors"] == 2
    fetched = {
        "oauth2": broker.identity.oidc.issued[CLIENT] - tokens_before,
        "kerberos": _tickets(broker) - tickets_before,
    }
    for method, seen in result["methods"].items():
        want = sorted(f"{method}-{i:04d}" for i in range(ROWS))
        assert seen["read"] == want, method
        assert seen["streamed"] == ROWS, method
        assert len(seen["read_executors"]) == 2, f"{method}: read by {seen['read_executors']}"
        # The driver and both executors fetched their own; far fewer than the tasks.
        assert 3 <= fetched[method] < seen["tasks"], (method, fetched[method], seen["tasks"])
    figure(
        record_property,
        "cluster_credentials",
        tokens_fetched=fetched["oauth2"],
        tickets_fetched=fetched["kerberos"],
        tasks={m: s["tasks"] for m, s in result["methods"].items()},
        seconds=round(result["seconds"]),
    )


# ---------------------------------------------------------------------------
# The driver subprocess
# ---------------------------------------------------------------------------


def _driver(job: dict) -> None:
    from pyspark import TaskContext

    from tests.support.spark_cluster import executor_of, local_cluster_session

    started = time.perf_counter()
    spark, executors = local_cluster_session("pulsar-spark-cluster-auth-test")
    out = Path(job["out"])
    result: dict = {"methods": {}}
    try:
        result["executors"] = executors
        for method, options in job["options"].items():
            topic = f"{job['topic']}-{method}"
            rows = [(f"{method}-{i:04d}",) for i in range(ROWS)]
            frame = spark.createDataFrame(
                spark.sparkContext.parallelize(rows, SPLITS), "value string"
            )
            frame.write.format("pulsar").options(**options).option("topic", topic).mode(
                "append"
            ).save()
            read = (
                spark.read.format("pulsar")
                .options(**options)
                .option("topic", topic)
                .option("minPartitions", str(SPLITS))
                .load()
            )
            values = sorted(r.value for r in read.selectExpr("cast(value as string)").collect())

            def worker_pid(_rows):  # type: ignore[no-untyped-def]
                yield (os.getppid(), TaskContext.get().partitionId())

            pids = read.select("value").rdd.mapPartitions(worker_pid).collect()
            splits = read.rdd.getNumPartitions()
            name = f"cluster_{method}"
            query = (
                spark.readStream.format("pulsar")
                .options(**options)
                .option("topic", topic)
                .option("startingOffsets", "earliest")
                .load()
                .writeStream.format("memory")
                .queryName(name)
                .option("checkpointLocation", str(out / f"checkpoint-{method}"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(300)
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            result["methods"][method] = {
                "read": values,
                "read_executors": sorted({executor_of(pid) for pid, _ in pids}),
                "streamed": spark.table(name).count(),
                # Tasks that connected: the writes, the read twice over, the stream's.
                "tasks": SPLITS + 2 * splits + 1,
            }
        result["seconds"] = time.perf_counter() - started
    finally:
        spark.stop()
    (out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    _driver(json.loads(sys.argv[1]))
