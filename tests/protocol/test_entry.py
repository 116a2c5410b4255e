"""Example tests of entries: ids, tombstones, keys, errors (select() in test_entry_select.py)."""

from __future__ import annotations

import contextlib
import struct

import pyarrow as pa
import pytest
from strategies import CODECS, Item, build_entry

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import (
    BatchDecodeError,
    CorruptMessage,
    DecompressionError,
    MessageId,
    UncompressedSizeMismatch,
    compress,
    encode_batch,
    messages,
    open_entry,
    pb,
    select,
)
from pulsar_spark.protocol.entry_messages import decode_key
from pulsar_spark.protocol.wire import text

TOPIC = "persistent://public/default/t"


def _meta(**kw: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="prod", sequence_id=10, publish_time=1000, **kw)


def _batch(items: list[Item], codec: int = pb.NONE, **kw: object):
    return build_entry(items, _meta(), codec, **kw)  # type: ignore[arg-type]


def _arrow_rows(entry, positions=None) -> list[dict]:
    builder = ArrowBatchBuilder(TOPIC)
    builder.add(entry, positions)
    return builder.build().to_pylist()


# -- message ids --------------------------------------------------------------


def test_batch_item_ids_and_single_message_id() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b"), Item(payload=b"c")])
    entry = open_entry(12, 34, 5, built.metadata, built.payload)
    assert [str(m.message_id) for m in messages(entry)] == ["12:34:5:0", "12:34:5:1", "12:34:5:2"]
    assert [r["messageId"] for r in _arrow_rows(entry)] == ["12:34:5:0", "12:34:5:1", "12:34:5:2"]

    single = build_entry([Item(payload=b"x")], _meta(), pb.NONE, batched=False)
    entry = open_entry(12, 35, -1, single.metadata, single.payload)
    (message,) = messages(entry)
    assert message.message_id == MessageId(12, 35, -1, -1)
    assert str(message.message_id) == "12:35:-1:-1"
    assert [r["messageId"] for r in _arrow_rows(entry)] == ["12:35:-1:-1"]


def test_batch_of_one_keeps_its_item_metadata() -> None:
    """num_messages_in_batch=1 is a batch: the payload starts with an SMM, not the value."""
    built = _batch([Item(payload=b"value", key=b"k", key_mode="text", properties={"a": "b"})])
    assert built.metadata.num_messages_in_batch == 1
    entry = open_entry(1, 2, -1, built.metadata, built.payload)
    (message,) = messages(entry)
    assert message.value == b"value"
    assert message.key == b"k"
    assert message.properties == {"a": "b"}
    assert str(message.message_id) == "1:2:-1:0"


def test_batch_level_key_and_properties_do_not_leak_into_items() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b", properties={"x": "y"})])
    meta = built.metadata
    meta.partition_key = "batch-key"
    meta.properties.add(key="batch", value="prop")
    entry = open_entry(1, 2, -1, meta, built.payload)
    assert [(m.key, m.properties) for m in messages(entry)] == [(None, {}), (None, {"x": "y"})]
    assert [(r["key"], r["properties"]) for r in _arrow_rows(entry)] == [
        (None, []),
        (None, [("x", "y")]),
    ]


def test_sequence_ids_of_batch_items() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b", sequence_id=99), Item(payload=b"c")])
    entry = open_entry(1, 2, -1, built.metadata, built.payload)
    assert [m.sequence_id for m in messages(entry)] == [10, 99, 12]
    assert [r["sequenceId"] for r in _arrow_rows(entry)] == [10, 99, 12]


def test_uint64_sequence_id_reads_as_signed_like_arrow() -> None:
    single = build_entry([Item(payload=b"x")], _meta(), pb.NONE, batched=False)
    single.metadata.sequence_id = (1 << 64) - 1
    entry = open_entry(1, 2, -1, single.metadata, single.payload)
    assert messages(entry)[0].sequence_id == -1
    assert _arrow_rows(entry)[0]["sequenceId"] == -1


def test_broker_entry_metadata_per_item() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b"), Item(payload=b"c")])
    bem = pb.BrokerEntryMetadata(broker_timestamp=555, index=100)
    entry = open_entry(1, 2, -1, built.metadata, built.payload, broker_entry_metadata=bem)
    got = messages(entry)
    assert [m.broker_index for m in got] == [98, 99, 100]
    assert [m.broker_publish_time for m in got] == [555] * 3


