"""The Apache Pulsar fixtures (tests/support/apache.py) and its admin helper (admin.py):
distribution, configuration, readiness, restart with data, the REST calls, and the
``broker`` fixture that runs a test on both brokers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest

from pulsar_spark.client import PulsarClient
from tests.support import apache as ap
from tests.support.admin import AdminError, PulsarAdmin, topic_path
from tests.support.official import produce
from tests.support.process import BrokerStartError

# -- without a broker ----------------------------------------------------------------


def test_the_pinned_distribution_comes_from_maven_central() -> None:
    assert ap.PULSAR_VERSION.startswith("4.0.")
    assert ap.dist_url() == (
        "https://repo1.maven.org/maven2/org/apache/pulsar/pulsar-server-distribution/"
        f"{ap.PULSAR_VERSION}/pulsar-server-distribution-{ap.PULSAR_VERSION}-bin.tar.gz"
    )
    assert len(ap.DIST_SHA1) == 40


def test_a_failed_download_names_the_url(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PULSAR_SPARK_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PULSAR_SPARK_MAVEN_URL", "http://127.0.0.1:9/maven2")
    with pytest.raises(
        ap.DistributionError,
        match=r"cannot download http://127\.0\.0\.1:9/"
        r"maven2/org/apache/pulsar/pulsar-server-distribution/.*\.sha1: ",
    ):
        ap.ensure_distribution("4.0.999")
    assert not list((tmp_path / "cache").glob("apache-pulsar-*"))


def test_render_config_replaces_in_place_and_appends_the_rest() -> None:
    template = "# comment=1\na=1\nb = 2\na=3\n#c=4\n"
    out = ap.render_config(template, {"a": "x", "c": "y"})
    lines = out.splitlines()
    assert lines[:3] == ["# comment=1", "a=x", "b = 2"]
    assert "#c=4" in lines and lines[-1] == "c=y"
    keys = [line.split("=")[0].strip() for line in lines if line and not line.startswith("#")]
    assert len(keys) == len(set(keys))  # the bookie's reader turns repeats into lists


def test_the_repository_config_has_no_duplicate_keys() -> None:
    text = (ap.CONFIG_DIR / "standalone.conf").read_text()
    keys = [
        line.split("=")[0].strip()
        for line in text.splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    ]
    assert len(keys) == len(set(keys))


def test_make_token_is_an_hs256_jwt() -> None:
    secret = b"s" * 32
    token = ap.make_token(secret, "role-x", expires_in=60)
    head, body, sig = token.split(".")

    def decode(part: str) -> bytes:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

    assert json.loads(decode(head)) == {"alg": "HS256", "typ": "JWT"}
    claims = json.loads(decode(body))
    assert claims["sub"] == "role-x" and abs(claims["exp"] - time.time() - 60) < 5
    assert decode(sig) == hmac.new(secret, f"{head}.{body}".encode(), hashlib.sha256).digest()


def test_topic_path() -> None:
    assert topic_path("t") == "persistent/public/default/t"
    assert topic_path("persistent://a/b/c d") == "persistent/a/b/c%20d"
    assert topic_path("non-persistent://a/b/c") == "non-persistent/a/b/c"
    with pytest.raises(ValueError, match="not a topic name"):
        topic_path("a/b")


# -- the session brokers -------------------------------------------------------------------


@pytest.mark.parametrize(
    "fixture", ["apache_pulsar", "apache_pulsar_secure", "apache_pulsar_dedup"]
)
def test_each_variant_is_ready(request, fixture: str) -> None:
    broker = request.getfixturevalue(fixture)
    assert broker.kind == "apache"
    assert ap.PULSAR_VERSION in (broker.server_version or "")
    assert "public/default" in broker.admin.namespaces("public")
    assert broker.admin.clusters() == ["standalone"]
    assert broker.cold_start_seconds is not None and broker.cold_start_seconds < 120
    assert broker.rss_bytes() < 1024 * 2**20  # -Xmx512m + 256m direct + the rest
    assert broker.log_path.exists()
    with pytest.raises(RuntimeError, match="shared session broker"):
        broker.restart()


def test_the_dedup_variant_settings_are_in_force(apache_pulsar_dedup, topic_name) -> None:
    produce(apache_pulsar_dedup.service_url, topic_name, [b"x"])
    assert apache_pulsar_dedup.admin.get_deduplication(topic_name) is True
    conf = apache_pulsar_dedup.config_path.read_text()
    for key, value in ap.DEDUP_SETTINGS.items():
        assert f"\n{key}={value}\n" in conf


# -- admin helper ----------------------------------------------------------------------------


def test_admin_calls_round_trip(apache_pulsar, topic_name) -> None:
    admin = apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 2)
    assert admin.partitions(topic_name) == 2
    admin.update_partitions(topic_name, 3)
    assert admin.partitions(topic_name) == 3
    produce(apache_pulsar.service_url, topic_name, [f"v{i}".encode() for i in range(9)])
    part = f"{topic_name}-partition-0"
    # Topic policies go on the partitioned topic (a partition refuses them: HTTP 412).
    admin.set_deduplication(topic_name, True)
    admin.wait_until(lambda: admin.get_deduplication(topic_name) is True, 10, "dedup policy")
    admin.set_retention(topic_name, minutes=-1, size_mb=-1)
    admin.wait_until(
        lambda: (
            (admin.get_retention(topic_name, applied=False) or {}).get("retentionTimeInMinutes")
            == -1
        ),
        10,
        "retention policy",
    )
    with pytest.raises(AdminError, match="HTTP 412"):
        admin.set_deduplication(part, True)
    admin.set_namespace_retention("public/default")  # unlimited: the fixture's default
    namespace = f"public/{topic_path(topic_name).rsplit('/', 1)[1][-8:]}"
    admin.create_namespace(namespace)
    assert namespace in admin.namespaces("public")
    admin.set_namespace_deduplication(namespace, True)
    admin.set_namespace_retention(namespace, minutes=10, size_mb=1)
    admin.unload_namespace(namespace)
    stats = admin.partitioned_stats(topic_name)
    assert stats["msgInCounter"] == 9
    assert sum(p["msgInCounter"] for p in stats["partitions"].values()) == 9
    part = max(stats["partitions"], key=lambda p: stats["partitions"][p]["msgInCounter"])
    assert admin.stats(part)["msgInCounter"] >= 1
    internal = admin.internal_stats(part)
    assert internal["entriesAddedCounter"] >= 1 and internal["ledgers"]
    admin.unload(part)
    assert part in admin.list_topics()
    admin.delete_partitioned_topic(topic_name)
    with pytest.raises(AdminError) as info:
        admin.stats(topic_name + "-missing")
    assert info.value.status == 404
    single = f"{topic_name}-single"
    admin.create_topic(single)
    produce(apache_pulsar.service_url, single, [b"a", b"b"])
    assert admin.terminate(single).count(":") == 1
    assert admin.internal_stats(single)["state"] == "Terminated"
    admin.delete(single)


def test_admin_errors_name_the_url_and_the_body(apache_pulsar, topic_name) -> None:
    admin = apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 1)
    with pytest.raises(AdminError) as info:
        admin.create_partitioned_topic(topic_name, 1)
    err = info.value
    assert err.status == 409
    assert str(err).startswith(
        f"PUT {apache_pulsar.http_url}/admin/v2/{topic_path(topic_name)}/partitions: HTTP 409: "
    )
    assert "already exist" in err.body.lower()
    dead = PulsarAdmin("http://127.0.0.1:9", timeout=2)
    with pytest.raises(
        AdminError,
        match=r"GET http://127\.0\.0\.1:9/admin/v2/clusters: "
        r"no answer: .*(?i:refused)",
    ):
        dead.clusters()


# -- restart -------------------------------------------------------------------------------


def test_restart_keeps_acknowledged_data_and_the_ports(fresh_apache_pulsar, topic_name) -> None:
    broker = fresh_apache_pulsar()
    url, http = broker.service_url, broker.http_url
    sent = [f"m-{i}".encode() for i in range(1000)]
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for value in sent:
            producer.send(value)
    rss = broker.rss_bytes()
    restart = broker.restart()
    assert (broker.service_url, broker.http_url) == (url, http)
    with PulsarClient(url) as client:
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
    assert values == sent
    print(
        f"\ncold start {broker.cold_start_seconds:.1f} s, restart {restart:.1f} s "
        f"(stop {broker.stop_seconds[-1]:.1f} s), RSS before restart {rss / 2**20:.0f} MiB, "
        f"after {broker.rss_bytes() / 2**20:.0f} MiB"
    )
    assert restart < 120
    # A crash (SIGKILL of the JVM's process group): acknowledged messages are in the
    # bookie's journal (written, not fsynced: journalSyncData=false) and survive it.
    more = [f"n-{i}".encode() for i in range(500)]
    with PulsarClient(url) as client, client.create_producer(topic_name) as producer:
        for value in more:
            producer.send(value)
    broker.kill()
    broker.start()
    with PulsarClient(url) as client:
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
    assert values == sent + more


def test_a_broker_that_cannot_start_fails_with_its_log(fresh_apache_pulsar) -> None:
    broker = fresh_apache_pulsar(start=False, settings={"managedLedgerDefaultEnsembleSize": "x"})
    with pytest.raises(
        BrokerStartError,
        match=r"(?s)exited with status .*broker log \(tail\)"
        r".*managedLedgerDefaultEnsembleSize",
    ):
        broker.start(timeout=60)
    assert not broker.running


# -- both brokers -----------------------------------------------------------------------


def test_the_broker_fixture_runs_a_test_on_both_brokers(broker, topic_name) -> None:
    """How the client suite runs on both brokers: ``broker.kind`` is ``lite`` or
    ``apache``; ``broker.http_url`` is None on pulsar-lite, which has no admin API."""
    assert broker.kind in ap.BROKER_KINDS
    with PulsarClient(broker.service_url) as client:
        with client.create_producer(topic_name) as producer:
            producer.send(b"on both")
        rows = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["value"] for r in rows] == [b"on both"]
    if broker.kind == "apache":
        assert broker.admin.stats(topic_name)["msgInCounter"] == 1
    else:
        assert broker.http_url is None
