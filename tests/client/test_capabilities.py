"""What a broker can do, from its CONNECTED answer: the release it names and the
behaviours of Apache Pulsar lines decided from it (``client/net/capabilities.py``). The
version strings are what the brokers of ``tests/lines`` send."""

from __future__ import annotations

import pytest

from pulsar_spark.client.net.capabilities import BrokerKind, Capabilities


@pytest.mark.parametrize(
    ("server_version", "release"),
    [
        ("Pulsar Server2.10.1", (2, 10, 1)),
        ("Pulsar Server3.3.6", (3, 3, 6)),
        ("Pulsar Server4.0.8", (4, 0, 8)),
        ("Pulsar Server4.2.4", (4, 2, 4)),
        ("Pulsar Server4.1.0-SNAPSHOT", (4, 1, 0)),
        ("Pulsar Server3.0", (3, 0, 0)),
        ("StreamNative Pulsar Server", None),
        ("", None),
        ("Pulsar-Lite-0.1.0", None),
    ],
)
def test_the_release_is_read_from_the_server_version(
    server_version: str, release: tuple[int, int, int] | None
) -> None:
    assert Capabilities.of(server_version, 21).release == release


@pytest.mark.parametrize(
    ("server_version", "may_be_marker"),
    [
        ("Pulsar Server2.10.1", True),
        ("Pulsar Server2.11.4", True),
        ("Pulsar Server3.0.4", True),
        ("Pulsar Server3.0.5", False),
        ("Pulsar Server3.1.3", True),
        ("Pulsar Server3.2.2", True),
        ("Pulsar Server3.2.3", False),
        ("Pulsar Server3.3.0", False),
        ("Pulsar Server3.3.6", False),
        ("Pulsar Server4.0.8", False),
        ("Pulsar Server4.2.4", False),
        ("Pulsar Server", False),  # no release named: taken as fixed
        ("Pulsar-Lite-0.1.0", False),
    ],
)
def test_which_releases_may_answer_a_marker_as_the_last_message_id(
    server_version: str, may_be_marker: bool
) -> None:
    assert Capabilities.of(server_version, 19).last_id_may_be_marker is may_be_marker


def test_pulsar_lite_is_told_apart_and_has_no_schema_registry() -> None:
    lite = Capabilities.of("Pulsar-Lite-0.1.0", 21)
    assert lite.kind is BrokerKind.LITE
    assert not lite.schema_registry
    assert not lite.get_or_create_schema
    apache = Capabilities.of("Pulsar Server2.10.1", 19)
    assert apache.kind is BrokerKind.PULSAR
    assert apache.get_or_create_schema
