"""Typed reads with a schema given by the user, on pulsar-lite (no schema registry): Avro and
JSON values (the ``avroSchema`` and ``jsonSchema`` options), dead-letter mode, raw mode."""

from __future__ import annotations

import datetime as dt
import io
import json
import time
from typing import Any

import fastavro
import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from pulsar_spark.spark import SPARK_SCHEMA
from pulsar_spark.spark.compat import spark_version
from tests.support.official import produce

ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "at",
            "type": {"type": "long", "logicalType": "timestamp-millis"},
        },
        {
            "name": "ship",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Address",
                    "fields": [{"name": "city", "type": "string"}],
                },
            ],
            "default": None,
        },
    ],
}
UTC = dt.timezone.utc


def _avro(record: dict[str, Any], schema: Any = ORDER) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def _order(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "note": None if i % 2 else f"note {i}",
        "tags": [f"t{j}" for j in range(i % 3)],
        "at": dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(milliseconds=i),
        "ship": {"city": f"city {i}"} if i % 3 else None,
    }


def test_avro_values_read_with_the_users_avro_schema(read_pulsar, pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, [_avro(_order(i)) for i in range(30)], batching_max_messages=7)
    started = time.monotonic()
    df = read_pulsar(
        url, topic=topic_name, avroSchema=json.dumps(ORDER), operationTimeoutMs="120000"
    )
    assert time.monotonic() - started < 20  # no registry to wait for (120 s if it asked)
    value = df.schema["value"].dataType
    assert value == T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("note", T.StringType(), True),
            T.StructField("tags", T.ArrayType(T.StringType(), False), False),
            T.StructField("at", T.TimestampType(), False),
            T.StructField(
                "ship", T.StructType([T.StructField("city", T.StringType(), False)]), True
            ),
        ]
    )
    # Every other column is the row schema's; no version on pulsar-lite.
    assert [f for f in df.schema.fields if f.name != "value"] == [
        f for f in SPARK_SCHEMA.fields if f.name != "value"
    ]
    rows = sorted(df.select("value.*", "schemaVersion").collect(), key=lambda r: r.id)
    assert len(rows) == 30
    for i, row in enumerate(rows):
        expected = _order(i)
        assert row.id == i
        assert row.note == expected["note"]
        assert row.tags == expected["tags"]
        assert row.at == expected["at"].replace(tzinfo=None)  # the session's zone is UTC
        assert (row.ship.city if row.ship else None) == (
            expected["ship"]["city"] if expected["ship"] else None
        )
        assert row.schemaVersion is None


def test_a_primitive_avro_schema_gives_a_primitive_column(
    read_pulsar, pulsar_lite, topic_name
) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, [_avro(n, "long") for n in (5, -1, 2**40)])
    df = read_pulsar(url, topic=topic_name, valueAvroSchema='"long"')
    assert df.schema["value"].dataType == T.LongType()
    assert sorted(r.value for r in df.select("value").collect()) == [-1, 5, 2**40]


def _documents() -> list[bytes]:
    docs = [
        {"id": 1, "name": "a", "tags": ["x"], "price": 1.5},
        {"id": 2, "name": None, "extra": {"ignored": True}},  # unknown fields are ignored
        {"id": 3, "price": 2},
    ]
    # Pretty-printed as the Python client's JsonSchema writes them, and compact.
    return [
        json.dumps(d, indent=True).encode() if d["id"] % 2 else json.dumps(d).encode() for d in docs
    ]