# -- tombstones ---------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_tombstone_with_empty_payload_is_not_an_error(codec: int) -> None:
    """A non-batched null_value message may come with no payload bytes at all."""
    meta = _meta(null_value=True, partition_key="gone")
    if codec != pb.NONE:
        meta.compression = codec  # some producers name the codec but send nothing
    entry = open_entry(1, 2, -1, meta, b"")
    (message,) = messages(entry)
    assert message.value is None
    assert message.key == b"gone"
    (row,) = _arrow_rows(entry)
    assert row["value"] is None
    assert row["key"] == b"gone"


@pytest.mark.parametrize("codec", CODECS)
def test_tombstone_with_compressed_empty_payload(codec: int) -> None:
    meta = _meta(null_value=True)
    if codec != pb.NONE:
        meta.compression = codec
        meta.uncompressed_size = 0
    entry = open_entry(1, 2, -1, meta, compress(codec, b""))
    assert messages(entry)[0].value is None


def test_tombstones_inside_a_batch() -> None:
    built = _batch([Item(payload=b"a"), Item(null_value=True, key=b"k", key_mode="text")])
    entry = open_entry(1, 2, -1, built.metadata, built.payload)
    assert [m.value for m in messages(entry)] == [b"a", None]
    assert [r["value"] for r in _arrow_rows(entry)] == [b"a", None]


def test_empty_value_is_not_null() -> None:
    built = _batch([Item(payload=b"")])
    entry = open_entry(1, 2, -1, built.metadata, built.payload)
    assert messages(entry)[0].value == b""
    assert _arrow_rows(entry)[0]["value"] == b""


# -- keys ---------------------------------------------------------------------


def test_keys_text_binary_empty_and_null() -> None:
    built = _batch(
        [
            Item(payload=b"1", key="clé".encode(), key_mode="text"),
            Item(payload=b"2", key=b"\x00\xff\xfe", key_mode="b64"),
            Item(payload=b"3", key=b"", key_mode="text"),
            Item(payload=b"4", key_mode="null"),
            Item(payload=b"5"),
        ]
    )
    entry = open_entry(1, 2, -1, built.metadata, built.payload)
    want = ["clé".encode(), b"\x00\xff\xfe", b"", None, None]
    assert [m.key for m in messages(entry)] == want
    assert [r["key"] for r in _arrow_rows(entry)] == want
    assert [m.partition_key for m in messages(entry)] == ["clé", "AP/+", "", None, None]


def test_null_partition_key_wins_over_a_key() -> None:
    smm = pb.SingleMessageMetadata(partition_key="k", null_partition_key=True)
    meta = _meta(num_messages_in_batch=1)
    entry = open_entry(1, 2, -1, meta, encode_batch([(smm, b"v")]))
    assert messages(entry)[0].key is None
    assert _arrow_rows(entry)[0]["key"] is None


def test_bad_base64_key_names_the_message() -> None:
    smms = [
        pb.SingleMessageMetadata(partition_key="b2s=", partition_key_b64_encoded=True),
        pb.SingleMessageMetadata(partition_key="not base64!", partition_key_b64_encoded=True),
    ]
    meta = _meta(num_messages_in_batch=2)
    entry = open_entry(7, 8, 3, meta, encode_batch(zip(smms, [b"a", b"b"], strict=True)))
    assert messages(entry, [0])[0].key == b"ok"
    with pytest.raises(CorruptMessage, match="base64") as info:
        messages(entry)
    assert info.value.message_id == "7:8:3:1"
    assert "message 7:8:3:1" in str(info.value)
    with pytest.raises(CorruptMessage) as info:
        _arrow_rows(entry)
    assert info.value.message_id == "7:8:3:1"


def test_bad_base64_key_of_a_single_message() -> None:
    meta = _meta(partition_key="%%%", partition_key_b64_encoded=True)
    entry = open_entry(7, 8, -1, meta, b"v")
    with pytest.raises(CorruptMessage) as info:
        messages(entry)
    assert info.value.message_id == "7:8:-1:-1"


