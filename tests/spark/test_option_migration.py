"""Other connectors' options (StreamNative, Databricks, Kafka, the Java client's keys): every
row of the migration tables goes through ``parse_options`` and does what its row says."""

from __future__ import annotations

import logging

import pytest

from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options import migration
from pulsar_spark.spark.options.keystore import STORE_OPTIONS
from pulsar_spark.spark.options.migration import FOREIGN, Foreign, Treatment
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.options.passthrough import JAVA_FIELDS
from pulsar_spark.spark.options.table import Scope, by_spelling

URL = "pulsar://localhost:6650"
_SELECTORS = {"topic", "topics", "topicsPattern"}


def _key(row: Foreign) -> str:
    return row.name[:-1] + "authParams" if row.name.endswith(".*") else row.name


def _options(row: Foreign, value: str) -> dict[str, str]:
    target = by_spelling(_key(row))
    options = {} if target is not None and target.name == "service.url" else {"service.url": URL}
    options[_key(row)] = value
    if target is None or target.name not in _SELECTORS | {"service.url"}:
        options["topic"] = "t"
    partner = {
        "pulsar.client.authPluginClassName": ("pulsar.client.authParams", "token:abc"),
        "pulsar.client.authParams": ("pulsar.client.authPluginClassName", "token"),
    }.get(target.name if target else "")
    if partner:
        options[partner[0]] = partner[1]
    if target is not None and target.name in STORE_OPTIONS:
        options["pulsar.client.useKeyStoreTls"] = "true"
    return options


@pytest.mark.parametrize("row", FOREIGN + JAVA_FIELDS, ids=lambda r: r.name)
def test_every_row_goes_through_the_parser(row: Foreign, caplog) -> None:
    key = _key(row)
    shadowed = by_spelling(key)
    if row.kind is Treatment.ALIAS:
        assert shadowed is not None and shadowed.name == row.target, row.name
        parsed = parse_options(_options(row, row.example))
        assert row.target in parsed.given
        return
    if shadowed is not None:
        # Another helper's row now implements it: the table's row answers first.
        parse_options(_options(row, row.example))
        return
    if row.kind is Treatment.IGNORED:
        migration._warned.discard(key.lower())
        with caplog.at_level(logging.WARNING, logger=migration.__name__):
            parse_options(_options(row, row.example))
            parse_options(_options(row, row.example))  # warned once only
        found = [r.getMessage() for r in caplog.records if key in r.getMessage()]
        assert len(found) == 1 and row.note in found[0], found
        return
    if row.kind is Treatment.REFUSED:
        with pytest.raises(PulsarOptionError) as info:
            parse_options(_options(row, row.example))
        assert info.value.option == key and info.value.reason == row.note
        return
    # BY_VALUE: "false" is what we do anyway; "true" either maps or is an error.
    parsed = parse_options(_options(row, "false"))
    assert "schemaMode" not in parsed.given
    with pytest.raises(PulsarOptionError, match="expected true or false"):
        parse_options(_options(row, "maybe"))


def test_allow_different_topic_schemas_is_raw_mode() -> None:
    parsed = parse_options({"service.url": URL, "topic": "t", "allowDifferentTopicSchemas": "TRUE"})
    assert parsed.schema_mode == "raw" and "schemaMode" in parsed.given
    same = {"allowDifferentTopicSchemas": "true", "schemaMode": "raw"}
    assert parse_options({"service.url": URL, "topic": "t", **same}).schema_mode == "raw"
    with pytest.raises(PulsarOptionError, match="means schemaMode=raw") as info:
        parse_options(
            {
                "service.url": URL,
                "topic": "t",
                "allowDifferentTopicSchemas": "true",
                "schemaMode": "auto",
            }
        )
    assert info.value.option == "allowDifferentTopicSchemas"


def test_true_is_refused_with_what_to_do() -> None:
    name = "waitingForNonExistedTopic"
    with pytest.raises(PulsarOptionError) as info:
        parse_options({"service.url": URL, "topic": "t", name: "true"})
    assert info.value.option == name and "remove" in info.value.reason