def test_json_values_read_with_a_ddl_string(spark, read_pulsar, pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    produce(url, topic_name, _documents())
    df = read_pulsar(
        url, topic=topic_name, jsonSchema="id BIGINT, name STRING, tags ARRAY<STRING>, price DOUBLE"
    )
    assert df.schema["value"].dataType == T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("name", T.StringType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField("price", T.DoubleType()),
        ]
    )
    rows = sorted(df.select("value.*").collect(), key=lambda r: r.id)
    assert rows == [
        Row(id=1, name="a", tags=["x"], price=1.5),
        Row(id=2, name=None, tags=None, price=None),
        Row(id=3, name=None, tags=None, price=2.0),
    ]
    # An Avro schema describes JSON values too (Pulsar's JSON schema data).
    avro = {
        "type": "record",
        "name": "Doc",
        "fields": [{"name": "id", "type": "long"}, {"name": "price", "type": ["null", "double"]}],
    }
    df = read_pulsar(url, topic=topic_name, valueJsonSchema=json.dumps(avro))
    assert sorted(tuple(r) for r in df.select("value.*").collect()) == [
        (1, 1.5),
        (2, None),
        (3, 2.0),
    ]


def test_values_that_do_not_decode_fail_or_go_to_the_dead_letter_column(
    read_pulsar, pulsar_lite, topic_name
) -> None:
    url = pulsar_lite.service_url
    good = [_avro(_order(i)) for i in range(4)]
    truncated = _avro(_order(7))[:3]
    ids = produce(url, topic_name, [*good[:2], truncated, *good[2:]], batching=False)
    schema = json.dumps(ORDER)
    with pytest.raises(Exception, match=rf"field \w+: message {ids[2]}: ") as failed:
        read_pulsar(url, topic=topic_name, avroSchema=schema).collect()
    assert "SchemaDecodeError" in str(failed.value)
    assert topic_name in str(failed.value)

    df = read_pulsar(url, topic=topic_name, avroSchema=schema, decodeErrorMode="deadLetter")
    assert df.schema.names[-1] == "decodeError"
    rows = {r.messageId: r for r in df.select("messageId", "value", "decodeError").collect()}
    assert len(rows) == 5
    bad = rows.pop(ids[2])
    assert bad.value is None
    assert bad.decodeError.startswith("field ")
    assert sorted(r.value.id for r in rows.values()) == [0, 1, 2, 3]
    assert {r.decodeError for r in rows.values()} == {None}

    # JSON: a document that is not JSON, and one of the wrong type.
    other = f"{topic_name}-json"
    ids = produce(url, other, [b'{"id": 1}', b"{nope", b'{"id": "text"}', b'{"id": 4}'])
    df = read_pulsar(url, topic=other, jsonSchema="id BIGINT", decodeErrorMode="PERMISSIVE")
    rows = {r.messageId: r for r in df.select("messageId", "value", "decodeError").collect()}
    assert [rows[i].value.id if rows[i].value else None for i in ids] == [1, None, None, 4]
    assert [rows[i].decodeError is None for i in ids] == [True, False, False, True]
    with pytest.raises(Exception, match=rf"message {ids[1]}"):
        read_pulsar(url, topic=other, jsonSchema="id BIGINT").collect()


def test_raw_mode_and_topics_without_a_schema_read_bytes(
    read_pulsar, pulsar_lite, topic_name
) -> None:
    url = pulsar_lite.service_url
    payloads = [_avro(_order(i)) for i in range(3)]
    produce(url, topic_name, payloads)
    for options in ({}, {"schemaMode": "raw"}, {"schemaMode": "RAW"}):
        # pulsar-lite never answers GET_SCHEMA: a load() that asked would wait for the
        # operation timeout, made 120 s here. load() alone (the schema's planning, no
        # reading) must take a fraction of it: 20 s leaves a busy machine's Python worker
        # start ample room and is still far below any wait for an answer.
        started = time.monotonic()
        df = read_pulsar(url, topic=topic_name, operationTimeoutMs="120000", **options)
        assert time.monotonic() - started < 20, options
        assert df.schema == SPARK_SCHEMA
        assert sorted(r.value for r in df.select("value").collect()) == sorted(payloads)
        assert {r.schemaVersion for r in df.select("schemaVersion").collect()} == {None}
    # Dead-letter mode on bytes: the column is there, always null.
    df = read_pulsar(url, topic=topic_name, decodeErrorMode="deadLetter")
    assert df.schema.names == [*SPARK_SCHEMA.names, "decodeError"]
    assert {r.decodeError for r in df.collect()} == {None}


