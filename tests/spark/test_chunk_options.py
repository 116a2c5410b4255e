"""The Java consumer's chunked-message options are real options here: the expiry of
incomplete chunked messages, how many may be put together, and dropping the oldest
instead of failing, in their Java spellings (``pulsar.reader.*``, ``pulsar.consumer.*``
and bare), reaching the client each reading task uses (its pooled client's key too).
"""

from __future__ import annotations

import logging

import pytest

from pulsar_spark.client import PartitionReader
from pulsar_spark.client.chunk_limits import ChunkLimits
from pulsar_spark.client.names import parse_topic
from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.option_passthrough import lookup
from pulsar_spark.spark.options import parse_options
from pulsar_spark.spark.worker_clients import client_key

URL = "pulsar://127.0.0.1:1"  # nothing connects
NAMES = (
    "expireTimeOfIncompleteChunkedMessageMillis",
    "maxPendingChunkedMessage",
    "autoAckOldestChunkedMessageOnQueueFull",
)


def test_the_defaults_are_a_minute_100_messages_and_failing() -> None:
    options = parse_options({"service.url": URL})
    assert (options.chunk_expiry, options.max_pending_chunked_messages) == (60.0, 100)
    assert options.drop_incomplete_chunks is False
    with open_client(options) as client:
        assert client.config.chunk_limits == ChunkLimits(100, 60.0, False)


@pytest.mark.parametrize("prefix", ["", "pulsar.reader.", "pulsar.consumer.", "PULSAR.READER."])
def test_the_java_spellings_reach_the_readers_of_the_client(prefix: str, caplog) -> None:
    values = ("2500", "7", "true")
    given = {"service.url": URL} | {prefix + n: v for n, v in zip(NAMES, values, strict=True)}
    with caplog.at_level(logging.WARNING):
        options = parse_options(given)
    assert not [r for r in caplog.records if "no effect" in r.getMessage()]
    with open_client(options) as client:
        assert client.config.chunk_limits == ChunkLimits(7, 2.5, True)
        reader = PartitionReader(client._lookup, parse_topic("t"))
        assert reader._chunks.limits == ChunkLimits(7, 2.5, True)
        assert reader._chunks._drop is True
    assert all(lookup("pulsar.reader." + n) is None for n in NAMES)  # no "ignored" rows left


def test_zero_is_no_age_bound_and_bad_values_name_the_option() -> None:
    options = parse_options({"service.url": URL, NAMES[0]: "0"})
    with open_client(options) as client:
        assert client.config.chunk_limits.expiry == 0
    for name, bad in ((NAMES[0], "-5"), (NAMES[1], "0"), (NAMES[2], "yes")):
        with pytest.raises(PulsarOptionError, match=name):
            parse_options({"service.url": URL, "pulsar.reader." + name: bad})


def test_pooled_clients_are_kept_apart_by_their_chunk_limits() -> None:
    plain = parse_options({"service.url": URL})
    keys = {client_key(plain, None)}
    for name, value in zip(NAMES, ("1000", "5", "true"), strict=True):
        keys.add(client_key(parse_options({"service.url": URL, name: value}), None))
    assert len(keys) == 4
