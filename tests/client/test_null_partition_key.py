"""A null key of a SEPARATED KEY_VALUE message carries ``null_partition_key``, as the Java
client sends it (TypedMessageBuilderImpl): in the batch item's metadata (field 10) and, for
a message sent alone, in the message metadata (field 30). Checked on the wire (the broker's
examinemessage answer: the stored entry), by the Java client's KeyValue consumer and by our
reader."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.write.outgoing import seal
from pulsar_spark.columnar.rows.encode import Item, Rows, separated_keys_field
from pulsar_spark.protocol import PulsarApi_pb2 as pb
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, key_value_schema
from pulsar_spark.protocol.schemas.types import SchemaType
from tests.support.admin import batch_items, examine_message
from tests.support.java_client import java_consume, key_value

KEYS = [b"k1", None, b"k3", None]
VALUES = [b"v1", b"v2", None, b"v4"]


def _table() -> pa.Table:
    table = pa.table({"value": pa.array(VALUES, pa.binary())})
    return table.append_column(separated_keys_field(), pa.array(KEYS, pa.binary()))


def test_a_message_sent_alone_copies_the_flag_into_its_metadata() -> None:
    rows = Rows(_table())
    flags = []
    for i in range(4):
        item = Item(i, rows.pres[i], rows.nulls[i], rows.values[i])
        sent = seal([item], producer="p", topic="t", batched=False, codec=0, limit=1 << 20,
                    chunking=False)  # fmt: skip
        meta = pb.MessageMetadata.FromString(sent.metadata)
        assert meta.HasField("partition_key") == (KEYS[i] is not None)
        flags.append(meta.null_partition_key)
    assert flags == [False, True, False, True]


@pytest.mark.parametrize("batching", [True, False])
def test_null_key_value_keys_reach_the_broker_flagged_and_java_reads_them_null(
    apache_pulsar, topic_name, batching: bool
) -> None:
    url = apache_pulsar.service_url
    string = SchemaInfo.primitive(SchemaType.STRING)
    info = key_value_schema(string, string, KeyValueEncoding.SEPARATED)
    with PulsarClient(url) as client:
        with client.create_producer(topic_name, schema=info, batching=batching) as producer:
            producer.send_batch(_table())
            producer.flush()
        read = [r for b in client.read_batches(topic_name) for r in b.to_pylist()]
    assert [r["key"] for r in read] == KEYS  # our reader: the key bytes, null keys null
    if batching:
        headers, payload = examine_message(apache_pulsar.http_url, topic_name, 1)
        assert headers.get("X-Pulsar-num-batch-message") == "4"
        items = batch_items(payload)
        assert [smm.null_partition_key for smm in items] == [False, True, False, True]
        assert [smm.HasField("partition_key") for smm in items] == [True, False, True, False]
        assert [smm.partition_key_b64_encoded for smm in items] == [True, False, True, False]
    else:
        flags = []
        for position in range(1, 5):
            headers, _ = examine_message(apache_pulsar.http_url, topic_name, position)
            flags.append(headers.get("X-Pulsar-null-partition-key"))
        assert flags == [None, "true", None, "true"]
    spec = key_value("STRING", "STRING", "SEPARATED")
    got = java_consume(url, topic_name, spec, 4)
    assert [m["value"] for m in got] == [
        {"key": "k1", "value": "v1"},
        {"key": None, "value": "v2"},
        {"key": "k3", "value": None},
        {"key": None, "value": "v4"},
    ]