def test_schema_options_errors(spark, pulsar_lite, topic_name) -> None:
    def load(**options: str) -> None:
        reader = spark.read.format("pulsar").option("service.url", pulsar_lite.service_url)
        reader.option("topic", topic_name).options(**options).load()

    with pytest.raises(Exception, match=r"'jsonSchema': DDL .*expected a type"):
        load(jsonSchema="id BIGINTEGER")
    with pytest.raises(Exception, match=r"'avroSchema': .*union of several non-null types"):
        load(avroSchema='["int", "string"]')
    with pytest.raises(Exception, match=r"'avroSchema': decodes or encodes values.*raw"):
        load(schemaMode="raw", avroSchema='"long"')
    with pytest.raises(Exception, match=r"'schemaMode': expected one of auto, raw"):
        load(schemaMode="typed")


LOGICAL = {
    "type": "record",
    "name": "Times",
    "fields": [
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "clock", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
        },
        {"name": "tags", "type": {"type": "map", "values": "int"}},
    ],
}


def test_avro_logical_types_become_spark_types(read_pulsar, pulsar_lite, topic_name) -> None:
    import decimal

    url = pulsar_lite.service_url
    record = {
        "day": dt.date(2026, 3, 4),
        "clock": dt.time(13, 14, 15, 16000),
        "local": dt.datetime(2026, 3, 4, 5, 6, 7, 8),
        "price": decimal.Decimal("12.34"),
        "tags": {"a": 1},
    }
    produce(url, topic_name, [_avro(record, LOGICAL)])
    df = read_pulsar(url, topic=topic_name, avroSchema=json.dumps(LOGICAL))
    value = df.schema["value"].dataType
    assert value["day"].dataType == T.DateType()
    assert value["local"].dataType == T.TimestampNTZType()
    assert value["price"].dataType == T.DecimalType(9, 2)
    assert value["tags"].dataType == T.MapType(T.StringType(), T.IntegerType(), False)
    row = df.select("value.*").collect()[0]
    assert (row.day, row.local, row.price, row.tags) == (
        record["day"],
        record["local"],
        record["price"],
        record["tags"],
    )
    # The time of day: Spark's TimeType where it has one (4.1+), else microseconds of the day.
    assert row.clock in (record["clock"], ((13 * 60 + 14) * 60 + 15) * 10**6 + 16_000)


@pytest.mark.skipif(
    spark_version() < (4, 1),
    reason="streaming writes need Spark 4.1+ (test_stream.py tests the error)",
)
def test_a_typed_stream_into_a_typed_sink(spark, read_pulsar, pulsar_lite, topic_name, tmp_path):
    """JSON values streamed as typed columns into a topic written as AVRO, read back with
    the schema the sink derived (pulsar-lite keeps none)."""
    url = pulsar_lite.service_url
    source, target = f"{topic_name}-json", f"{topic_name}-avro"
    produce(url, source, [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in range(40)])
    stream = (
        spark.readStream.format("pulsar")
        .option("service.url", url)
        .option("topic", source)
        .option("startingOffsets", "earliest")
        .option("jsonSchema", "id BIGINT, name STRING")
        .load()
        .where("value.id % 2 = 0")
        .select("value")
    )
    query = (
        stream.writeStream.format("pulsar")
        .option("service.url", url)
        .option("topic", target)
        .option("recordName", "Item")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()
    item = {
        "type": "record",
        "name": "Item",
        "fields": [
            {"name": "id", "type": ["null", "long"], "default": None},
            {"name": "name", "type": ["null", "string"], "default": None},
        ],
    }
    back = read_pulsar(url, topic=target, avroSchema=json.dumps(item))
    assert sorted(tuple(r) for r in back.select("value.*").collect()) == [
        (i, f"n{i}") for i in range(0, 40, 2)
    ]
