"""The typed read and write plumbing without Spark or a broker: DDL parsing, the schema
options, read planning, per-version decoding and its errors, write plans, Spark types."""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from pulsar_spark.client.schemas import VersionedSchema
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.columnar.rows.schema_version import entry_schema_version, schema_version_column
from pulsar_spark.columnar.values.errors import SchemaDecodeError
from pulsar_spark.columnar.values.key_value import split_inline
from pulsar_spark.protocol import pb
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, key_value_schema
from pulsar_spark.protocol.schemas.types import SchemaType
from pulsar_spark.spark.ddl import DdlError, parse_ddl
from pulsar_spark.spark.errors import (
    PulsarOptionError,
    PulsarWriteError,
    SchemaChangedError,
    TopicSchemaError,
)
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.read_schema import plan_read_schema, row_schema
from pulsar_spark.spark.schema_change import describe_change
from pulsar_spark.spark.value_decode import ValueDecoder
from pulsar_spark.spark.write_schema import RowEncoder, plan_write

URL = "pulsar://localhost:6650"
T = "persistent://public/default/t"
V1 = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}
V2 = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "int", "default": 7}],
}


def _options(**options: str):
    return parse_options({"service.url": URL, "topic": T, **options})


def _avro(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def _batch(values: list[bytes | None], versions: list[int | None]) -> pa.RecordBatch:
    """A row-schema batch with these values and schema versions."""
    n = len(values)
    columns = {f.name: pa.nulls(n, f.type) for f in ROW_SCHEMA}
    columns["value"] = pa.array(values, pa.binary())
    columns["messageId"] = pa.array([f"1:{i}:-1:-1" for i in range(n)])
    columns["schemaVersion"] = pa.array(versions, pa.int64())
    return pa.RecordBatch.from_arrays([columns[f.name] for f in ROW_SCHEMA], names=ROW_SCHEMA.names)


class _Registry:
    """``latest_schema`` and versions of one topic, as the client answers them."""

    def __init__(self, *versions: SchemaInfo) -> None:
        self.versions = list(versions)
        self.asked: list[int] = []

    def latest_schema(self, topic: str) -> VersionedSchema | None:
        if not self.versions:
            return None
        return VersionedSchema(self.versions[-1], len(self.versions) - 1)

    def fetch(self, version: int) -> SchemaInfo | None:
        self.asked.append(version)
        return self.versions[version] if version < len(self.versions) else None


def test_ddl_strings_parse_into_arrow_types() -> None:
    assert parse_ddl("id BIGINT, name STRING") == pa.struct(
        [pa.field("id", pa.int64()), pa.field("name", pa.string())]
    )
    nested = parse_ddl("a: array<struct<x: double, `y z` DECIMAL(5,2)>> NOT NULL COMMENT 'c'")
    assert nested.field("a").nullable is False
    assert nested.field("a").type.value_type.field("y z").type == pa.decimal128(5, 2)
    assert parse_ddl("map<string, int>") == pa.map_(pa.string(), pa.int32())
    assert parse_ddl("ts TIMESTAMP, n TIMESTAMP_NTZ").field("n").type == pa.timestamp("us")
    for bad, why in [
        ("", "empty"),
        ("a int,", "a field name"),
        ("a foo", "expected a type"),
        ("a int, a long", "given twice"),
        ("a decimal(40, 2)", "out of Spark's range"),
    ]:
        with pytest.raises(DdlError, match=why):
            parse_ddl(bad)


def test_schema_options() -> None:
    parsed = _options()
    assert (parsed.schema_mode, parsed.decode_error_mode, parsed.avro_schema) == (
        "auto",
        "fail",
        None,
    )
    parsed = _options(jsonSchema="id BIGINT", decodeErrorMode="PERMISSIVE", schemaMode="Auto")
    assert parsed.json_schema is not None and parsed.json_schema.type is SchemaType.JSON
    assert json.loads(parsed.json_schema.data)["fields"][0]["type"] == ["null", "long"]
    assert parsed.decode_error_mode == "deadLetter"
    parsed = _options(valueAvroSchema=json.dumps(V1), keyValueEncoding="Separated")
    assert parsed.avro_schema == SchemaInfo.avro(json.dumps(V1, separators=(",", ":")))
    assert parsed.key_value_encoding is KeyValueEncoding.SEPARATED
    for options, option in [
        ({"avroSchema": "{"}, "avroSchema"),
        ({"jsonSchema": "a b c"}, "jsonSchema"),
        ({"schemaMode": "raw", "decodeErrorMode": "fail"}, "decodeErrorMode"),
        ({"avroSchema": '"long"', "jsonSchema": "a int"}, "jsonSchema"),
        ({"decodeErrorMode": "skip"}, "decodeErrorMode"),
    ]:
        with pytest.raises(PulsarOptionError) as info:
            _options(**options)
        assert info.value.option == option


def test_read_planning() -> None:
    avro = SchemaInfo.avro(V1)
    plan = plan_read_schema(_Registry(avro), _options(), [T])  # type: ignore[arg-type]
    assert (plan.reader, plan.version, plan.origin) == (avro, 0, f"topic {T}, schema version 0")
    assert plan.arrow.field("value").type == pa.struct([pa.field("a", pa.int64(), False)])
    assert plan.arrow.names == ROW_SCHEMA.names
    # No schema, or raw mode: the row schema; dead letters add a column.
    assert plan_read_schema(_Registry(), _options(), [T]).arrow == ROW_SCHEMA  # type: ignore[arg-type]
    raw = plan_read_schema(_Registry(avro), _options(schemaMode="raw"), [T])  # type: ignore[arg-type]
    assert (raw.reader, raw.arrow) == (None, ROW_SCHEMA)
    dead = row_schema(avro, dead_letter=True)
    assert dead.names == [*ROW_SCHEMA.names, "decodeError"]
    # A user's JSON schema reads STRING topics too, but not AVRO ones.
    user = _options(jsonSchema="a BIGINT")
    string = _Registry(SchemaInfo.primitive(SchemaType.STRING))
    assert plan_read_schema(string, user, [T]).user_given  # type: ignore[arg-type]
    with pytest.raises(TopicSchemaError, match="JSON values, but the broker holds another"):
        plan_read_schema(_Registry(avro), user, [T])  # type: ignore[arg-type]
    # KEY_VALUE: key and value typed.
    kv = key_value_schema(SchemaInfo.primitive(SchemaType.STRING), avro)
    plan = plan_read_schema(_Registry(kv), _options(), [T])  # type: ignore[arg-type]
    assert (plan.arrow.field("key").type, plan.arrow.field("value").type.num_fields) == (
        pa.string(),
        1,
    )


def test_versions_decode_into_the_latest_schema_each_fetched_once() -> None:
    registry = _Registry(SchemaInfo.avro(V1), SchemaInfo.avro(V2))
    plan = plan_read_schema(registry, _options(), [T])  # type: ignore[arg-type]
    decode = ValueDecoder(plan, T, registry.fetch)
    values = [_avro(V1, {"a": 1}), _avro(V2, {"a": 2, "b": 3}), None, _avro(V1, {"a": 4})]
    out = decode(_batch(values, [0, 1, 1, 0]))
    assert out.column("value").to_pylist() == [
        {"a": 1, "b": 7},
        {"a": 2, "b": 3},
        None,
        {"a": 4, "b": 7},
    ]
    decode(_batch([_avro(V1, {"a": 5})], [0]))
    assert sorted(registry.asked) == [0, 1]  # once per version


def test_decode_errors_name_the_message_and_version_or_go_to_the_dead_letter_column() -> None:
    registry = _Registry(SchemaInfo.avro(V1))
    plan = plan_read_schema(registry, _options(), [T])  # type: ignore[arg-type]
    batch = _batch([_avro(V1, {"a": 1}), b"\xff"], [0, 0])
    with pytest.raises(SchemaDecodeError) as info:
        ValueDecoder(plan, T, registry.fetch)(batch)
    assert (info.value.message_id, info.value.schema_version, info.value.field) == (
        "1:1:-1:-1",
        0,
        "a",
    )
    assert "message 1:1:-1:-1 (schema version 0)" in str(info.value)
    dead = plan_read_schema(registry, _options(decodeErrorMode="deadLetter"), [T])  # type: ignore[arg-type]
    out = ValueDecoder(dead, T, registry.fetch)(batch)
    assert out.column("value").to_pylist() == [{"a": 1}, None]
    errors = out.column("decodeError").to_pylist()
    assert errors[0] is None and errors[1].startswith("field a: ")


def test_a_version_that_does_not_resolve_says_what_changed() -> None:
    clashing = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}
    registry = _Registry(SchemaInfo.avro(V1))
    plan = plan_read_schema(registry, _options(), [T])  # type: ignore[arg-type]
    registry.versions.append(SchemaInfo.avro(clashing))
    decode = ValueDecoder(plan, T, registry.fetch, stream=True)
    with pytest.raises(SchemaChangedError) as info:
        decode(_batch([_avro(clashing, {"a": "x"})], [1]))
    text = str(info.value)
    assert "messages written with schema version 1 cannot be read" in text
    assert "field a: long in the query's schema, string in the messages" in text
    assert text.endswith("Restart the query to read with the topic's new schema.")
    assert describe_change(SchemaInfo.avro(V2), SchemaInfo.avro(V1)) == "field b (int) added"
    assert describe_change(SchemaInfo.json(V1), SchemaInfo.avro(V1)) == (
        "the schema type is JSON in the messages, AVRO in the query"
    )


