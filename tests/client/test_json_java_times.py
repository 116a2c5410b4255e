"""JSON values with dates and times between the Java client's POJOs and our encoder, on
Apache Pulsar 4.0.

The Java client writes ``Schema.JSON(Times.class)`` POJOs (Instant, LocalDate,
LocalDateTime, LocalTime: reflection registers timestamp-micros, date,
local-timestamp-millis and time-millis); our JSON encoder, given the topic's schema and the
same values as Arrow columns, writes the very same bytes; our producer sends them and the
POJO's Java consumer reads the same values (it refuses or misreads the schema's plain
numbers)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar.values.json.decode import JsonPlan
from pulsar_spark.columnar.values.json.encode import JsonEncoder
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.java_client import java_consume, java_produce

UTC = dt.timezone.utc
TIMES = {"type": "JSON", "pojo": "Times"}

#: POJOs as the Java producer reads them (ISO-8601), and the same values in Python.
#: Instants keep microseconds (timestamp-micros), local times milliseconds (-millis).
ROWS = [
    (
        {
            "at": "2024-01-02T03:04:05.678901Z",
            "day": "2024-02-29",
            "local": "2024-01-02T03:04:05.678",
            "name": "a",
            "time": "23:59:59.999",
        },
        {
            "at": dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
            "day": dt.date(2024, 2, 29),
            "local": dt.datetime(2024, 1, 2, 3, 4, 5, 678000),
            "name": "a",
            "time": dt.time(23, 59, 59, 999000),
        },
    ),
    (
        {
            "at": "1969-12-31T23:59:59.999999Z",
            "day": "0001-01-01",
            "local": "1969-12-31T23:59:59",
            "name": "b",
            "time": "00:00",
        },
        {
            "at": dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            "day": dt.date(1, 1, 1),
            "local": dt.datetime(1969, 12, 31, 23, 59, 59),
            "name": "b",
            "time": dt.time(0, 0),
        },
    ),
    (
        {"at": "1970-01-01T00:00:00Z", "local": "2024-01-02T03:04", "time": "12:00:01"},
        {
            "at": dt.datetime(1970, 1, 1, tzinfo=UTC),
            "day": None,
            "local": dt.datetime(2024, 1, 2, 3, 4),
            "name": None,
            "time": dt.time(12, 0, 1),
        },
    ),
    ({"name": "d"}, {"at": None, "day": None, "local": None, "name": "d", "time": None}),
]

VALUE_TYPE = pa.struct(
    [
        ("at", pa.timestamp("us", "UTC")),
        ("day", pa.date32()),
        ("local", pa.timestamp("ms")),
        ("name", pa.string()),
        ("time", pa.time32("ms")),
    ]
)


def _java_view(value: dict[str, object]) -> dict[str, object]:
    """A row as the Java consumer prints the POJO: ISO-8601 text, absent fields null."""
    out: dict[str, object] = dict.fromkeys(("at", "day", "local", "name", "time"))
    out.update(value)
    return out


def test_json_time_fields_byte_equal_to_the_java_client_and_read_by_its_pojo(
    apache_pulsar, topic_name
) -> None:
    url = apache_pulsar.service_url
    java_produce(url, topic_name, TIMES, [sent for sent, _ in ROWS])
    values = pa.array([row for _, row in ROWS], VALUE_TYPE)
    with PulsarClient(url) as client:
        found = client.latest_schema(topic_name)
        assert found is not None
        info = found.info
        assert info.type is SchemaType.JSON
        fields = json.loads(info.data)["fields"]
        logical = {f["name"]: f["type"][1] for f in fields}  # ["null", T]: every field
        assert logical == {
            "at": {"type": "long", "logicalType": "timestamp-micros"},
            "day": {"type": "int", "logicalType": "date"},
            "local": {"type": "long", "logicalType": "local-timestamp-millis"},
            "name": "string",
            "time": {"type": "int", "logicalType": "time-millis"},
        }
        java_bytes = [r["value"] for b in client.read_batches(topic_name) for r in b.to_pylist()]
        ours = JsonEncoder(VALUE_TYPE, info.data, topic=topic_name).encode(values)
        assert ours.to_pylist() == java_bytes
        # Jackson: an Instant as its epoch second (-1 here), a dot and its nanoseconds.
        assert java_bytes[1] == (
            b'{"at":-1.999999000,"day":[1,1,1],"local":[1969,12,31,23,59,59],"name":"b",'
            b'"time":[0,0]}'
        )
        # Our JSON decoder reads them back.
        assert JsonPlan(info.data).decode(ours).to_pylist() == values.to_pylist()
        # Our producer sends them with the topic's schema; the POJO consumer reads them.
        with client.create_producer(topic_name, schema=info) as producer:
            producer.send_batch(pa.table({"value": ours}))
            producer.flush()
    got = java_consume(url, topic_name, TIMES, 2 * len(ROWS))
    printed = [m["value"] for m in got]
    assert printed[len(ROWS) :] == printed[: len(ROWS)]
    assert printed[: len(ROWS)] == [
        _java_view(ROWS[0][0]),
        _java_view({**ROWS[1][0], "time": "00:00:00"}),
        _java_view({**ROWS[2][0], "local": "2024-01-02T03:04:00"}),
        _java_view(ROWS[3][0]),
    ]
