"""Fixtures of the client tests: the ``broker`` fixture (tests/support/plugin.py) runs each
test on pulsar-lite and on Apache Pulsar; ``partitioned_broker`` does the same for a
topic with four partitions."""

from __future__ import annotations

import pytest

from tests.support.apache import BrokerHandle

PARTITIONS = 4


@pytest.fixture(params=["lite", "apache"])
def partitioned_broker(request: pytest.FixtureRequest, topic_name: str) -> BrokerHandle:
    """A broker on which ``topic_name`` has four partitions.

    pulsar-lite cannot create a partitioned topic on demand: its instance with
    ``default_partitions = 4`` partitions every new name. Apache Pulsar gets the
    topic created through its admin API.
    """
    if request.param == "lite":
        lite = request.getfixturevalue("pulsar_lite_partitioned")
        return BrokerHandle("lite", lite.service_url, None, lite)
    apache = request.getfixturevalue("apache_pulsar")
    handle = BrokerHandle("apache", apache.service_url, apache.http_url, apache)
    handle.admin.create_partitioned_topic(topic_name, PARTITIONS)
    return handle
