"""``listenerName`` against an Apache Pulsar with two advertised listeners (``internal`` on the
usual port, ``external`` on a second bound port): lookups made for a listener answer with its
address, and the Spark options reach the client: a Spark write and read through the
``external`` listener. Its own broker (module scope): the session fixtures keep their
configuration."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.options.parse import parse_options
from tests.support.apache import ApachePulsar
from tests.support.net import free_port
from tests.support.plugin import _close


class TwoListenerPulsar(ApachePulsar):
    """Apache Pulsar advertising ``internal`` (brokerServicePort) and ``external`` (a second
    port, bound through ``bindAddresses``); brokers talk to each other on ``internal``."""

    def _pick_ports(self, attempt: int) -> None:
        super()._pick_ports(attempt)
        port = free_port()
        while port in self.ports.values():
            port = free_port()
        self.ports["broker_external"] = port

    @property
    def external_url(self) -> str:
        return f"pulsar://127.0.0.1:{self._port('broker_external')}"

    def settings(self) -> dict[str, str]:
        s = super().settings()
        internal = f"pulsar://127.0.0.1:{self._port('broker')}"
        s.update({
            # advertisedListeners and advertisedAddress may not be set together.
            "advertisedAddress": "",
            "advertisedListeners": f"internal:{internal},external:{self.external_url}",
            "internalListenerName": "internal",
            "bindAddresses": f"external:{self.external_url}",
        })  # fmt: skip
        return s


@pytest.fixture(scope="module")
def two_listeners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoListenerPulsar]:
    broker = TwoListenerPulsar(
        tmp_path_factory.mktemp("apache_two_listeners"), name="two_listeners"
    )
    try:
        broker.start()
        yield broker
    finally:
        _close(broker)


def _ports(client) -> set[int]:
    """The broker ports the client's connections lead to: their own, or the port of the
    broker URL they are proxied to (a standalone broker answers lookups with
    ``proxy_through_service_url``: the client then reaches the answered address through
    the service URL's connection)."""
    found = set()
    for _, port, proxy_to in client._pool._connections:
        found.add(int(proxy_to.rsplit(":", 1)[1]) if proxy_to else port)
    return found


@pytest.mark.parametrize("spelling", ["listenerName", "pulsar.client.listenerName"])
def test_a_listener_name_connects_through_that_listener(
    two_listeners, topic_name, spelling
) -> None:
    broker = two_listeners
    internal, external = broker.port, broker.ports["broker_external"]
    # Discovery through the internal port; the topic's owner is looked up for "external".
    options = {"service.url": broker.service_url, "topic": topic_name, spelling: "external"}
    with open_client(parse_options(options)) as client:
        with client.create_producer(topic_name) as producer:
            for i in range(5):
                producer.send(f"v{i}".encode())
        values = [r["value"] for b in client.read_batches(topic_name) for r in b.to_pylist()]
        ports = _ports(client)
    assert values == [f"v{i}".encode() for i in range(5)]
    assert external in ports, f"no connection to the external listener's port: {ports}"
    # Without a listener name, the same lookups answer with the internal address only
    # (a broker answers a client that came in through a listener's bind address with that
    # listener, so discovery goes through the internal port here too).
    with open_client(
        parse_options({"service.url": broker.service_url, "topic": topic_name})
    ) as client:
        values = [r["value"] for b in client.read_batches(topic_name) for r in b.to_pylist()]
        ports = _ports(client)
    assert values == [f"v{i}".encode() for i in range(5)]
    assert ports == {internal}, (
        f"the default lookups did not answer with the internal port: {ports}"
    )


def test_an_unknown_listener_name_fails_naming_it(two_listeners, topic_name) -> None:
    options = {
        "service.url": two_listeners.service_url,
        "topic": topic_name,
        "listenerName": "nowhere",
        "pulsar.client.operationTimeoutMs": "10000",
    }
    with open_client(parse_options(options)) as client, pytest.raises(PulsarError) as info:
        client.get_partitions(topic_name)
        list(client.read_batches(topic_name))
    assert "nowhere" in str(info.value) or "listener" in str(info.value).lower()


def test_spark_writes_and_reads_through_the_named_listener(
    two_listeners, topic_name, spark
) -> None:
    broker = two_listeners
    options = {"service.url": broker.service_url, "topic": topic_name}
    rows = [(f"k{i}", f"v{i}".encode()) for i in range(200)]
    df = spark.createDataFrame(rows, "key string, value binary")
    df.write.format("pulsar").options(**options, listenerName="external").mode("append").save()
    got = (
        spark.read.format("pulsar")
        .options(**options, listenerName="external")
        .load()
        .select("key", "value")
        .collect()
    )
    assert sorted((bytes(r.key).decode(), bytes(r.value)) for r in got) == sorted(rows)
    # A listener the broker does not advertise: the job fails and names it.
    with pytest.raises(Exception, match=r"nowhere|listener"):
        spark.read.format("pulsar").options(
            **options, listenerName="nowhere", **{"pulsar.client.operationTimeoutMs": "10000"}
        ).load().count()