def test_key_value_inline_and_separated() -> None:
    inline = key_value_schema(
        SchemaInfo.primitive(SchemaType.STRING), SchemaInfo.primitive(SchemaType.INT32)
    )
    registry = _Registry(inline)
    plan = plan_read_schema(registry, _options(), [T])  # type: ignore[arg-type]
    payload = struct.pack(">i", 1) + b"k" + struct.pack(">i", 4) + struct.pack(">i", 9)
    nulls = struct.pack(">i", -1) + struct.pack(">i", 4) + struct.pack(">i", 3)
    out = ValueDecoder(plan, T, registry.fetch)(_batch([payload, nulls], [0, 0]))
    assert out.column("key").to_pylist() == ["k", None]
    assert out.column("value").to_pylist() == [9, 3]
    keys, values, bad = split_inline(pa.array([b"\x00\x00", payload]))
    assert bad.tolist() == [True, False]
    assert (keys.to_pylist(), values.to_pylist()) == ([None, b"k"], [None, struct.pack(">i", 9)])


def test_write_plans() -> None:
    struct_type = pa.struct([pa.field("a", pa.int64())])
    derived = plan_write(
        T, struct_type, None, _options(recordName="R", recordNamespace="x.y"), None
    )
    assert derived.schema is not None and derived.schema.type is SchemaType.AVRO
    assert json.loads(derived.schema.data)["namespace"] == "x.y"
    assert plan_write(T, pa.binary(), None, _options(), None).schema is None
    assert plan_write(T, pa.int32(), None, _options(), None).schema == SchemaInfo.primitive(
        SchemaType.INT32
    )
    assert plan_write(T, struct_type, None, _options(schemaMode="raw"), None).schema is None
    existing = VersionedSchema(SchemaInfo.avro(V1), 0)
    with pytest.raises(PulsarWriteError, match=r"with its schema \(AVRO\).*field"):
        plan_write(T, pa.struct([pa.field("a", pa.string())]), None, _options(), existing)
    # STRING topics are written in UTF-8 only (read in any charset): another is refused.
    utf16 = SchemaInfo(SchemaType.STRING, "String", b"", {"__charset": "UTF-16"})
    with pytest.raises(PulsarWriteError, match="charset UTF-16 are not supported, only UTF-8"):
        plan_write(T, pa.string(), None, _options(), VersionedSchema(utf16, 0))
    fits = plan_write(T, struct_type, None, _options(), existing)
    assert fits.schema == existing.info
    table = pa.table({"value": pa.array([{"a": 5}], struct_type)})
    encoded = RowEncoder(fits).encode(table)
    assert encoded.column("value").to_pylist() == [_avro(V1, {"a": 5})]


