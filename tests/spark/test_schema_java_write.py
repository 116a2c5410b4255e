"""Java consumers of what Spark wrote, and Java POJO topics, on Apache Pulsar 4.0 (the Java side:
``tests/support/java_client``, one JVM per scenario).

- Spark's typed writes (AVRO, JSON, primitives, KEY_VALUE both ways, a record key, binary
  halves, an INSTANT topic) read by Java consumers of the matching schema and by
  ``AUTO_CONSUME``;
- ``Schema.AVRO/JSON(Order.class)`` topics read typed, and written into by Spark; POJOs with
  java.time fields (AVRO both ways; Jackson's JSON forms read);
- Spark writes into a Java KEY_VALUE topic: its schema and encoding are kept.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import struct
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, split_key_value
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.java_client import (
    avro,
    from_java,
    java_consume,
    java_consume_many,
    java_produce,
    java_produce_many,
    json_schema,
    key_value,
    same_values,
)


def _micros(value: dt.datetime) -> int:
    return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def _utc_ms(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


def _write(df, url: str, **options: str) -> None:
    # One task: the messages keep the rows' order.
    writer = df.coalesce(1).write.format("pulsar").option("service.url", url).mode("append")
    writer.options(**options).save()


def _plain(value: Any) -> Any:
    """Spark values as plain Python: Rows as dicts, bytearrays as bytes."""
    if isinstance(value, T.Row):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    return value


# ---------------------------------------------------------------------------
# Spark writes, Java reads
# ---------------------------------------------------------------------------

ORDER = T.StructType(
    [
        T.StructField("id", T.LongType(), False),
        T.StructField("note", T.StringType()),
        T.StructField("at", T.TimestampType()),
        T.StructField("day", T.DateType()),
        T.StructField("tags", T.ArrayType(T.StringType())),
        T.StructField("price", T.DecimalType(10, 2)),
        T.StructField("item", T.StructType([T.StructField("sku", T.StringType())])),
    ]
)
_AT = dt.datetime(2024, 2, 29, 12, 34, 56, 123456)
ORDERS = [
    (1, "one", _AT, dt.date(1969, 12, 31), ["a"], Decimal("12.34"), ("s1",)),
    (2, None, dt.datetime(1900, 1, 1), dt.date(2024, 1, 1), [], Decimal("-0.01"), None),
]


def _order_json(order: tuple[Any, ...], *, json_values: bool) -> dict[str, Any]:
    """An order as SchemaTool prints what the Java consumer decoded: AVRO records with their
    logical types as numbers (timestamp-micros, date as days) and decimals as their
    two's-complement bytes in Base64; JSON values as Spark wrote them (nulls left out,
    decimals as numbers, timestamps and dates as Jackson writes Instant and LocalDate: epoch
    second, a dot and 9 digits of nanoseconds; ``[y, m, d]``)."""
    ident, note, at, day, tags, price, item = order
    unscaled = int(price * 100)
    blob = unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
    seconds, micros = divmod(_micros(at), 10**6)
    record = {
        "id": ident,
        "note": note,
        "at": float(f"{seconds}.{micros * 1000:09d}") if json_values else _micros(at),
        "day": [day.year, day.month, day.day] if json_values else (day - dt.date(1970, 1, 1)).days,
        "tags": tags,
        "price": float(price) if json_values else base64.b64encode(blob).decode(),
        "item": None if item is None else {"sku": item[0]},
    }
    if json_values:
        return {k: v for k, v in record.items() if v is not None}
    return record


def test_spark_writes_read_by_java_typed_consumers(spark, apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    t = {
        name: f"{topic_name}-{name}"
        for name in ("avro", "json", "kv-inline", "kv-separated", "kv-json", "instant-given")
    }
    orders = spark.createDataFrame(
        [(o, f"k{o[0]}") for o in ORDERS],
        T.StructType([T.StructField("value", ORDER), T.StructField("key", T.StringType())]),
    )
    _write(orders, url, topic=t["avro"], recordName="Order")
    _write(orders, url, topic=t["json"], recordName="Order", valueSchemaType="json")
    pairs = spark.createDataFrame(
        [(7, ORDERS[0]), (None, ORDERS[1]), (-1, None), (None, None)],
        T.StructType([T.StructField("key", T.LongType()), T.StructField("value", ORDER)]),
    )
    for encoding in ("inline", "separated"):
        _write(pairs, url, topic=t[f"kv-{encoding}"], keyValueEncoding=encoding, recordName="Order")
    text_pairs = spark.createDataFrame(
        [("a", ORDERS[0]), (None, ORDERS[1]), ("", None)],
        T.StructType([T.StructField("key", T.StringType()), T.StructField("value", ORDER)]),
    )
    _write(
        text_pairs,
        url,
        topic=t["kv-json"],
        keyValueEncoding="separated",
        valueSchemaType="json",
        recordName="Order",
    )
    # Debezium's shape: a record key; and binary halves (BYTES).
    t["kv-records"] = f"{topic_name}-kv-records"
    records = spark.createDataFrame(
        [((1, "eu"), ORDERS[0]), ((2, None), None), (None, ORDERS[1])],
        "key struct<id: bigint, region: string>, value " + ORDER.simpleString(),
    )
    _write(records, url, topic=t["kv-records"], keyValueEncoding="separated")
    t["kv-bytes"] = f"{topic_name}-kv-bytes"
    blobs = spark.createDataFrame(
        [(b"\x00\xff", b""), (None, b"v"), (b"", None)], "key binary, value binary"
    )
    _write(blobs, url, topic=t["kv-bytes"], keyValueEncoding="inline")
    primitives = {
        "INT8": ("tinyint", [-128, 127, None]),
        "INT16": ("smallint", [-32768, 32767, None]),
        "INT32": ("int", [-(2**31), 2**31 - 1, None]),
        "INT64": ("bigint", [-(2**63), 2**63 - 1, None]),
        "FLOAT": ("float", [1.5, float("-inf"), None]),
        "DOUBLE": ("double", [-2.5e-300, float("nan"), None]),
        "BOOLEAN": ("boolean", [True, False, None]),
        "STRING": ("string", ["é", "", None]),
        "LOCAL_DATE": ("date", [dt.date(1, 1, 1), dt.date(1969, 12, 31), None]),
        "INSTANT": ("timestamp", [_AT, dt.datetime(1969, 12, 31, 23, 59, 59, 999999), None]),
        "LOCAL_DATE_TIME": ("timestamp_ntz", [_AT, dt.datetime(9999, 12, 31, 23, 59, 59), None]),
    }
    for kind, (ddl, values) in primitives.items():
        t[kind] = f"{topic_name}-{kind.lower().replace('_', '-')}"
        _write(spark.createDataFrame([(v,) for v in values], f"value {ddl}"), url, topic=t[kind])
    # A topic whose schema is INSTANT takes timestamps with their microseconds.
    with PulsarClient(url) as client:
        client.create_producer(
            t["instant-given"], schema=SchemaInfo.primitive(SchemaType.INSTANT)
        ).close()
        instants = [_AT, dt.datetime(1969, 12, 31, 23, 59, 59, 999999), None]
        _write(
            spark.createDataFrame([(v,) for v in instants], "value timestamp"),
            url,
            topic=t["instant-given"],
        )
        registered = {name: client.latest_schema(topic) for name, topic in t.items()}
    for name, found in registered.items():
        assert found is not None, name
        assert found.version == 0, name  # nothing registered beyond the first schema
    avro_def = json.loads(registered["avro"].info.data)
    json_def = json.loads(registered["json"].info.data)
    assert registered["json"].info.type is SchemaType.JSON
    halves = {e: split_key_value(registered[f"kv-{e}"].info) for e in ("inline", "separated")}
    for encoding, half in halves.items():
        assert half.encoding is KeyValueEncoding[encoding.upper()]
        assert (half.key.type, half.value.type) == (SchemaType.INT64, SchemaType.AVRO)
    kv_json = split_key_value(registered["kv-json"].info)
    assert (kv_json.key.type, kv_json.value.type) == (SchemaType.STRING, SchemaType.JSON)
    for kind in primitives:
        assert registered[kind].info.type is SchemaType[kind], kind

    jobs: dict[str, tuple[Any, int]] = {
        t["avro"]: (avro(avro_def), 2),
        t["json"]: (json_schema(json_def), 2),
        t["kv-json"]: (
            key_value("STRING", json_schema(json.loads(kv_json.value.data)), "separated"),
            3,
        ),
        t["instant-given"]: ("INSTANT", 3),
    }
    kv_records = split_key_value(registered["kv-records"].info)
    assert (kv_records.key.type, kv_records.value.type) == (SchemaType.AVRO, SchemaType.AVRO)
    jobs[t["kv-records"]] = (
        key_value(
            avro(json.loads(kv_records.key.data)),
            avro(json.loads(kv_records.value.data)),
            "separated",
        ),
        3,
    )
    kv_bytes = split_key_value(registered["kv-bytes"].info)
    assert (kv_bytes.key.type, kv_bytes.value.type) == (SchemaType.BYTES, SchemaType.BYTES)
    jobs[t["kv-bytes"]] = (key_value("BYTES", "BYTES", "inline"), 3)
    for encoding, half in halves.items():
        value_def = json.loads(half.value.data)
        jobs[t[f"kv-{encoding}"]] = (key_value("INT64", avro(value_def), encoding), 4)
    for kind, (_, values) in primitives.items():
        jobs[t[kind]] = (kind, len(values))
    typed = java_consume_many(url, jobs)
    auto = java_consume_many(url, {topic: ("AUTO_CONSUME", n) for topic, (_, n) in jobs.items()})
    avro_orders = [_order_json(o, json_values=False) for o in ORDERS]
    json_orders = [_order_json(o, json_values=True) for o in ORDERS]
    for got in (typed, auto):
        assert [m["value"] for m in got[t["avro"]]] == avro_orders
        assert [m["messageKey"] for m in got[t["avro"]]] == ["k1", "k2"]
        assert [m["value"] for m in got[t["json"]]] == json_orders
        for encoding in ("inline", "separated"):
            messages = got[t[f"kv-{encoding}"]]
            assert [m["value"] for m in messages] == [
                {"key": 7, "value": avro_orders[0]},
                {"key": None, "value": avro_orders[1]},
                {"key": -1, "value": None},
                {"key": None, "value": None},
            ], encoding
            if encoding == "separated":  # the key's INT64 bytes, Base64, as the message key
                keys = [base64.b64encode(struct.pack(">q", k)).decode() for k in (7, -1)]
                assert [m["messageKey"] for m in messages] == [keys[0], None, keys[1], None]
        assert [m["value"] for m in got[t["kv-json"]]] == [
            {"key": "a", "value": json_orders[0]},
            {"key": None, "value": json_orders[1]},
            {"key": "", "value": None},
        ]
        assert [m["value"] for m in got[t["kv-records"]]] == [
            {"key": {"id": 1, "region": "eu"}, "value": avro_orders[0]},
            {"key": {"id": 2, "region": None}, "value": None},
            {"key": None, "value": avro_orders[1]},
        ]
        assert [m["value"] for m in got[t["kv-bytes"]]] == [
            {"key": "AP8=", "value": ""},
            {"key": None, "value": "dg=="},
            {"key": "", "value": None},
        ]
        instants = [m["value"] for m in got[t["instant-given"]]]
        assert instants == ["2024-02-29T12:34:56.123456Z", "1969-12-31T23:59:59.999999Z", None]
        for kind, (_, values) in primitives.items():
            printed = [from_java(kind, m["value"]) for m in got[t[kind]]]
            assert same_values(printed, values), (kind, printed, values)
            assert {m["schemaVersion"] for m in got[t[kind]]} == {0}, kind


# ---------------------------------------------------------------------------
# Java POJOs: Schema.AVRO(Order.class), Schema.JSON(Order.class)
# ---------------------------------------------------------------------------


def test_java_pojo_topics_both_ways(spark, read_pulsar, apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    java_orders = [
        {"id": 1, "note": "n", "amount": 2.5, "tags": ["a"], "item": {"sku": "s", "qty": 2}},
        {"id": -2, "amount": -0.5},
        {"id": 3, "amount": "Infinity"},  # Jackson writes it as the string "Infinity"
    ]
    pojo = {kind: {"type": kind.upper(), "pojo": "Order"} for kind in ("avro", "json")}
    topics = {kind: f"{topic_name}-{kind}" for kind in pojo}
    java_produce_many(url, {topics[k]: (pojo[k], java_orders) for k in pojo})
    full = [
        {"amount": 2.5, "id": 1, "item": {"qty": 2, "sku": "s"}, "note": "n", "tags": ["a"]},
        {"amount": -0.5, "id": -2, "item": None, "note": None, "tags": None},
        {"amount": float("inf"), "id": 3, "item": None, "note": None, "tags": None},
    ]
    for kind, topic in topics.items():
        df = read_pulsar(url, topic=topic)
        # Reflection orders the fields by name; primitives are not null, objects nullable.
        assert df.schema["value"].dataType.simpleString() == (
            "struct<amount:double,id:bigint,item:struct<qty:int,sku:string>,"
            "note:string,tags:array<string>>"
        ), kind
        assert [_plain(r.value) for r in df.select("value").collect()] == full, kind

    # Spark writes into those topics (nullable columns, the topics' schemas), and into a new
    # one (its own schema: array items not null, as List<String> has them).
    spark_orders = [(5, "x", 1.5, ["t"], ("k", 3)), (6, None, 0.0, None, None)]
    ddl = "id bigint, note string, amount double, "
    ddl += "tags array<string>, item struct<sku:string,qty:int>"
    nullable = spark.createDataFrame([(o,) for o in spark_orders], f"value struct<{ddl}>")
    for topic in topics.values():
        _write(nullable, url, topic=topic)
    derived = T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("note", T.StringType()),
            T.StructField("amount", T.DoubleType(), False),
            T.StructField("tags", T.ArrayType(T.StringType(), False)),
            T.StructField(
                "item",
                T.StructType(
                    [
                        T.StructField("sku", T.StringType()),
                        T.StructField("qty", T.IntegerType(), False),
                    ]
                ),
            ),
        ]
    )
    fresh = f"{topic_name}-fresh"
    _write(
        spark.createDataFrame(
            [(o,) for o in spark_orders], T.StructType([T.StructField("value", derived)])
        ),
        url,
        topic=fresh,
        recordName="Order",
    )
    got = java_consume_many(
        url,
        {
            topics["avro"]: (pojo["avro"], 5),
            topics["json"]: (pojo["json"], 5),
            fresh: (pojo["avro"], 2),
        },
    )
    from_spark = [
        {"id": 5, "note": "x", "amount": 1.5, "tags": ["t"], "item": {"sku": "k", "qty": 3}},
        {"id": 6, "note": None, "amount": 0.0, "tags": None, "item": None},
    ]
    from_java = [
        {"id": 1, "note": "n", "amount": 2.5, "tags": ["a"], "item": {"sku": "s", "qty": 2}},
        {"id": -2, "note": None, "amount": -0.5, "tags": None, "item": None},
        {"id": 3, "note": None, "amount": "Infinity", "tags": None, "item": None},
    ]
    for topic in topics.values():
        assert [m["value"] for m in got[topic]] == from_java + from_spark, topic
        assert {m["schemaVersion"] for m in got[topic]} == {0}, topic  # the POJO's schema
    assert [m["value"] for m in got[fresh]] == from_spark


def test_java_time_fields_of_pojos(spark, read_pulsar, apache_pulsar, topic_name) -> None:
    """A POJO's Instant, LocalDate and LocalDateTime: reflection maps them to timestamp-micros,
    date and local-timestamp-millis; AVRO holds those numbers, while the JSON schema's Jackson
    writes decimal seconds and arrays of fields, which the typed read takes too."""
    url = apache_pulsar.service_url
    events = [
        {
            "name": "a",
            "at": "1969-12-31T23:59:59.999999999Z",
            "day": "1969-12-31",
            "local": "2024-01-02T03:04:05.678",
        },
        {
            "name": "b",
            "at": "2024-02-29T12:34:56Z",
            "day": "0001-01-01",
            "local": "2024-01-02T03:04",
        },
        {"name": "c"},
    ]
    pojo = {kind: {"type": kind.upper(), "pojo": "Event"} for kind in ("avro", "json")}
    topics = {kind: f"{topic_name}-{kind}" for kind in pojo}
    java_produce_many(url, {topics[k]: (pojo[k], events) for k in pojo})
    expected = [
        {
            "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            "day": dt.date(1969, 12, 31),
            "local": dt.datetime(2024, 1, 2, 3, 4, 5, 678000),
            "name": "a",
        },
        {
            "at": dt.datetime(2024, 2, 29, 12, 34, 56),
            "day": dt.date(1, 1, 1),
            "local": dt.datetime(2024, 1, 2, 3, 4),
            "name": "b",
        },
        {"at": None, "day": None, "local": None, "name": "c"},
    ]
    with PulsarClient(url) as client:
        raw = [r["value"] for b in client.read_batches(topics["json"]) for r in b.to_pylist()]
    assert json.loads(raw[0]) == {
        "name": "a",
        "at": -1.999999999,  # Jackson: the epoch second (-1), a dot, the nanoseconds
        "day": [1969, 12, 31],
        "local": [2024, 1, 2, 3, 4, 5, 678000000],
    }
    for kind, topic in topics.items():
        df = read_pulsar(url, topic=topic)
        assert df.schema["value"].dataType.simpleString() == (
            "struct<at:timestamp,day:date,local:timestamp_ntz,name:string>"
        ), kind
        assert [_plain(r.value) for r in df.select("value").collect()] == expected, kind
    # Spark's timestamps into the AVRO topic, read by the POJO's consumer.
    back = spark.createDataFrame(
        [(("s", dt.datetime(2024, 2, 29, 12, 34, 56, 123456), dt.date(1, 1, 1), None),)],
        "value struct<name: string, at: timestamp, day: date, local: timestamp_ntz>",
    )
    _write(back, url, topic=topics["avro"])
    got = java_consume(url, topics["avro"], pojo["avro"], 4)
    assert got[3]["value"] == {
        "name": "s",
        "at": "2024-02-29T12:34:56.123456Z",
        "day": "0001-01-01",
        "local": None,
    }
    assert got[0]["value"]["at"] == "1969-12-31T23:59:59.999999Z"  # micros, rounded down


def test_spark_writes_into_a_java_key_value_topic(spark, apache_pulsar, topic_name) -> None:
    """The topic's KEY_VALUE schema is used for a key and a value, with or without
    keyValueEncoding; another encoding than the topic's is refused before anything is sent
    (the broker would take it as the same schema, and readers would misread the messages)."""
    url = apache_pulsar.service_url
    schema = key_value("STRING", "INT32", "separated")
    java_produce(url, topic_name, schema, [("a", 1)])
    pairs = spark.createDataFrame([("b", 2), (None, None)], "key string, value int")
    with pytest.raises(Exception, match="keyValueEncoding=inline, but the topic's schema") as e:
        _write(pairs, url, topic=topic_name, keyValueEncoding="inline")
    assert "use keyValueEncoding=separated" in str(e.value)
    _write(pairs, url, topic=topic_name)
    _write(pairs, url, topic=topic_name, keyValueEncoding="separated")
    got = java_consume(url, topic_name, schema, 5)
    assert [m["value"] for m in got] == [
        {"key": "a", "value": 1},
        *[{"key": "b", "value": 2}, {"key": None, "value": None}] * 2,
    ]
    assert {m["schemaVersion"] for m in got} == {0}


def test_non_finite_doubles_in_json_values_read_by_java(spark, apache_pulsar, topic_name) -> None:
    """NaN and infinities go out as the strings Jackson writes ("NaN", "Infinity"), so the
    Java client's JSON schema reads them (it refuses bare NaN tokens); Spark reads them back."""
    url = apache_pulsar.service_url
    schema = "value struct<id: bigint, amount: double>"
    rows = [((1, float("nan")),), ((2, float("inf")),), ((3, float("-inf")),), ((4, 1.5),)]
    _write(spark.createDataFrame(rows, schema), url, topic=topic_name, valueSchemaType="json")
    got = java_consume(url, topic_name, "AUTO_CONSUME", 4)
    assert [m["value"]["amount"] for m in got] == ["NaN", "Infinity", "-Infinity", 1.5]
    back = spark.read.format("pulsar").option("service.url", url).option("topic", topic_name)
    amounts = [r.amount for r in back.load().orderBy("messageId").select("value.*").collect()]
    assert math.isnan(amounts[0]) and amounts[1:] == [math.inf, -math.inf, 1.5]


