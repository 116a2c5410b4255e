"""Hypothesis properties of the protocol layer: what is encoded comes back.

* frames -> FrameDecoder (bytes fed in arbitrary pieces) -> open_entry ->
  messages() / ArrowBatchBuilder give exactly the items that were encoded;
* select() agrees with a small reference model of the reader's filters
  (``test_select_properties.py``);
* ChunkAssembler puts split payloads back together and follows its rules for
  duplicates, restarts, gaps and eviction (``test_chunk_properties.py``).
"""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    CODECS,
    U64,
    Built,
    Item,
    ack_sets,
    build_entry,
    built_entries,
    codecs,
    decode_stream,
    items,
    message_command,
    message_dict,
    message_ids,
    metadata_base,
    payload_frames,
    split_points,
)

from pulsar_spark.columnar import ROW_SCHEMA, ArrowBatchBuilder
from pulsar_spark.protocol import (
    MessageId,
    compress,
    encode_batch,
    encode_payload_command,
    is_batch,
    is_chunk,
    messages,
    open_entry,
    pb,
)

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPIC = "persistent://public/default/prop-topic"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ms(value: int | None) -> datetime | None:
    if value is None:
        return None
    return _EPOCH + timedelta(milliseconds=value)


def _signed(value: int) -> int:
    value &= U64
    return value - (1 << 64) if value >> 63 else value


# ---------------------------------------------------------------------------
# Encode -> frames -> entries -> messages / Arrow
# ---------------------------------------------------------------------------


@PROPS
@given(cases=st.lists(payload_frames(), min_size=1, max_size=4), data=st.data())
def test_frames_round_trip_through_messages(cases, data) -> None:
    stream = b"".join(case.data for case in cases)
    frames = decode_stream(stream, data.draw(split_points(len(stream))))
    assert len(frames) == len(cases)
    offset = 0
    for frame, case in zip(frames, cases, strict=True):
        assert frame.offset == offset
        offset += len(case.data)
        assert frame.size == len(case.data)
        assert frame.command == case.command
        assert frame.metadata == case.built.metadata
        assert frame.broker_entry_metadata == case.broker_entry_metadata
        assert frame.has_checksum
        assert bytes(frame.payload) == case.built.payload
        assert is_batch(frame.metadata) == case.built.batched
        assert not is_chunk(frame.metadata)
        entry = open_entry(
            case.ledger,
            case.entry,
            case.partition,
            frame.metadata,
            frame.payload,
            broker_entry_metadata=frame.broker_entry_metadata,
        )
        assert entry.batched == case.built.batched
        assert list(entry.batch_indexes) == case.built.batch_indexes
        got = messages(entry)
        assert [message_dict(m) for m in got] == case.built.expected()
        meta = case.built.metadata
        bem = case.broker_entry_metadata
        for pos, message in enumerate(got):
            bi = case.built.batch_indexes[pos]
            assert message.message_id == MessageId(case.ledger, case.entry, case.partition, bi)
            assert str(message.message_id) == f"{case.ledger}:{case.entry}:{case.partition}:{bi}"
            assert message.publish_time == meta.publish_time
            assert message.producer_name == meta.producer_name
            assert message.broker_publish_time == (bem.broker_timestamp if bem else None)
            size = meta.num_messages_in_batch if case.built.batched else 1
            assert message.broker_index == (
                _signed((bem.index - size + 1 + max(bi, 0)) % 2**64)
                if bem and bem.HasField("index")
                else None
            )
        builder = ArrowBatchBuilder(TOPIC)
        builder.add(entry)
        rows = builder.build().to_pylist()
        assert [r["index"] for r in rows] == [m.broker_index for m in got]
        assert [r["brokerPublishTime"] for r in rows] == [
            _ms(m.broker_publish_time) if m.broker_publish_time else None for m in got
        ]


def _arrow_expected(built: Built, ledger: int, entry: int, partition: int) -> list[dict]:
    meta = built.metadata
    return [
        {
            "key": exp["key"],
            "value": exp["value"],
            "topic": TOPIC,
            "partition": partition,
            "messageId": f"{ledger}:{entry}:{partition}:{exp['batch_index']}",
            "publishTime": _ms(meta.publish_time),
            "eventTime": _ms(exp["event_time"]),
            "properties": list(exp["properties"].items()),
            "producerName": meta.producer_name,
            "sequenceId": _signed(exp["sequence_id"]),
            "brokerPublishTime": None,
            "index": None,
            "schemaVersion": None,
        }
        for exp in built.expected()
    ]


@PROPS
@given(cases=st.lists(payload_frames(), min_size=1, max_size=4), data=st.data())
def test_frames_round_trip_through_arrow(cases, data) -> None:
    stream = b"".join(case.data for case in cases)
    frames = decode_stream(stream, data.draw(split_points(len(stream))))
    builder = ArrowBatchBuilder(TOPIC + "-partition-3", partition=3)
    expected: list[dict] = []
    for frame, case in zip(frames, cases, strict=True):
        entry = open_entry(case.ledger, case.entry, 3, frame.metadata, frame.payload)
        builder.add(entry)
        expected += _arrow_expected(case.built, case.ledger, case.entry, 3)
    assert builder.rows == len(expected)
    batch = builder.build()
    assert batch.schema == ROW_SCHEMA
    assert batch.num_rows == len(expected)
    assert batch.to_pylist() == expected
    assert builder.rows == 0
    assert builder.build().num_rows == 0