def test_the_schema_version_column() -> None:
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    assert entry_schema_version(meta) is None
    meta.schema_version = struct.pack(">q", 3)
    assert entry_schema_version(meta) == 3
    column = schema_version_column([3, None], np.array([0, 1, 1, 0]))
    assert column.to_pylist() == [3, None, None, 3]


def test_a_read_planned_without_a_schema_fails_on_versions_of_a_typed_one() -> None:
    """A topic that gains a typed schema after planning: its messages' versions fail the
    batch (restart, or raw mode); BYTES versions, and a schema deleted since, stay bytes."""
    registry = _Registry()
    plan = plan_read_schema(registry, _options(), [T])  # type: ignore[arg-type]
    assert plan.reader is None and not plan.passes_through
    dead = plan_read_schema(registry, _options(decodeErrorMode="deadLetter"), [T])  # type: ignore[arg-type]
    raw = plan_read_schema(registry, _options(schemaMode="raw"), [T])  # type: ignore[arg-type]
    assert raw.passes_through
    registry.versions += [SchemaInfo.primitive(SchemaType.BYTES), SchemaInfo.avro(V1)]
    typed = _batch([b"a", _avro(V1, {"a": 1})], [0, 1])

    def latest() -> SchemaInfo | None:
        found = registry.latest_schema(T)
        return None if found is None else found.info

    # No versions, or a BYTES one: the batch as it is (dead letters: a null column).
    decode = ValueDecoder(plan, T, registry.fetch, stream=True, latest=latest)
    untyped = _batch([b"x", b"y"], [None, 0])
    assert decode(untyped) is untyped
    for stream, advice in [(True, "Restart the query"), (False, "load() the DataFrame again")]:
        decode = ValueDecoder(plan, T, registry.fetch, stream=stream, latest=latest)
        with pytest.raises(SchemaChangedError) as info:
            decode(typed)
        text = str(info.value)
        assert text.startswith(f"{T}: the query was planned when the topic had no schema")
        assert "messages now carry schema version 1 (AVRO); the topic's schema is AVRO" in text
        assert advice in text and "schemaMode=raw" in text
    with pytest.raises(SchemaChangedError, match="schema version 1 \\(AVRO\\)"):
        ValueDecoder(dead, T, registry.fetch, latest=latest)(typed)  # not a dead letter
    # Raw mode reads the same batch as it is.
    assert ValueDecoder(raw, T, registry.fetch, latest=latest)(typed) is typed
    # The schema deleted since (the topic has none again): bytes, asked once per version.
    registry.versions.append(SchemaInfo.primitive(SchemaType.BYTES))
    asked = len(registry.asked)
    decode = ValueDecoder(plan, T, registry.fetch, latest=latest)
    assert decode(typed) is typed and decode(typed) is typed
    assert len(registry.asked) == asked + 2  # versions 0 and 1, once each


