"""Typed Spark reads of what the Java client wrote, on Apache Pulsar 4.0 (the Java side:
``tests/support/java_client``, one JVM per scenario; Spark's writes read by Java:
``test_schema_java_write.py``).

- every primitive and time schema (``Schema.INT8`` ... ``Schema.LOCAL_DATE_TIME``), edge
  values included, read as typed ``value`` columns;
- KEY_VALUE, INLINE and SEPARATED, with typed halves (``KeyValue<INT64, AVRO>``,
  ``KeyValue<STRING, JSON>``), null keys and null values, read as typed ``key`` and ``value``;
- AVRO v1 then v2 from Java, read in one query in v2's shape;
- PROTOBUF_NATIVE from Java (a ``DynamicMessage``, the ``google.protobuf.Timestamp``
  dependency in its descriptor set) read as a typed struct.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.java_client import (
    PRIMITIVE_EDGES,
    TEXTS,
    avro,
    java_produce_many,
    java_produce_protobuf_native,
    json_schema,
    key_value,
    same_values,
)

#: Spark's time of day (4.1+); before it, a long: microseconds of the day.
_TIME_TYPE = getattr(T, "TimeType", None)
_TIME_OF_DAY = _TIME_TYPE(6) if _TIME_TYPE is not None else T.LongType()

SPARK_TYPES = {
    "INT8": T.ByteType(),
    "INT16": T.ShortType(),
    "INT32": T.IntegerType(),
    "INT64": T.LongType(),
    "FLOAT": T.FloatType(),
    "DOUBLE": T.DoubleType(),
    "BOOLEAN": T.BooleanType(),
    "STRING": T.StringType(),
    "BYTES": T.BinaryType(),
    "DATE": T.DateType(),
    "TIME": _TIME_OF_DAY,
    "TIMESTAMP": T.TimestampType(),
    "INSTANT": T.TimestampType(),
    "LOCAL_DATE": T.DateType(),
    "LOCAL_TIME": _TIME_OF_DAY,
    "LOCAL_DATE_TIME": T.TimestampNTZType(),
}

CARD = {"type": "record", "name": "Card", "fields": [{"name": "last4", "type": "string"}]}
PAYMENT = {
    "type": "record",
    "name": "Payment",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["CARD", "CASH"]}},
        {"name": "card", "type": ["null", CARD], "default": None},
        {"name": "extra", "type": {"type": "map", "values": "int"}},
    ],
}
EVENT = {
    "type": "record",
    "name": "Event",
    "fields": [
        {"name": "name", "type": ["null", "string"]},
        {"name": "count", "type": "int"},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
    ],
}
UTF16 = {"type": "STRING", "charset": "UTF-16"}
ROW_KEY = {
    "type": "record",
    "name": "Key",
    "namespace": "db",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "region", "type": ["null", "string"], "default": None},
    ],
}
ROW = {
    "type": "record",
    "name": "Row",
    "namespace": "db",
    "fields": [{"name": "v", "type": "string"}],
}
_PAID = {"id": 1, "amount": 2.5, "note": "x", "at": 1_700_000_000_123, "tags": ["a", "b"]}
PAYMENTS = [
    (1, {**_PAID, "kind": "CASH", "card": {"last4": "4242"}, "extra": {"a": 1}}),
    (None, {"id": 2, "amount": -1.0, "at": -1, "tags": [], "kind": "CARD", "extra": {}}),
    (-(2**63), None),
    (None, None),
]
#: The last event's time is ISO-8601 text (a producer that formats times itself).
EVENTS = [
    ("k1", {"name": "n", "count": 1, "at": 1_700_000_000_123}),
    (None, {"name": None, "count": 2, "at": None}),
    ("", None),
    ("k4", {"name": "é", "count": -4, "at": "2024-01-02T03:04:05.678+01:00"}),
]


def _micros(value: dt.datetime) -> int:
    return (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def _day_micros(value: dt.time) -> int:
    """A time of day as Spark before TimeType holds it: microseconds of the day."""
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond


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
# Java writes, Spark reads
# ---------------------------------------------------------------------------


def test_java_primitives_read_as_typed_columns(read_pulsar, apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    topics = {kind: f"{topic_name}-{kind.lower().replace('_', '-')}" for kind in PRIMITIVE_EDGES}
    jobs: dict[str, tuple[Any, list[Any]]] = {
        topics[k]: (k, sent) for k, (sent, _) in PRIMITIVE_EDGES.items()
    }
    # STRING in UTF-16 (Java's StringSchema(charset): the __charset property).
    jobs[f"{topic_name}-utf16"] = (UTF16, [*TEXTS, None])
    # Times beyond Spark's microseconds (Java's Long.MAX_VALUE ms, year 292278994).
    beyond = {k: f"{topic_name}-beyond-{k.lower()}" for k in ("DATE", "TIMESTAMP", "INSTANT")}
    jobs[beyond["DATE"]] = ("DATE", [0, 2**63 - 1])
    jobs[beyond["TIMESTAMP"]] = ("TIMESTAMP", [0, -(2**63)])
    jobs[beyond["INSTANT"]] = ("INSTANT", ["1970-01-01T00:00:00Z", "+1000000000-01-01T00:00:00Z"])
    java_produce_many(url, jobs)
    for kind, topic in beyond.items():
        df = read_pulsar(url, topic=topic, decodeErrorMode="deadLetter")
        rows = df.select(F.col("value").isNull().alias("null"), "decodeError").collect()
        assert [r.null for r in rows] == [False, True], kind
        assert rows[0].decodeError is None
        assert "beyond" in rows[1].decodeError, kind
    utf16 = read_pulsar(url, topic=f"{topic_name}-utf16")
    assert utf16.schema["value"].dataType == T.StringType()
    assert [r.value for r in utf16.select("value").collect()] == [*TEXTS, None]
    for kind, (_, expected) in PRIMITIVE_EDGES.items():
        df = read_pulsar(url, topic=topics[kind])
        assert df.schema["value"].dataType == SPARK_TYPES[kind], kind
        if kind in ("TIMESTAMP", "INSTANT"):
            # pyspark's collect cannot make year 1 (local-time conversion): compare the
            # microseconds Spark holds.
            df = df.withColumn("value", F.unix_micros("value"))
            expected = [None if v is None else _micros(v) for v in expected]
        elif kind in ("TIME", "LOCAL_TIME") and _TIME_TYPE is None:
            expected = [None if v is None else _day_micros(v) for v in expected]
        rows = df.select("value", "schemaVersion").collect()
        got = [_plain(r.value) for r in rows]
        assert same_values(got, expected), (kind, got, expected)
        assert {r.schemaVersion for r in rows} == ({None} if kind == "BYTES" else {0}), kind


def test_java_key_value_topics_read_as_typed_key_and_value(
    read_pulsar, apache_pulsar, topic_name
) -> None:
    url = apache_pulsar.service_url
    jobs = {}
    for encoding in ("inline", "separated"):
        jobs[f"{topic_name}-avro-{encoding}"] = (
            key_value("INT64", avro(PAYMENT), encoding),
            PAYMENTS,
        )
        jobs[f"{topic_name}-json-{encoding}"] = (
            key_value("STRING", json_schema(EVENT), encoding),
            EVENTS,
        )
        # Debezium's shape: a record key; and time types on both sides.
        jobs[f"{topic_name}-records-{encoding}"] = (
            key_value(avro(ROW_KEY), avro(ROW), encoding),
            [({"id": 1, "region": "eu"}, {"v": "a"}), ({"id": 2}, None), (None, {"v": "c"})],
        )
        jobs[f"{topic_name}-times-{encoding}"] = (
            key_value("INSTANT", "LOCAL_DATE", encoding),
            [
                ("1969-12-31T23:59:59.999999999Z", "0001-01-01"),
                (None, "2024-02-29"),
                ("2024-01-01T00:00:00Z", None),
            ],
        )
        # Halves with no schema data (BYTES) and with properties (UTF-16 text).
        jobs[f"{topic_name}-bytes-{encoding}"] = (
            key_value("BYTES", "BYTES", encoding),
            [("AP8=", ""), (None, "dg=="), ("", None)],
        )
        jobs[f"{topic_name}-utf16-{encoding}"] = (
            key_value(UTF16, UTF16, encoding),
            [("é", "日本 🎉"), ("", None), (None, "")],
        )
    java_produce_many(url, jobs)
    for encoding in ("inline", "separated"):
        for name, expected in (
            ("bytes", [(b"\x00\xff", b""), (None, b"v"), (b"", None)]),
            ("utf16", [("é", "日本 🎉"), ("", None), (None, "")]),
        ):
            topic = f"{topic_name}-{name}-{encoding}"
            del jobs[topic]
            df = read_pulsar(url, topic=topic)
            rows = [(_plain(r.key), _plain(r.value)) for r in df.select("key", "value").collect()]
            assert rows == expected, topic
    payments = [
        (
            1,
            {
                **_PAID,
                "at": _utc_ms(1_700_000_000_123),
                "kind": "CASH",
                "card": {"last4": "4242"},
                "extra": {"a": 1},
            },
        ),
        (
            None,
            {
                "id": 2,
                "amount": -1.0,
                "note": None,
                "at": _utc_ms(-1),
                "tags": [],
                "kind": "CARD",
                "card": None,
                "extra": {},
            },
        ),
        (-(2**63), None),
        (None, None),
    ]
    events = [
        ("k1", {"name": "n", "count": 1, "at": _utc_ms(1_700_000_000_123)}),
        (None, {"name": None, "count": 2, "at": None}),
        ("", None),
        ("k4", {"name": "é", "count": -4, "at": dt.datetime(2024, 1, 2, 2, 4, 5, 678000)}),
    ]
    for encoding in ("inline", "separated"):
        records_topic, times_topic = (f"{topic_name}-{n}-{encoding}" for n in ("records", "times"))
        del jobs[records_topic], jobs[times_topic]
        records = read_pulsar(url, topic=records_topic)
        assert records.schema["key"].dataType == T.StructType(
            [T.StructField("id", T.LongType(), False), T.StructField("region", T.StringType())]
        )
        assert [(_plain(r.key), _plain(r.value)) for r in records.collect()] == [
            ({"id": 1, "region": "eu"}, {"v": "a"}),
            ({"id": 2, "region": None}, None),
            (None, {"v": "c"}),
        ], encoding
        times = read_pulsar(url, topic=times_topic)
        assert (times.schema["key"].dataType, times.schema["value"].dataType) == (
            T.TimestampType(),
            T.DateType(),
        )
        assert [tuple(r) for r in times.select("key", "value").collect()] == [
            (dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.date(1, 1, 1)),
            (None, dt.date(2024, 2, 29)),
            (dt.datetime(2024, 1, 1), None),
        ], encoding
    for topic, (spec, _) in jobs.items():
        df = read_pulsar(url, topic=topic)
        is_avro = spec["value"]["type"] == "AVRO"
        assert df.schema["key"].dataType == (T.LongType() if is_avro else T.StringType())
        value = df.schema["value"].dataType
        assert isinstance(value, T.StructType)
        if is_avro:
            assert value["at"].dataType == T.TimestampType()
            assert value["extra"].dataType == T.MapType(T.StringType(), T.IntegerType(), False)
            assert value["card"].dataType == T.StructType(
                [T.StructField("last4", T.StringType(), False)]
            )
        else:
            assert value.names == ["name", "count", "at"]
        got = [(r.key, _plain(r.value)) for r in df.select("key", "value").collect()]
        assert got == (payments if is_avro else events), topic


def test_java_avro_v1_then_v2_read_in_v2_shape(read_pulsar, apache_pulsar, topic_name) -> None:
    v1 = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "old", "type": "string", "default": "gone"},
        ],
    }
    v2 = {
        "type": "record",
        "name": "Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "qty", "type": "int", "default": 7},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
    url = apache_pulsar.service_url
    # One JVM, two producers: v1's messages, then v2's (FULL-compatible: defaults).
    java_produce_many(
        url,
        {topic_name: (avro(v1), [{"id": 1, "old": "a"}, {"id": 2, "old": "b"}])},
    )
    java_produce_many(url, {topic_name: (avro(v2), [{"id": 3, "qty": 5, "note": "n"}])})
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["value"].dataType.names == ["id", "qty", "note"]
    rows = [tuple(r) for r in df.select("value.*", "schemaVersion").collect()]
    assert rows == [(1, 7, None, 0), (2, 7, None, 0), (3, 5, "n", 1)]


# ---------------------------------------------------------------------------
# PROTOBUF_NATIVE from Java (a DynamicMessage of a descriptor built in Java)
# ---------------------------------------------------------------------------


def test_java_protobuf_native_read_as_typed_columns(read_pulsar, apache_pulsar, topic_name):
    url = apache_pulsar.service_url
    orders = [
        {
            "id": "1",
            "name": "one",
            "score": 2.5,
            "tags": [1, -2],
            "item": {"sku": "s", "qty": 3},
            "status": "DONE",
            "ok": True,
            "blob": "AP8=",
            "at": "2024-02-29T12:34:56.123456789Z",
        },
        {},  # every field at its proto3 default
        {"id": str(-(2**63)), "name": "é", "score": "NaN", "at": "1969-12-31T23:59:59.999999999Z"},
    ]
    java_produce_protobuf_native(url, topic_name, orders)
    with PulsarClient(url) as client:
        found = client.latest_schema(topic_name)
    assert found is not None
    assert found.info.type is SchemaType.PROTOBUF_NATIVE
    data = json.loads(found.info.data)
    assert (data["rootMessageTypeName"], data["rootFileDescriptorName"]) == (
        "pulsar_spark.test.Order",
        "pulsar_spark/order.proto",
    )
    df = read_pulsar(url, topic=topic_name)
    assert df.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,name:string,score:double,tags:array<int>,"
        "item:struct<sku:string,qty:int>,status:string,ok:boolean,blob:binary,at:timestamp>"
    )
    rows = [_plain(r.value) for r in df.select("value").collect()]
    assert rows[0] == {
        "id": 1,
        "name": "one",
        "score": 2.5,
        "tags": [1, -2],
        "item": {"sku": "s", "qty": 3},
        "status": "DONE",
        "ok": True,
        "blob": b"\x00\xff",
        "at": dt.datetime(2024, 2, 29, 12, 34, 56, 123456),  # nanoseconds rounded down
    }
    defaults = {"id": 0, "name": "", "tags": [], "item": None, "status": "NEW", "ok": False}
    assert rows[1] == {**defaults, "score": 0.0, "blob": b"", "at": None}
    last = rows[2]
    assert math.isnan(last.pop("score"))
    assert last == {
        **defaults,
        "id": -(2**63),
        "name": "é",
        "blob": b"",
        "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    }
