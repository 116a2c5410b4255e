"""The ``stock`` Apache Pulsar variant behaves like a production broker on a fast clock.

``apache_pulsar_stock`` (tests/support/plugin.py) runs Apache Pulsar 4.0's stock
data-lifecycle policies (``tests.support.apache.STOCK_SETTINGS``): no retention, so a
topic keeps only what a durable subscription has not acknowledged; ledgers roll every 20
entries and closed ones nobody needs are deleted by a retention check every second; a
topic with no subscription and no producer is deleted after 3 s. These tests show each of
the three with the official client and the admin API, and print what they saw.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.support import apache as ap
from tests.support.apache import ApachePulsar
from tests.support.official import official_client, produce, read_all

pulsar: Any = pytest.importorskip("pulsar")

MESSAGES = 100


def _entries(broker: ApachePulsar, topic: str) -> tuple[int, list[int]]:
    """The topic's stored entries and its ledger ids (the broker's internal stats)."""
    stats = broker.admin.internal_stats(topic)
    return int(stats["numberOfEntries"]), [int(x["ledgerId"]) for x in stats["ledgers"]]


def test_the_stock_settings_are_in_force(apache_pulsar_stock: ApachePulsar) -> None:
    conf = apache_pulsar_stock.config_path.read_text()
    for key, value in ap.STOCK_SETTINGS.items():
        assert f"\n{key}={value}\n" in conf
    assert "\nbrokerDeleteInactiveTopicsEnabled=false\n" not in conf


def test_without_a_durable_subscription_closed_ledgers_are_trimmed(
    apache_pulsar_stock: ApachePulsar, topic_name: str
) -> None:
    broker = apache_pulsar_stock
    with official_client(broker.service_url) as client:
        # The producer stays connected, so the topic is trimmed, not deleted.
        producer = client.create_producer(topic_name, batching_enabled=False)
        for i in range(MESSAGES):
            producer.send(f"m-{i}".encode())
        written = time.monotonic()
        stored, ledgers = _entries(broker, topic_name)
        # Every closed ledger goes: only the one open for writing stays.
        broker.admin.wait_until(
            lambda: len(_entries(broker, topic_name)[1]) == 1, 10, "closed ledgers trimmed"
        )
        trimmed_after = time.monotonic() - written
        stored_after, ledgers_after = _entries(broker, topic_name)
        got = read_all(broker.service_url, topic_name)
        producer.close()
    print(
        f"\nno durable subscription: {MESSAGES} written; right after: {stored} entries in "
        f"ledgers {ledgers}; {trimmed_after:.1f} s later: {stored_after} entries in ledgers "
        f"{ledgers_after}; a reader from earliest got {len(got)}"
    )
    assert len(got) < MESSAGES
    assert len(got) == stored_after  # what the open ledger holds, if anything
    assert [m["value"] for m in got] == [
        f"m-{i}".encode() for i in range(MESSAGES - len(got), MESSAGES)
    ]


def test_a_durable_subscription_holds_the_data_while_away(
    apache_pulsar_stock: ApachePulsar, topic_name: str
) -> None:
    broker = apache_pulsar_stock
    away = 8.0  # longer than the inactivity window (3 s), many retention checks (1 s)
    with official_client(broker.service_url) as client:
        client.subscribe(
            topic_name,
            "durable",
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Earliest,
        ).close()
    values = [f"m-{i}".encode() for i in range(MESSAGES)]
    produce(broker.service_url, topic_name, values, batching=False)
    time.sleep(away)
    stored, ledgers = _entries(broker, topic_name)
    with official_client(broker.service_url) as client:
        consumer = client.subscribe(
            topic_name,
            "durable",
            consumer_type=pulsar.ConsumerType.Exclusive,
            initial_position=pulsar.InitialPosition.Earliest,
        )
        got: list[bytes] = []
        try:
            while len(got) < MESSAGES:
                msg = consumer.receive(timeout_millis=10_000)
                got.append(msg.data())
            consumer.acknowledge_cumulative(msg)
        except pulsar.Timeout:
            pass
        finally:
            consumer.close()
    print(
        f"\ndurable subscription, consumer away {away:.0f} s: {stored} entries stored in "
        f"ledgers {ledgers}; it came back to {len(got)} of {MESSAGES}"
    )
    assert len(ledgers) > 1  # ledgers did roll: the data survived retention checks
    assert got == values


def test_a_topic_with_no_subscription_and_no_producer_is_deleted(
    apache_pulsar_stock: ApachePulsar, topic_name: str
) -> None:
    broker = apache_pulsar_stock
    admin = broker.admin
    produce(broker.service_url, topic_name, [b"x"], batching=False)
    closed = time.monotonic()
    assert topic_name in admin.list_topics()
    admin.wait_until(lambda: topic_name not in admin.list_topics(), 15, "inactive topic deleted")
    gone = time.monotonic() - closed
    print(f"\nno subscription, no producer: deleted {gone:.1f} s after its producer closed")
    assert gone >= 1.0  # not at once: after the inactivity window (3 s, checked every 1 s)