def test_decode_key() -> None:
    assert decode_key("abc", False) == b"abc"
    assert decode_key("AAE=", True) == b"\x00\x01"
    assert decode_key(b"\xff\xfe", False) == b"\xff\xfe"
    with pytest.raises(CorruptMessage):
        decode_key("AAE", True)  # missing padding
    with pytest.raises(CorruptMessage):
        decode_key("ü", True)
    with pytest.raises(CorruptMessage):
        decode_key(b"\xff", True)


def _smm_with_raw_key_and_property(key: bytes, prop_key: bytes, prop_value: bytes) -> bytes:
    """SingleMessageMetadata bytes whose string fields hold arbitrary bytes."""
    kv = (
        b"\x0a"
        + bytes([len(prop_key)])
        + prop_key
        + b"\x12"
        + bytes([len(prop_value)])
        + prop_value
    )
    return (
        b"\x0a"
        + bytes([len(kv)])
        + kv  # properties
        + b"\x12"
        + bytes([len(key)])
        + key  # partition_key
        + b"\x18\x01"  # payload_size = 1
    )


def test_string_fields_that_are_not_utf8() -> None:
    """protobuf hands such fields out as bytes: keys stay raw, text is replaced."""
    smm = _smm_with_raw_key_and_property(b"k\xff", b"p\xc3", b"v\xfe")
    meta = _meta(num_messages_in_batch=1)
    payload = struct.pack(">I", len(smm)) + smm + b"x"
    entry = open_entry(1, 2, -1, meta, payload)
    (message,) = messages(entry)
    assert message.key == b"k\xff"
    assert message.partition_key == "k\ufffd"
    assert message.properties == {"p\ufffd": "v\ufffd"}
    assert text(b"ok") == "ok"
    assert text("ok") == "ok"


def test_arrow_string_fields_that_are_not_utf8() -> None:
    smm = _smm_with_raw_key_and_property(b"k\xff", b"p\xc3", b"v\xfe")
    meta = _meta(num_messages_in_batch=1)
    entry = open_entry(1, 2, -1, meta, struct.pack(">I", len(smm)) + smm + b"x")
    (row,) = _arrow_rows(entry)
    assert row["key"] == b"k\xff"
    assert row["properties"] == [("p\ufffd", "v\ufffd")]


# -- errors of open_entry -----------------------------------------------------


def test_open_entry_errors_carry_the_entry_id() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b")])
    meta = built.metadata
    meta.num_messages_in_batch = 3  # a lie
    with pytest.raises(BatchDecodeError) as info:
        open_entry(11, 22, 4, meta, built.payload)
    assert info.value.message_id == "11:22:4:-1"
    assert "message 11:22:4:-1" in str(info.value)


@pytest.mark.parametrize("codec", [c for c in CODECS if c != pb.NONE])
def test_open_entry_decompression_errors_carry_the_entry_id(codec: int) -> None:
    meta = _meta(compression=codec, uncompressed_size=100)
    with pytest.raises((DecompressionError, UncompressedSizeMismatch)) as info:
        open_entry(11, 22, -1, meta, b"\xff" * 7)
    assert info.value.message_id == "11:22:-1:-1"


def test_uncompressed_size_above_the_limit() -> None:
    payload = compress(pb.ZSTD, b"a" * 1000)
    meta = _meta(compression=pb.ZSTD, uncompressed_size=1000)
    assert messages(open_entry(1, 2, -1, meta, payload, limit=1000))[0].value == b"a" * 1000
    with pytest.raises(UncompressedSizeMismatch) as info:
        open_entry(1, 2, -1, meta, payload, limit=999)
    assert info.value.message_id == "1:2:-1:-1"


@pytest.mark.parametrize(
    "kept", [[0, 0], [2, 1], [-1, 3], [1, -5]], ids=["repeat", "decreasing", "neg", "neg2"]
)
def test_compacted_batch_indexes_must_be_increasing_and_non_negative(kept: list[int]) -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b")], compacted_batch_indexes=kept)
    with pytest.raises(BatchDecodeError, match="compacted_batch_indexes") as info:
        open_entry(1, 2, -1, built.metadata, built.payload)
    assert info.value.message_id == "1:2:-1:-1"