@PROPS
@given(built=built_entries(compacted=True), data=st.data())
def test_arrow_and_messages_agree_on_selected_positions(built, data) -> None:
    """The Arrow path and messages() give the same rows for any selection."""
    entry = open_entry(7, 9, -1, built.metadata, built.payload)
    positions = data.draw(st.lists(st.sampled_from(range(entry.count)), unique=True).map(sorted))
    builder = ArrowBatchBuilder(TOPIC)
    builder.add(entry, positions)
    rows = builder.build().to_pylist()
    msgs = messages(entry, positions)
    assert len(rows) == len(msgs) == len(positions)
    for row, message in zip(rows, msgs, strict=True):
        assert row["key"] == message.key
        assert row["value"] == message.value
        assert row["messageId"] == str(message.message_id)
        assert dict(row["properties"]) == message.properties
        assert row["eventTime"] == _ms(message.event_time)
        assert row["sequenceId"] == message.sequence_id
        assert row["producerName"] == message.producer_name
        assert row["index"] == message.broker_index
        assert row["partition"] == -1


@PROPS
@given(
    item=items(with_sequence=False, allow_compacted_out=False),
    meta=metadata_base(),
    codec=codecs,
)
def test_single_message_round_trip(item, meta, codec) -> None:
    rebuilt = build_entry([item], meta, codec, batched=False)
    assert not is_batch(rebuilt.metadata)
    entry = open_entry(1, 2, 0, rebuilt.metadata, rebuilt.payload)
    assert not entry.batched
    assert list(entry.batch_indexes) == [-1]
    (message,) = messages(entry)
    assert message_dict(message) == rebuilt.expected()[0]
    assert str(message.message_id) == "1:2:0:-1"


@PROPS
@given(built=built_entries(batched=True, min_items=1, max_items=1))
def test_batch_of_one_is_a_batch(built) -> None:
    """num_messages_in_batch=1 present: still a batch, the payload holds an SMM."""
    assert built.metadata.HasField("num_messages_in_batch")
    assert built.metadata.num_messages_in_batch == 1
    entry = open_entry(3, 4, -1, built.metadata, built.payload)
    assert entry.batched
    assert list(entry.batch_indexes) == [0]
    (message,) = messages(entry)
    assert message_dict(message) == built.expected()[0]
    assert str(message.message_id) == "3:4:-1:0"


@PROPS
@given(mid=message_ids(), ack_set=ack_sets, data=st.data())
def test_message_ids_round_trip_through_message_frames(mid, ack_set, data) -> None:
    """ledger/entry -1 and INT64_MAX travel as uint64 and come back signed."""
    command = message_command(mid.ledger, mid.entry, mid.partition, ack_set=ack_set)
    command.message.message_id.batch_index = mid.batch_index
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    frame_bytes = encode_payload_command(command, meta, b"x")
    (frame,) = decode_stream(frame_bytes, data.draw(split_points(len(frame_bytes))))
    wire = frame.command.message.message_id
    assert MessageId.from_pb(wire) == mid
    assert list(frame.command.message.ack_set) == ack_set
    assert MessageId.parse(str(mid)) == mid
    assert MessageId.from_pb(mid.to_pb()) == mid


@PROPS
@given(
    its=st.lists(st.builds(Item, payload=st.binary(max_size=20)), min_size=1, max_size=5),
    codec=st.sampled_from(CODECS),
)
def test_encode_batch_sets_payload_sizes(its, codec) -> None:
    smms = [item.smm() for item in its]
    raw = encode_batch(zip(smms, [i.payload for i in its], strict=True))
    assert [s.payload_size for s in smms] == [len(i.payload) for i in its]
    meta = pb.MessageMetadata(
        producer_name="p", sequence_id=1, publish_time=1, num_messages_in_batch=len(its)
    )
    if codec != pb.NONE:
        meta.compression = codec
        meta.uncompressed_size = len(raw)
    entry = open_entry(1, 1, -1, meta, compress(codec, raw))
    assert [m.value for m in messages(entry)] == [i.payload for i in its]


@PROPS
@given(key=st.binary(max_size=40))
def test_binary_keys_survive_base64(key) -> None:
    item = Item(payload=b"v", key=key, key_mode="b64")
    built = build_entry(
        [item], pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1), pb.NONE
    )
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    (message,) = messages(entry)
    assert message.key == key
    assert message.partition_key == base64.b64encode(key).decode()
    builder = ArrowBatchBuilder(TOPIC)
    builder.add(entry)
    assert builder.build().column("key").to_pylist() == [key]


def test_strategies_frame_like_the_encoder() -> None:
    """The fuzz tests' raw framing helper writes what encode_payload_command does."""
    from strategies import message_command, raw_payload_frame

    from pulsar_spark.protocol import encode_payload_command

    cmd = message_command(1, 2, 3)
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    bem = pb.BrokerEntryMetadata(broker_timestamp=5, index=9)
    assert raw_payload_frame(
        cmd.SerializeToString(),
        meta.SerializeToString(),
        b"xyz",
        broker_entry_metadata=bem.SerializeToString(),
    ) == encode_payload_command(cmd, meta, b"xyz", broker_entry_metadata=bem)
