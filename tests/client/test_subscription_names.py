"""The names of the subscriptions the client makes for itself: ``reader-<hex>``, or
``<prefix>-reader-<hex>`` with ``subscription_prefix``, for every SUBSCRIBE (reads,
id scans, last-id probes, the driver's kept last-id consumers); bad prefixes refused."""

from __future__ import annotations

import re

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.errors import InvalidArgument
from pulsar_spark.client.names import parse_topic
from pulsar_spark.client.read.last_ids import LastIds
from pulsar_spark.client.read.sub_names import check_prefix, fresh_name
from pulsar_spark.protocol import commands
from tests.support.official import produce


@pytest.fixture
def subscribed(monkeypatch) -> list[str]:
    """Every subscription name sent in a SUBSCRIBE while the test runs."""
    names: list[str] = []
    real = commands.subscribe

    def recording(*args, **kwargs):
        names.append(kwargs["subscription"])
        return real(*args, **kwargs)

    monkeypatch.setattr(commands, "subscribe", recording)
    return names


def test_fresh_names() -> None:
    assert re.fullmatch(r"reader-[0-9a-f]{10}", fresh_name())
    assert re.fullmatch(r"team-a-reader-[0-9a-f]{10}", fresh_name("team-a"))
    assert fresh_name("x") != fresh_name("x")


@pytest.mark.parametrize(
    ("prefix", "why"),
    [
        ("", "empty"),
        ("a/b", "'/'"),
        ("a b", "' '"),
        ("tab\tx", "'\\\\t'"),
        ("pulsar.repl.x", "reserves"),
        ("__compaction", "reserves"),
        ("x" * 201, "at most 200"),
    ],
)
def test_bad_prefixes_are_refused(prefix: str, why: str) -> None:
    with pytest.raises(InvalidArgument, match=why):
        check_prefix(prefix)
    with pytest.raises(InvalidArgument, match=why):
        PulsarClient("pulsar://localhost:6650", subscription_prefix=prefix)


def test_every_subscription_carries_the_prefix(pulsar_lite, topic_name, subscribed) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, [b"m%d" % i for i in range(20)])
    with PulsarClient(url, subscription_prefix="team-a") as client:
        assert len([r for b in client.read_batches(topic_name) for r in b.to_pylist()]) == 20
        assert len(list(client.scan_ids(topic_name, limit=5))) == 5
        assert client.get_last_message_id(topic_name) is not None
        assert client.entry_exists(topic_name, client.get_last_message_id(topic_name))
        with LastIds(client._lookup) as ids:
            assert ids.get([parse_topic(topic_name)])[parse_topic(topic_name)] is not None
    assert len(subscribed) >= 5
    for name in subscribed:
        assert re.fullmatch(r"team-a-reader-[0-9a-f]{10}", name), name
    subscribed.clear()
    with PulsarClient(url) as client:
        list(client.read_batches(topic_name))
        with LastIds(client._lookup) as ids:
            ids.get([parse_topic(topic_name)])
    assert subscribed and all(re.fullmatch(r"reader-[0-9a-f]{10}", n) for n in subscribed)