def test_predefined_subscription_is_a_durable_stream_subscription() -> None:
    parsed = parse_options({"service.url": URL, "topic": "t", "predefinedSubscription": "jobs"})
    assert parsed.subscription_name == "jobs"
    parsed.check_scope(Scope.STREAM_READ)
    with pytest.raises(PulsarOptionError, match="streaming reads only"):
        parsed.check_scope(Scope.BATCH_READ)


def test_warnings_and_errors_never_show_values(caplog) -> None:
    secret = "s3cr3t-value"
    migration._warned.discard("pulsar.admin.authparams")
    with caplog.at_level(logging.WARNING):
        parse_options({"service.url": URL, "topic": "t", "pulsar.admin.authParams": secret})
    assert caplog.records and secret not in caplog.text
    with pytest.raises(PulsarOptionError) as info:
        parse_options({"service.url": URL, "topic": "t", "pulsar.client.authParamMap": secret})
    assert secret not in str(info.value)


def test_java_keys_are_case_insensitive_and_reach_their_fields() -> None:
    parsed = parse_options(
        {
            "service.url": URL,
            "topic": "t",
            "PULSAR.CLIENT.operationTimeoutMs": "5000",
            "pulsar.client.CONNECTIONTIMEOUTMS": "2000",
            "pulsar.producer.batchingMaxMessages": "77",
            "pulsar.reader.receiverqueuesize": "12",
            "pulsar.client.keepAliveIntervalSeconds": "9",
        }
    )
    assert (parsed.operation_timeout, parsed.connect_timeout) == (5.0, 2.0)
    assert (parsed.batch_max_messages, parsed.receiver_queue_size) == (77, 12)
    assert parsed.keepalive_interval == 9


@pytest.mark.parametrize("prefix", ["pulsar.client.", "pulsar.reader.", "pulsar.producer."])
def test_an_unknown_key_under_a_prefix_lists_the_valid_ones(prefix: str) -> None:
    with pytest.raises(PulsarOptionError) as info:
        parse_options({"service.url": URL, "topic": "t", prefix + "noSuchField": "1"})
    reason = info.value.reason
    assert info.value.option == prefix + "noSuchField" and "valid keys" in reason
    expected = {
        "pulsar.client.": "operationTimeoutMs",
        "pulsar.reader.": "receiverQueueSize",
        "pulsar.producer.": "batchingMaxMessages",
    }[prefix]
    assert expected in reason
    if prefix == "pulsar.client.":  # ignored Java fields are listed, refused ones not
        assert "numIoThreads" in reason and "authParamMap" not in reason


def test_unknown_options_stay_errors() -> None:
    with pytest.raises(PulsarOptionError, match="unknown option"):
        parse_options({"service.url": URL, "topic": "t", "noSuchOption": "1"})


def test_listener_name_reaches_the_client() -> None:
    for key in ("listenerName", "pulsar.client.listenerName", "PULSAR.CLIENT.LISTENERNAME"):
        parsed = parse_options({"service.url": URL, "topic": "t", key: " external "})
        assert parsed.listener_name == "external"
        with open_client(parsed) as client:
            assert client.config.listener_name == "external"
    with open_client(parse_options({"service.url": URL, "topic": "t"})) as client:
        assert client.config.listener_name is None


def test_the_migration_table_renders() -> None:
    table = migration.markdown_table()
    assert table.count("\n") == len(FOREIGN) + 1
    assert "`admin.url`" in table and "`predefinedSubscription`" in table


def _between(text: str, marker: str) -> str:
    start, end = f"<!-- {marker} -->\n", f"\n<!-- /{marker} -->"
    assert start in text and end in text, f"no <!-- {marker} --> table in the page"
    return text[text.index(start) + len(start) : text.index(end)].strip()


def test_the_migration_tables_of_the_docs_are_the_generated_ones() -> None:
    """docs/guides/migrating.md carries the tables between ``<!-- migration -->`` and
    ``<!-- java-fields -->`` markers: :func:`migration.markdown_table`'s, of
    :data:`FOREIGN` and of :data:`JAVA_FIELDS`."""
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "guides" / "migrating.md").read_text("utf-8")
    assert _between(page, "migration") == migration.markdown_table()
    assert _between(page, "java-fields") == migration.markdown_table(JAVA_FIELDS)