def _to_ms(value: Any) -> Any:
    """A time (of day) rounded down to the millisecond, as a millisecond schema keeps it."""
    return None if value is None else value.replace(microsecond=value.microsecond // 1000 * 1000)


def test_spark_time_values_written_to_java_time_topics(spark, apache_pulsar, topic_name) -> None:
    """Spark dates, timestamps and times of day (TimeType, Spark 4.1+) into topics whose
    schema is DATE, TIMESTAMP, TIME or LOCAL_TIME (registered first, as a Java service would),
    and a time of day into a topic without a schema (LOCAL_TIME derived), read by Java
    consumers of those schemas: rounded down to the schema's unit."""
    url = apache_pulsar.service_url
    days = [dt.date(1969, 12, 31), dt.date(1, 1, 1), dt.date(9999, 12, 31), None]
    stamps = [_AT, dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(1900, 1, 1), None]
    jobs: dict[str, tuple[str, str, list[Any], list[Any]]] = {
        "DATE": ("date", "DATE", days, days),
        "TIMESTAMP": ("timestamp", "TIMESTAMP", stamps, [_to_ms(v) for v in stamps]),
    }
    if getattr(T, "TimeType", None) is not None:  # Spark 4.1+: times of day as TimeType
        clocks = [dt.time(12, 34, 56, 123456), dt.time(0, 0), dt.time(23, 59, 59, 999999), None]
        midnight = dt.datetime(1970, 1, 1)
        nanos = [
            None if v is None else _micros(dt.datetime.combine(midnight, v)) * 1000 for v in clocks
        ]
        jobs["TIME"] = ("time", "TIME", clocks, [_to_ms(v) for v in clocks])
        jobs["LOCAL_TIME"] = ("time", "LOCAL_TIME", clocks, nanos)
        jobs["derived"] = ("time", "LOCAL_TIME", clocks, nanos)
    topics = {name: f"{topic_name}-{name.lower().replace('_', '-')}" for name in jobs}
    with PulsarClient(url) as client:
        for name, (_, kind, _, _) in jobs.items():
            if name != "derived":
                schema = SchemaInfo.primitive(SchemaType[kind])
                client.create_producer(topics[name], schema=schema).close()
        for name, (ddl, _, values, _) in jobs.items():
            frame = spark.createDataFrame([(v,) for v in values], f"value {ddl}")
            _write(frame, url, topic=topics[name])
        registered = {name: client.latest_schema(topic) for name, topic in topics.items()}
    for name, (_, kind, _, _) in jobs.items():
        found = registered[name]
        assert found is not None and found.info.type is SchemaType[kind], name
        assert found.version == 0, name  # written with the topic's schema
    got = java_consume_many(
        url, {topics[name]: (kind, len(values)) for name, (_, kind, values, _) in jobs.items()}
    )
    for name, (_, kind, _, expected) in jobs.items():
        printed = [from_java(kind, m["value"]) for m in got[topics[name]]]
        assert printed == expected, (name, printed, expected)
