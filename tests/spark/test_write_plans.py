"""The driver's write plans (:func:`pulsar_spark.spark.writer.plan_topic_writes`): binary
values without keyValueEncoding are planned without asking the broker for the topic's
schema (they go as given whatever it is); other values ask it."""

from __future__ import annotations

import socket

from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.write_schema import WritePlan
from pulsar_spark.spark.writer import plan_topic_writes

TOPIC = "persistent://public/default/plans"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _options(**extra: str):
    url = f"pulsar://127.0.0.1:{_closed_port()}"
    return parse_options(
        {"service.url": url, "topic": TOPIC, "connectionTimeoutMs": "2000", **extra}
    )


def test_binary_values_are_planned_without_the_broker() -> None:
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    plans = plan_topic_writes(_options(), schema)
    # the broker is away: a plan made anyway was made without it
    assert plans == {TOPIC: WritePlan(TOPIC, None)}


def test_other_values_ask_the_broker_and_leave_the_plan_to_the_tasks_when_it_is_away() -> None:
    text = StructType([StructField("value", StringType())])
    assert plan_topic_writes(_options(), text) == {}
    binary_kv = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    assert plan_topic_writes(_options(keyValueEncoding="separated"), binary_kv) == {}
