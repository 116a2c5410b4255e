"""``subscriptionPrefix``: every subscription the connector makes starts with it, so a
namespace with ``subscriptionAuthMode=Prefix`` (a role may only subscribe with names
starting with its own) serves batch reads and streams; without it they fail with the
broker's AuthorizationError naming the topic. Bad values name the option."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from tests.support.official import produce
from tests.support.spark import assert_same_rows, available_now_values

URL = "pulsar://localhost:6650"
JAVA_AUTH = "org.apache.pulsar.client.impl.auth."


def test_the_option_and_its_java_spelling_reach_the_client() -> None:
    for key in ("subscriptionPrefix", "pulsar.reader.subscriptionRolePrefix", "SUBSCRIPTIONPREFIX"):
        parsed = parse_options({"service.url": URL, "topic": "t", key: " team-a "})
        assert parsed.subscription_prefix == "team-a"
        with open_client(parsed) as client:
            assert client.config.subscription_prefix == "team-a"
    parsed = parse_options({"service.url": URL, "topic": "t"})
    assert parsed.subscription_prefix is None


@pytest.mark.parametrize(
    ("value", "why"),
    [("", "empty"), ("team/a", "'/'"), ("team a", "' '"), ("pulsar.repl", "reserves")],
)
def test_bad_values_name_the_option(value: str, why: str) -> None:
    with pytest.raises(PulsarOptionError, match=why) as info:
        parse_options({"service.url": URL, "topic": "t", "subscriptionPrefix": value})
    assert info.value.option == "subscriptionPrefix"


@pytest.fixture(scope="module")
def prefix_namespace(apache_pulsar_secure) -> str:
    """A namespace where the client role may produce and consume, with prefix
    subscription authorization."""
    broker = apache_pulsar_secure
    namespace = f"public/prefix-{uuid.uuid4().hex[:6]}"
    admin = broker.admin
    admin.create_namespace(namespace)
    admin.grant_permission(namespace, broker.secure.client_role, ["produce", "consume"])
    admin.request("POST", f"namespaces/{namespace}/subscriptionAuthMode", "Prefix")
    assert admin.request("GET", f"namespaces/{namespace}/subscriptionAuthMode") == "Prefix"
    return namespace


def _options(broker, topic: str, **extra: str) -> dict[str, str]:
    sec = broker.secure
    return {
        "service.url": broker.service_url,
        "topic": topic,
        "pulsar.client.authPluginClassName": JAVA_AUTH + "AuthenticationToken",
        "pulsar.client.authParams": f"token:{sec.token}",
        "pulsar.client.tlsTrustCertsFilePath": sec.ca_cert,
        **extra,
    }


def _stream_rows(spark, options: dict[str, str], checkpoint: Path) -> list[str]:
    return [value for batch in available_now_values(spark, options, checkpoint) for value in batch]


def test_prefix_authorization_serves_batch_and_stream_reads(
    spark, apache_pulsar_secure, prefix_namespace, tmp_path
) -> None:
    broker = apache_pulsar_secure
    role = broker.secure.client_role
    topic = f"persistent://{prefix_namespace}/t-{uuid.uuid4().hex[:8]}"
    df = spark.createDataFrame(
        [(f"v{i}", f"k{i % 3}") for i in range(60)], "value string, key string"
    )
    df.write.format("pulsar").options(**_options(broker, topic)).mode("append").save()

    with_prefix = _options(broker, topic, subscriptionPrefix=role, startingOffsets="earliest")
    back = spark.read.format("pulsar").options(**with_prefix).load()
    assert_same_rows(back.selectExpr("cast(value as string) value", "cast(key as string) key"), df)
    streamed = _stream_rows(spark, with_prefix, tmp_path / "ok")
    assert sorted(streamed) == sorted(f"v{i}" for i in range(60))

    # Without the prefix (reader-<hex>), and with another role's: refused, named.
    for extra in ({}, {"subscriptionPrefix": "someone-else"}):
        options = _options(broker, topic, startingOffsets="earliest", **extra)
        with pytest.raises(Exception, match=r"(?s)AuthorizationError.*prefixed") as info:
            spark.read.format("pulsar").options(**options).load().count()
        assert topic in str(info.value)
    with pytest.raises(Exception, match=r"(?s)AuthorizationError.*prefixed") as info:
        _stream_rows(spark, _options(broker, topic, startingOffsets="earliest"), tmp_path / "no")
    assert topic in str(info.value)


def test_every_subscription_of_a_query_carries_the_prefix(
    spark, apache_pulsar, topic_name, tmp_path
) -> None:
    """The broker's log names each SUBSCRIBE: a batch read's (planning and tasks) and a
    stream's (the driver's kept last-id consumers, admission-control scans, tasks) all
    start with the prefix."""
    url = apache_pulsar.service_url
    produce(url, topic_name, [{"key": f"k{i % 3}", "value": f"v{i}"} for i in range(30)])
    since = apache_pulsar.log_size()
    options = {"service.url": url, "topic": topic_name, "subscriptionPrefix": "team-a"}
    assert spark.read.format("pulsar").options(**options).load().count() == 30
    streamed = _stream_rows(
        spark,
        {**options, "startingOffsets": "earliest", "maxRecordsPerTrigger": "10"},
        tmp_path / "cp",
    )
    assert sorted(streamed) == sorted(f"v{i}" for i in range(30))
    names = re.findall(
        rf"Subscribing on topic {re.escape(topic_name)} / (\S+)\.", apache_pulsar.log_text(since)
    )
    assert len(names) >= 4, names
    # Readers (non-durable), and the query's durable subscription.
    pattern = r"team-a-(reader-[0-9a-f]{10}|pulsar-spark-stream-[0-9a-f]{12})"
    assert all(re.fullmatch(pattern, name) for name in names), names
    assert any("pulsar-spark-stream-" in name for name in names), names
