"""``rowLayout=streamnative``: StreamNative's columns on read, its columns on write.

Unit properties of the parts (ids as ``MessageIdData`` bytes, the layout's schema and
the sink's column mapping), then reads and writes on Apache Pulsar (a registry, for the
record topic): the DataFrame's schema is StreamNative's, its values the messages',
``__messageId`` the official client's ``MessageId.serialize()`` of each message (plain,
batched, partitioned, chunked), a write with ``__topic``/``__key`` columns routes and
keys its rows, and a stream gives the same columns and writes them back as they are
(columns packed into a record with ``rowLayout=streamnative`` on the write, refused
without it on a topic without a schema).
The broker tests share two topics, written once.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from pulsar_spark.client import PulsarClient
from pulsar_spark.columnar.rows.message_ids import (
    IdParts,
    id_bytes_column,
    id_parts,
    parse_message_ids,
    with_id_parts,
)
from pulsar_spark.columnar.rows.schema import ROW_SCHEMA
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.spark.errors import PulsarOptionError, PulsarWriteError, TopicSchemaError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.streamnative_rows import (
    sink_columns,
    streamnative_batch,
    streamnative_schema,
)
from tests.support.official import official_client

#: StreamNative's metadata columns (``SchemaUtils.metaDataFields``).
META = [
    ("__key", T.BinaryType()),
    ("__topic", T.StringType()),
    ("__messageId", T.BinaryType()),
    ("__publishTime", T.TimestampType()),
    ("__eventTime", T.TimestampType()),
    ("__messageProperties", T.MapType(T.StringType(), T.StringType(), True)),
]

#: The chunked message's value.
CHUNKED = b"c" * 10_000

# -- units ---------------------------------------------------------------------------------

_ids = st.tuples(
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.one_of(st.none(), st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))),
)


@settings(deadline=None, max_examples=30)
@given(st.lists(_ids, max_size=20))
def test_id_bytes_are_the_protobuf_serialization(rows: list[tuple[Any, ...]]) -> None:
    text = pa.array(
        [f"{ledger}:{entry}:{p}:{b}" for ledger, entry, p, b, _, _ in rows], pa.string()
    )
    parts = IdParts(
        np.array([r[4] for r in rows], np.int64),
        np.array([-1 if r[5] is None else r[5][0] for r in rows], np.int64),
        np.array([-1 if r[5] is None else r[5][1] for r in rows], np.int64),
    )
    expected = []
    for ledger, entry, partition, batch, size, first in rows:
        data = pb.MessageIdData(ledgerId=ledger, entryId=entry)
        if partition >= 0:
            data.partition = partition
        if batch != -1:
            data.batch_index = batch
            if size > 0:
                data.batch_size = size
        if first is not None:
            data.first_chunk_message_id.ledgerId, data.first_chunk_message_id.entryId = first
            if partition >= 0:
                data.first_chunk_message_id.partition = partition
        expected.append(data.SerializeToString())
    got = id_bytes_column(parse_message_ids(text), parts)
    assert got.to_pylist() == expected


@settings(deadline=None, max_examples=30)
@given(
    st.lists(st.integers(0, 5000), max_size=30),
    st.lists(st.tuples(st.integers(0, 10**12), st.integers(0, 10**6)), max_size=5),
)
def test_id_parts_travel_in_the_schema(sizes: list[int], chunks: list[tuple[int, int]]) -> None:
    rows = np.arange(min(len(chunks), len(sizes)), dtype=np.int64)
    firsts = np.array(chunks[: len(rows)], np.int64).reshape(-1, 2)
    schema = with_id_parts(ROW_SCHEMA, np.array(sizes, np.int64), rows, firsts)
    parts = id_parts(schema, len(sizes))
    assert parts.batch_sizes.tolist() == sizes
    expected = [-1] * len(sizes)
    for row, (ledger, _) in zip(rows.tolist(), firsts.tolist(), strict=True):
        expected[row] = ledger
    assert parts.first_ledgers.tolist() == expected
    assert schema == ROW_SCHEMA  # metadata aside, the row schema


def test_the_layout_flattens_records_and_refuses_clashes() -> None:
    record = pa.struct([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    arrow = ROW_SCHEMA.set(1, pa.field("value", record)).append(
        pa.field("decodeError", pa.string())
    )
    layout = streamnative_schema(arrow, key_value=False, origin="topic t")
    assert layout.names == ["id", "name", *(n for n, _ in META), "decodeError"]
    assert all(f.nullable for f in layout)
    assert streamnative_schema(ROW_SCHEMA, key_value=False, origin="t").names[0] == "value"
    clash = pa.struct([pa.field("__key", pa.string())])
    with pytest.raises(TopicSchemaError, match=r"topic t has field\(s\) \['__key'\]"):
        streamnative_schema(ROW_SCHEMA.set(1, pa.field("value", clash)), key_value=False,
                            origin="topic t")  # fmt: skip
    with pytest.raises(TopicSchemaError, match="KEY_VALUE"):
        streamnative_schema(ROW_SCHEMA, key_value=True, origin="topic t")


def test_a_decoded_batch_becomes_streamnative_rows() -> None:
    record = pa.struct([pa.field("id", pa.int64(), False)])
    schema = ROW_SCHEMA.set(1, pa.field("value", record))
    rows = [
        {"key": b"k", "value": {"id": 1}, "topic": "persistent://public/default/t",
         "partition": 2, "messageId": "7:3:2:1", "publishTime": 1, "eventTime": None,
         "properties": [], "producerName": "p", "sequenceId": 1},
        {"key": None, "value": None, "topic": "persistent://public/default/t", "partition": 2,
         "messageId": "7:4:2:-1", "publishTime": 2, "eventTime": 5, "properties": [("a", "b")],
         "producerName": "p", "sequenceId": 2},
    ]  # fmt: skip
    decoded = pa.RecordBatch.from_pylist(rows, schema=schema)
    built = with_id_parts(ROW_SCHEMA, np.array([4, 0]), np.empty(0, np.int64), np.empty((0, 2)))
    names = streamnative_schema(schema, key_value=False, origin="t").names
    out = streamnative_batch(decoded, built, names).to_pylist()
    assert [r["id"] for r in out] == [1, None]  # a null record: its fields null
    assert {r["__topic"] for r in out} == {"persistent://public/default/t-partition-2"}
    first = pb.MessageIdData(ledgerId=7, entryId=3, partition=2, batch_index=1, batch_size=4)
    assert [r["__messageId"] for r in out] == [
        first.SerializeToString(),
        pb.MessageIdData(ledgerId=7, entryId=4, partition=2).SerializeToString(),
    ]
    assert [r["__key"] for r in out] == [b"k", None]
    assert out[1]["__messageProperties"] == [("a", "b")]
    projected = streamnative_batch(decoded, built, ["__eventTime", "id"])
    assert projected.schema.names == ["__eventTime", "id"]


def test_the_sink_maps_streamnative_columns() -> None:
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("name", pa.string()),
            ("__key", pa.string()),
            ("__eventTime", pa.int64()),
            ("__messageId", pa.binary()),
        ]
    )
    columns = sink_columns(schema)
    assert columns.schema.names == ["value", "key", "eventTime"]
    assert columns.packed == ("id", "name", "__key", "__eventTime", "__messageId")
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "name": "a", "__key": "k", "__eventTime": 5, "__messageId": b""},
         {"id": 2, "name": None, "__key": None, "__eventTime": 0, "__messageId": b""}],
        schema=schema,
    )  # fmt: skip
    out = columns.apply(batch)
    assert out.column("value").to_pylist() == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    assert out.column("key").to_pylist() == [b"k", None]
    assert [t and t.timestamp() for t in out.column("eventTime").to_pylist()] == [0.005, None]
    stamps = pa.schema([("value", pa.binary()), ("__eventTime", pa.timestamp("us", tz="UTC"))])
    times = pa.RecordBatch.from_pylist(
        [{"value": b"", "__eventTime": 5_000}, {"value": b"", "__eventTime": -1}], schema=stamps
    )
    written = sink_columns(stamps).apply(times).column("eventTime").cast(pa.int64())
    assert written.to_pylist() == [5_000, None]  # microseconds; not positive: unset
    one = sink_columns(pa.schema([("n", pa.int32()), ("__topic", pa.string())]))
    assert one.schema.names == ["value", "topic"] and one.schema.field("value").type == pa.int32()
    ours = sink_columns(pa.schema([("value", pa.binary()), ("__key", pa.binary())]))
    assert ours.schema.names == ["value", "key"] and not ours.grouped
    with pytest.raises(PulsarWriteError, match="'__key'"):
        sink_columns(pa.schema([("value", pa.binary()), ("__key", pa.int32())]))
    with pytest.raises(PulsarWriteError, match="'__key' and 'key'"):
        sink_columns(
            pa.schema([("value", pa.binary()), ("__key", pa.binary()), ("key", pa.binary())])
        )
    # Only our columns and no value: left to the sink's check, which refuses it as before.
    assert not sink_columns(pa.schema([("key", pa.string()), ("__topic", pa.string())])).grouped


def test_row_layout_values() -> None:
    url = {"service.url": "pulsar://localhost:6650", "topic": "t"}
    assert parse_options({**url, "rowLayout": "StreamNative"}).row_layout == "streamnative"
    assert parse_options(url).row_layout == "pulsar-spark"
    with pytest.raises(PulsarOptionError, match="rowLayout"):
        parse_options({**url, "rowLayout": "kafka"})


# -- on a broker ---------------------------------------------------------------------------


def _order() -> Any:
    from pulsar.schema import Integer, Record, String

    class Order(Record):
        id = Integer()
        note = String()

    return Order


def _official_ids(url: str, topics: list[str]) -> dict[Any, tuple[str, bytes]]:
    """Value -> (topic the official reader names, ``MessageId.serialize()``)."""
    import pulsar

    found = {}
    with official_client(url) as client:
        for topic in topics:
            reader = client.create_reader(topic, pulsar.MessageId.earliest)
            while reader.has_message_available():
                message = reader.read_next(10_000)
                found[message.data()] = (message.topic_name(), message.message_id().serialize())
            reader.close()
    return found


@pytest.fixture(scope="module")
def topics(apache_pulsar) -> dict[str, str]:
    """An AVRO record topic (one batch of 3, then one message alone) and a 2-partition topic
    without a schema (messages alone, and one in chunks), written once."""
    from pulsar.schema import AvroSchema

    url, base = apache_pulsar.service_url, f"sn-{secrets.token_hex(4)}"
    names = {"avro": f"persistent://public/default/{base}-avro",
             "parts": f"persistent://public/default/{base}-parts"}  # fmt: skip
    apache_pulsar.admin.create_partitioned_topic(names["parts"], 2)
    order = _order()
    with official_client(url) as client:
        producer = client.create_producer(
            names["avro"], schema=AvroSchema(order), batching_enabled=True,
            batching_max_publish_delay_ms=1000,
        )  # fmt: skip
        for i in range(3):
            producer.send_async(order(id=i, note=f"n{i}"), None, partition_key=f"k{i}",
                                properties={"p": str(i)}, event_timestamp=1000 + i)  # fmt: skip
        producer.flush()
        producer.close()
        alone = client.create_producer(names["avro"], schema=AvroSchema(order),
                                       batching_enabled=False)  # fmt: skip
        alone.send(order(id=3, note=None))
        alone.close()
        parts = client.create_producer(names["parts"], batching_enabled=False)
        for i in range(4):
            parts.send(b"v%d" % i, partition_key=f"key{i}")
        parts.close()
    with PulsarClient(url) as ours:  # a message in 3 chunks (its id names its first one)
        chunks = ours.create_producer(names["parts"] + "-partition-0", batching=False,
                                      chunk_max_size=4096)  # fmt: skip
        with chunks:
            chunks.send(CHUNKED, "key4")
    return names


def _read(spark, url: str, **options: str):
    reader = (
        spark.read.format("pulsar").option("service.url", url).option("rowLayout", "streamnative")
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def test_a_record_topic_reads_as_streamnative_columns(spark, apache_pulsar, topics) -> None:
    url = apache_pulsar.service_url
    df = _read(spark, url, topic=topics["avro"])
    assert [(f.name, f.dataType) for f in df.schema] == [
        ("id", T.IntegerType()), ("note", T.StringType()), *META,
    ]  # fmt: skip
    rows = {r.id: r for r in df.selectExpr("*", "unix_millis(__eventTime) AS et").collect()}
    assert sorted(rows) == [0, 1, 2, 3]
    assert rows[3].note is None and rows[3]["__key"] is None and rows[3]["__eventTime"] is None
    assert rows[3]["__messageProperties"] == {}
    assert rows[1].note == "n1" and bytes(rows[1]["__key"]) == b"k1"
    assert rows[1]["__messageProperties"] == {"p": "1"}
    assert rows[1].et == 1001
    assert {r["__topic"] for r in rows.values()} == {topics["avro"]}
    import pulsar

    with official_client(url) as client:
        reader = client.create_reader(
            topics["avro"], pulsar.MessageId.earliest, schema=pulsar.schema.AvroSchema(_order())
        )
        official = {}
        while reader.has_message_available():
            message = reader.read_next(10_000)
            official[message.value().id] = message.message_id().serialize()
        reader.close()
    assert {i: bytes(r["__messageId"]) for i, r in rows.items()} == official
    alone = pulsar.MessageId.deserialize(official[3])  # a message sent alone: no batch fields
    assert (alone.entry_id(), alone.batch_index()) == (1, -1)
    assert official[3].endswith(b"\x10\x01")  # entry 1 is its last field
    assert official[0][-2:] == b"\x30\x03"  # batched: batch_size 3 at the end
    # A projection of StreamNative's columns, as .schema(...) gives it.
    some = (
        spark.read.format("pulsar").option("service.url", url).option("rowLayout", "streamnative")
        .option("topic", topics["avro"]).schema("note string, __messageId binary").load()
    )  # fmt: skip
    assert {bytes(r["__messageId"]) for r in some.collect()} == set(official.values())


def test_partitions_are_named_and_ids_match_the_official_client(
    spark, apache_pulsar, topics
) -> None:
    url = apache_pulsar.service_url
    df = _read(spark, url, topic=topics["parts"])
    assert [(f.name, f.dataType) for f in df.schema] == [("value", T.BinaryType()), *META]
    official = _official_ids(url, [f"{topics['parts']}-partition-{i}" for i in range(2)])
    got = {bytes(r.value): (r["__topic"], bytes(r["__messageId"])) for r in df.collect()}
    assert got == official
    assert got[CHUNKED][1].count(b"\x3a") >= 1  # first_chunk_message_id
    keys = {bytes(r.value): bytes(r["__key"]) for r in df.select("value", "__key").collect()}
    assert keys == {(b"v%d" % i if i < 4 else CHUNKED): b"key%d" % i for i in range(5)}


def test_a_write_routes_by_topic_column_and_keys_rows(spark, apache_pulsar, topics) -> None:
    url = apache_pulsar.service_url
    out = [f"{topics['avro']}-out{i}" for i in range(2)]
    rows = [(i, f"name{i}", out[i % 2], f"key{i}", 2000 + i, {"row": str(i)}, b"", None)
            for i in range(4)]  # fmt: skip
    frame = spark.createDataFrame(
        rows,
        "id long, name string, __topic string, __key string, __eventTime long, "
        "__messageProperties map<string,string>, __messageId binary, __publishTime timestamp",
    )
    sink = frame.write.format("pulsar").option("service.url", url).mode("append")
    with pytest.raises(Exception, match=r"no 'value' column \(its columns: id, name, __topic"):
        sink.save()  # columns packed into a record only when asked: nothing written
    sink.option("rowLayout", "streamnative").save()
    back = _read(spark, url, topics=",".join(out))
    assert back.columns[:2] == ["id", "name"]  # the other columns, as a record
    got = sorted(
        (r.id, r.name, bytes(r["__key"]), r.et, r["__messageProperties"], r["__topic"])
        for r in back.selectExpr("*", "unix_millis(__eventTime) AS et").collect()
    )
    assert got == [
        (i, f"name{i}", f"key{i}".encode(), 2000 + i, {"row": str(i)}, out[i % 2]) for i in range(4)
    ]
    # A StreamNative read written back as it is: its own columns are left out or mapped.
    copy = out[0] + "-copy"
    _read(spark, url, topic=topics["parts"]).write.format("pulsar").option(
        "service.url", url
    ).option("topic", copy).mode("append").save()
    import pulsar

    with official_client(url) as client:
        reader = client.create_reader(copy, pulsar.MessageId.earliest)
        copied = []
        while reader.has_message_available():
            message = reader.read_next(10_000)
            copied.append((message.data(), message.partition_key()))
        reader.close()
    # __key goes as key bytes: base64 text on the wire, as Java's keyBytes() sends it.
    expected = [(b"v%d" % i if i < 4 else CHUNKED, base64.b64encode(b"key%d" % i).decode())
                for i in range(5)]  # fmt: skip
    assert sorted(copied) == sorted(expected)


def test_a_stream_reads_and_writes_streamnative_columns(
    spark, apache_pulsar, topics, tmp_path
) -> None:
    """A stream in StreamNative's layout into a Pulsar stream sink, as it is: the record's
    fields become the value again, ``__key`` the key, its own id and time are left out."""
    url = apache_pulsar.service_url
    out = topics["avro"] + "-streamed"
    df = (
        spark.readStream.format("pulsar").option("service.url", url)
        .option("topic", topics["avro"]).option("startingOffsets", "earliest")
        .option("rowLayout", "streamnative").load()
    )  # fmt: skip
    assert [(f.name, f.dataType) for f in df.schema][2:] == META
    query = (
        df.writeStream.format("pulsar").option("service.url", url).option("topic", out)
        .option("rowLayout", "streamnative")  # the record's fields packed again
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None
    back = _read(spark, url, topic=out)
    rows = sorted(
        (r.id, r.note, r["__key"] and bytes(r["__key"]), r["__messageProperties"])
        for r in back.collect()
    )
    assert rows == [
        (0, "n0", b"k0", {"p": "0"}), (1, "n1", b"k1", {"p": "1"}), (2, "n2", b"k2", {"p": "2"}),
        (3, None, None, {}),
    ]  # fmt: skip