@pytest.mark.parametrize("split", [True, False], ids=["split", "arrow"])
def test_a_compacted_batch_that_keeps_every_item_delivers_the_listed_ones(split: bool) -> None:
    """Pulsar 4.2's compactor keeps all of a batch's items in the payload, the dropped ones
    empty and flagged compacted_out, and lists the kept ones in compacted_batch_indexes;
    earlier compactors keep only the listed items (the next test)."""
    items = [Item(payload=b"", compacted_out=True) for _ in range(3)]
    items += [Item(payload=b"d", key=b"k1", key_mode="text"), Item(payload=b"e")]
    built = _batch(items, compacted_batch_indexes=[3, 4])
    assert built.metadata.num_messages_in_batch == 5
    entry = open_entry(17, 1, -1, built.metadata, built.payload, split=split)
    chosen = select(entry)  # what a reader delivers
    assert [(str(m.message_id), bytes(m.value)) for m in messages(entry, chosen)] == [
        ("17:1:-1:3", b"d"),
        ("17:1:-1:4", b"e"),
    ]
    rows = _arrow_rows(entry, chosen)
    assert [(r["messageId"], r["value"]) for r in rows] == [
        ("17:1:-1:3", b"d"),
        ("17:1:-1:4", b"e"),
    ]


def test_a_compacted_batch_that_keeps_only_the_listed_items() -> None:
    built = _batch([Item(payload=b"d"), Item(payload=b"e")], compacted_batch_indexes=[3, 4])
    built.metadata.num_messages_in_batch = 5
    entry = open_entry(17, 1, -1, built.metadata, built.payload)
    chosen = select(entry)
    assert [str(m.message_id) for m in messages(entry, chosen)] == ["17:1:-1:3", "17:1:-1:4"]
    assert [r["messageId"] for r in _arrow_rows(entry, chosen)] == ["17:1:-1:3", "17:1:-1:4"]


def test_batch_count_zero_or_negative() -> None:
    for count in (0, -1):
        meta = _meta(num_messages_in_batch=count)
        with pytest.raises(BatchDecodeError):
            open_entry(1, 2, -1, meta, b"")


# -- Arrow edge cases owned elsewhere -----------------------------------------


def test_arrow_sequence_id_wraps_like_messages() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b")])
    built.metadata.sequence_id = (1 << 64) - 1
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    assert [m.sequence_id for m in messages(entry)] == [-1, 0]
    assert [r["sequenceId"] for r in _arrow_rows(entry)] == [-1, 0]


def test_arrow_event_time_beyond_int64() -> None:
    built = _batch([Item(payload=b"a", event_time=1 << 63)])
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    assert messages(entry)[0].event_time == 1 << 63
    with contextlib.suppress(CorruptMessage):  # rejecting it as corrupt is fine too
        _arrow_rows(entry)


def test_arrow_corrupt_key_fails_the_batch_naming_the_message_and_resets() -> None:
    # The builder decodes item metadata in bulk at build(): a base64 key that
    # does not decode fails the whole batch, naming the message, and leaves
    # the builder empty and usable.
    good = _batch([Item(payload=b"a")])
    bad_smms = [
        pb.SingleMessageMetadata(),
        pb.SingleMessageMetadata(partition_key="%%", partition_key_b64_encoded=True),
    ]
    builder = ArrowBatchBuilder(TOPIC)
    builder.add(open_entry(1, 1, -1, good.metadata, good.payload))
    bad = open_entry(
        1,
        2,
        -1,
        _meta(num_messages_in_batch=2),
        encode_batch(zip(bad_smms, [b"a", b"b"], strict=True)),
    )
    builder.add(bad)
    with pytest.raises(CorruptMessage) as info:
        builder.build()
    assert info.value.message_id == "1:2:-1:1"
    assert builder.rows == 0
    builder.add(open_entry(1, 3, -1, good.metadata, good.payload))
    assert builder.build().column("messageId").to_pylist() == ["1:3:-1:0"]


def test_arrow_event_time_overflowing_microseconds_is_not_silently_wrong() -> None:
    built = _batch([Item(payload=b"a", event_time=10**16)])
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    builder = ArrowBatchBuilder(TOPIC)
    builder.add(entry)
    try:
        batch = builder.build()
    except CorruptMessage:
        return  # rejecting it is fine
    micros = batch.column("eventTime").cast(pa.int64()).to_pylist()[0]
    assert micros is None or micros == 10**19
