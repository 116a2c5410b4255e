"""A write never changes a topic's schema by accident: a DataFrame without a ``value``
column (one misspelt ``valeu``, or a record's fields) has its columns packed into a record
only with ``rowLayout=streamnative`` or for a topic whose record schema they fit; otherwise
the write fails as it is planned, before any producer connects, naming the topic, the
columns and the near miss, and the topic keeps no schema and no message.

Units of the check first, then batch, exactly-once and stream writes on Apache Pulsar's
registry, and the refusal on pulsar-lite (no registry)."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient, VersionedSchema
from pulsar_spark.protocol.schemas.info import SchemaInfo
from pulsar_spark.protocol.schemas.types import SchemaType
from pulsar_spark.spark.compat import spark_version
from pulsar_spark.spark.errors import PulsarWriteError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.streamnative_rows import sink_columns
from pulsar_spark.spark.write_schema import check_packed, near_misses
from pulsar_spark.spark.writer import plan_topic_writes
from tests.support.admin import AdminError

ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": ["null", "long"], "default": None},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
#: What the refusal of a ``valeu`` DataFrame says, whatever the topic.
REFUSED = r"no 'value' column \(its columns: valeu, key\)\. Did you mean 'value' for 'valeu'\?"


def _options(**extra: str) -> Any:
    return parse_options({"service.url": "pulsar://127.0.0.1:6650", "topic": "t", **extra})


def _packed(*fields: tuple[str, pa.DataType]) -> tuple[tuple[str, ...], pa.DataType]:
    columns = sink_columns(pa.schema(list(fields)))
    return columns.packed, columns.schema.field("value").type


# -- units ---------------------------------------------------------------------------------


def test_near_misses_name_the_column_meant() -> None:
    assert near_misses(["valeu", "id"]) == "'value' for 'valeu'"
    assert near_misses(["Value", "kye", "evnetTime", "__kye"]) == (
        "'value' for 'Value', 'key' for 'kye', 'eventTime' for 'evnetTime', '__key' for '__kye'"
    )
    assert near_misses(["id", "name", "note", "amount", "valid", "key"]) == ""


def test_packed_columns_need_streamnative_or_a_record_schema_they_fit() -> None:
    packed, value = _packed(("valeu", pa.string()), ("key", pa.string()))
    assert packed == ("valeu", "key")
    with pytest.raises(PulsarWriteError, match=REFUSED + r".*the topic has no schema") as e:
        check_packed("persistent://public/default/t", packed, value, _options(), None)
    text = str(e.value)
    assert text.startswith("writing to persistent://public/default/t: ")
    assert "Add a 'value' column" in text and "set rowLayout=streamnative" in text
    check_packed("t", packed, value, _options(rowLayout="streamnative"), None)
    with pytest.raises(PulsarWriteError, match="schemaMode=raw writes no schema"):
        check_packed("t", packed, value, _options(schemaMode="raw"), None)
    text_schema = VersionedSchema(SchemaInfo.primitive(SchemaType.STRING), 0)
    with pytest.raises(PulsarWriteError, match="the topic's schema is STRING, not a record"):
        check_packed("t", packed, value, _options(), text_schema)
    order = VersionedSchema(SchemaInfo.avro(json.dumps(ORDER)), 0)
    with pytest.raises(PulsarWriteError, match=r"do not fit the topic's schema \(AVRO\)"):
        check_packed("t", packed, value, _options(), order)
    fields, record = _packed(("id", pa.int64()), ("note", pa.string()))
    check_packed("t", fields, record, _options(), order)  # the topic's own record
    # A DataFrame with ``value`` is nothing to pack: no check.
    assert sink_columns(pa.schema([("value", pa.binary()), ("__key", pa.string())])).packed == ()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_driver_plan_refuses_packed_columns_without_a_broker_where_it_can() -> None:
    url = f"pulsar://127.0.0.1:{_closed_port()}"
    frame = T.StructType([T.StructField("value", T.BinaryType())])  # the sink's columns
    raw = parse_options({"service.url": url, "topic": "t", "schemaMode": "raw"})
    with pytest.raises(PulsarWriteError, match=r"its columns: valeu\)"):
        plan_topic_writes(raw, frame, ("valeu",))
    streamnative = parse_options(
        {"service.url": url, "topic": "t", "schemaMode": "raw", "rowLayout": "streamnative"}
    )
    assert plan_topic_writes(streamnative, frame, ("valeu",)) == {}
    # Typed writes ask the topic's schema: with the broker away, each task asks and checks.
    typed = parse_options({"service.url": url, "topic": "t", "connectionTimeoutMs": "2000"})
    assert plan_topic_writes(typed, frame, ("valeu",)) == {}


# -- on Apache Pulsar's registry -----------------------------------------------------------


def _misspelt(spark) -> Any:
    return spark.createDataFrame([("v1", "k1"), ("v2", "k2")], "valeu string, key string")


def _write(df, url: str, **options: str) -> None:
    df.write.format("pulsar").option("service.url", url).options(**options).mode("append").save()


def _no_schema_no_message(apache, spark, topic: str) -> None:
    with PulsarClient(apache.service_url) as client:
        assert client.latest_schema(topic) is None
    with pytest.raises(AdminError) as e:  # the registry's own answer: no schema
        apache.admin.request("GET", f"schemas/{topic.split('://', 1)[1]}/schema")
    assert e.value.status == 404
    back = spark.read.format("pulsar").option("service.url", apache.service_url)
    assert back.option("topic", topic).load().count() == 0


def test_a_misspelt_value_is_refused_and_registers_nothing(spark, apache_pulsar, topic_name):
    url = apache_pulsar.service_url
    with pytest.raises(Exception, match=REFUSED) as e:
        _write(_misspelt(spark), url, topic=topic_name)
    assert f"writing to {topic_name}: " in str(e.value)
    assert "PulsarWriteError" in f"{type(e.value).__name__}: {e.value}"
    # Exactly-once writes are planned the same, before their transactions are asked for.
    with pytest.raises(Exception, match=REFUSED):
        _write(_misspelt(spark), url, topic=topic_name, deliveryGuarantee="exactly-once")
    _no_schema_no_message(apache_pulsar, spark, topic_name)


def test_rowlayout_streamnative_packs_the_columns_as_before(spark, apache_pulsar, topic_name):
    url = apache_pulsar.service_url
    _write(_misspelt(spark), url, topic=topic_name, rowLayout="streamnative")
    with PulsarClient(url) as client:
        registered = client.latest_schema(topic_name)
    assert registered is not None and registered.info.type is SchemaType.AVRO
    fields = [f["name"] for f in json.loads(registered.info.data)["fields"]]
    assert fields == ["valeu", "key"]
    back = (
        spark.read.format("pulsar").option("service.url", url).option("topic", topic_name)
        .option("rowLayout", "streamnative").load()
    )  # fmt: skip
    assert sorted((r.valeu, r.key) for r in back.collect()) == [("v1", "k1"), ("v2", "k2")]


def test_a_topic_with_a_record_schema_takes_columns_that_fit_it(spark, apache_pulsar, topic_name):
    url = apache_pulsar.service_url
    first = spark.createDataFrame([((1, "a"),)], "value struct<id: long, note: string>")
    _write(first, url, topic=topic_name, recordName="Order")
    with PulsarClient(url) as client:
        before = client.latest_schema(topic_name)
    assert before is not None and before.info.type is SchemaType.AVRO
    fields = spark.createDataFrame([(2, "b"), (3, None)], "id long, note string")
    _write(fields, url, topic=topic_name)  # no value column: the topic's record's fields
    wrong = spark.createDataFrame([(4, "c")], "id long, nota string")
    with pytest.raises(Exception, match=r"its columns: id, nota\).*do not fit the topic's schema"):
        _write(wrong, url, topic=topic_name)
    with PulsarClient(url) as client:
        after = client.latest_schema(topic_name)
    assert after == before  # the same schema, no new version
    back = spark.read.format("pulsar").option("service.url", url).option("topic", topic_name)
    rows = sorted(tuple(r) for r in back.load().select("value.*").collect())
    assert rows == [(1, "a"), (2, "b"), (3, None)]


@pytest.mark.skipif(spark_version() < (4, 2), reason="Pulsar stream sinks: Spark 4.2+")
def test_a_stream_with_a_misspelt_value_fails_the_query(
    spark, apache_pulsar, topic_name, tmp_path: Path
) -> None:
    url = apache_pulsar.service_url
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    _write(spark.createDataFrame([(b"v", "k")], "value binary, key string"), url, topic=source)
    df = (
        spark.readStream.format("pulsar").option("service.url", url).option("topic", source)
        .option("startingOffsets", "earliest").load()
        .selectExpr("CAST(value AS STRING) AS valeu", "CAST(key AS STRING) AS key")
    )  # fmt: skip
    with pytest.raises(Exception, match=REFUSED) as e:
        query = (
            df.writeStream.format("pulsar").option("service.url", url).option("topic", target)
            .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True)
            .start()
        )  # fmt: skip
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
    assert f"writing to {target}: " in str(e.value)
    _no_schema_no_message(apache_pulsar, spark, target)


# -- on pulsar-lite (no registry) ----------------------------------------------------------


def test_pulsar_lite_refuses_a_misspelt_value(spark, pulsar_lite, topic_name) -> None:
    url = pulsar_lite.service_url
    with pytest.raises(Exception, match=REFUSED + r".*the topic has no schema"):
        _write(_misspelt(spark), url, topic=topic_name)
    # Rows routed by ``__topic``: each task checks its topics before it opens a producer.
    routed = spark.createDataFrame([(topic_name, "v")], "__topic string, valeu string")
    with pytest.raises(Exception, match=r"no 'value' column \(its columns: __topic, valeu\)"):
        _write(routed, url)
    # Beside a ``value``, an unknown column is an error naming it (and the column meant).
    extra = spark.createDataFrame([("v", "k")], "value string, kye string")
    with pytest.raises(Exception, match=r"cannot write column\(s\) \['kye'\] \(did you mean 'key'"):
        _write(extra, url, topic=topic_name)
    back = spark.read.format("pulsar").option("service.url", url).option("topic", topic_name)
    assert back.load().count() == 0
