"""Primitive and time schemas between the Java client and ours, on Apache Pulsar 4.0.

The Java client (``tests/support/java_client``: ``Schema.INT8`` ... ``Schema.LOCAL_DATE_TIME``)
writes edge values of every primitive type; our client reads them and decodes them with
the topic's schema into Arrow; our producer sends them back encoded with the same schemas,
and a Java consumer of each typed schema (and one with ``AUTO_CONSUME``) reads them."""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar import decode_primitive
from pulsar_spark.columnar.values.primitive.encode import encode_primitive
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.java_client import (
    LOCAL_TIME_NANOS,
    PRIMITIVE_EDGES,
    TEXTS,
    from_java,
    java_consume_many,
    java_produce_many,
    same_values,
)


def _python(kind: str, column: pa.Array) -> list[Any]:
    """Python values of a decoded column, datetimes naive in UTC."""
    values = column.to_pylist()
    if kind in ("TIMESTAMP", "INSTANT"):
        values = [None if v is None else v.replace(tzinfo=None) for v in values]
    return values


def test_java_primitives_read_and_written_back_by_our_client(apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    topics = {kind: f"{topic_name}-{kind.lower().replace('_', '-')}" for kind in PRIMITIVE_EDGES}
    jobs: dict[str, tuple[Any, list[Any]]] = {
        topics[k]: (k, sent) for k, (sent, _) in PRIMITIVE_EDGES.items()
    }
    # STRING in UTF-16 (Java's StringSchema(charset): the __charset property).
    jobs[f"{topic_name}-utf16"] = ({"type": "STRING", "charset": "UTF-16"}, [*TEXTS, None])
    java_produce_many(url, jobs)
    decoded: dict[str, pa.Array] = {}
    with PulsarClient(url) as client:
        utf16 = client.latest_schema(f"{topic_name}-utf16")
        assert utf16 is not None
        assert utf16.info.properties == {"__charset": "UTF-16"}
        table = pa.Table.from_batches(list(client.read_batches(f"{topic_name}-utf16")))
        # Java's UTF-16: big-endian, with a byte order mark.
        assert table.column("value")[1].as_py() == b"\xfe\xff" + "héllo".encode("utf-16-be")
        text = decode_primitive(table.column("value"), SchemaType.STRING, charset="UTF-16")
        assert text.to_pylist() == [*TEXTS, None]
        for kind, topic in topics.items():
            schema = SchemaType[kind]
            found = client.latest_schema(topic)
            if schema is SchemaType.BYTES:
                assert found is None  # the Java client registers no schema for BYTES
            else:
                assert found is not None, kind
                info = found.info
                assert (info.type, info.data, info.properties) == (schema, b"", {}), kind
                assert found.version == 0
            table = pa.Table.from_batches(list(client.read_batches(topic)))
            values = decode_primitive(table.column("value"), schema, topic=topic)
            decoded[kind] = values
            expected = PRIMITIVE_EDGES[kind][1]
            if kind == "LOCAL_TIME":  # time64[ns]: the nanoseconds are all there
                assert values.cast(pa.int64()).to_pylist() == LOCAL_TIME_NANOS
            assert same_values(_python(kind, values), expected), (kind, values, expected)
            if kind == "INSTANT":  # 12 bytes: seconds and nanoseconds, as Java wrote them
                payloads = table.column("value").to_pylist()
                assert struct.unpack(">qi", payloads[2]) == (1_709_210_096, 123_456_789)
                assert struct.unpack(">qi", payloads[1]) == (-1, 999_999_999)
            versions = set(table.column("schemaVersion").to_pylist())
            assert versions == ({None} if schema is SchemaType.BYTES else {0}), kind

        # Our producer sends the decoded columns back, encoded with the same schemas.
        back = {kind: f"{topic}-back" for kind, topic in topics.items()}
        for kind, values in decoded.items():
            schema = SchemaInfo.primitive(SchemaType[kind])
            with client.create_producer(back[kind], schema=schema) as producer:
                assert producer.schema_version == (None if kind == "BYTES" else 0)
                payloads = encode_primitive(values, SchemaType[kind], topic=back[kind])
                producer.send_batch(pa.table({"value": payloads}))

    counts = {kind: len(sent) for kind, (sent, _) in PRIMITIVE_EDGES.items()}
    typed = java_consume_many(url, {back[k]: (k, n) for k, n in counts.items()})
    auto = java_consume_many(url, {back[k]: ("AUTO_CONSUME", n) for k, n in counts.items()})
    for kind, (_, expected) in PRIMITIVE_EDGES.items():
        for got in (typed[back[kind]], auto[back[kind]]):
            values = [from_java(kind, m["value"]) for m in got]
            if kind == "LOCAL_TIME":
                assert values == LOCAL_TIME_NANOS
                continue
            if kind == "FLOAT":  # Java prints the float; compare as 32-bit floats
                values = [None if v is None else _f32(v) for v in values]
            assert same_values(values, expected), (kind, got, expected)
            versions = {m["schemaVersion"] for m in got}
            assert versions == ({None} if kind == "BYTES" else {0}), kind


def _f32(value: float) -> float:
    result: float = struct.unpack(">f", struct.pack(">f", value))[0]
    return result