def test_times_of_day_without_spark_time_type_are_microseconds_of_the_day(monkeypatch) -> None:
    """Spark before 4.1 has no TimeType: a time of day reads as a long, microseconds of the
    day; a LOCAL_TIME's nanoseconds are rounded down (1 ns is 0 us, not an Arrow error)."""
    from pyspark.sql import types as S

    from pulsar_spark.spark import spark_types

    monkeypatch.setattr(spark_types, "_TIME_TYPE", None)
    clock = pa.struct([pa.field("clock", pa.time32("ms"))])
    row = pa.schema([pa.field("value", pa.time64("ns")), pa.field("t", clock)])
    spark = spark_types.spark_schema(row)
    assert spark["value"].dataType == S.LongType()
    assert spark["t"].dataType == S.StructType([S.StructField("clock", S.LongType())])
    target = spark_types.arrow_for(spark)
    assert target.field("value").type == pa.int64()
    nanos = [0, 1, 999, 1_000, 1_999, 86_399_999_999_999, None]
    clocks = pa.StructArray.from_arrays(
        [pa.array([0, 1, 45_296_789, 86_399_999, None, 7, 8], pa.time32("ms"))], fields=list(clock)
    )
    batch = pa.RecordBatch.from_arrays([pa.array(nanos, pa.time64("ns")), clocks], schema=row)
    out = spark_types.to_spark_arrow(batch, target)
    assert out.schema.equals(target)
    assert out.column("value").to_pylist() == [0, 0, 0, 1, 1, 86_399_999_999, None]
    assert [c["clock"] for c in out.column("t").to_pylist()] == [
        0,
        1_000,
        45_296_789_000,
        86_399_999_000,
        None,
        7_000,
        8_000,
    ]
