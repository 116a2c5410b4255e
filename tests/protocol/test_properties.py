"""Hypothesis properties of the protocol layer: what is encoded comes back.

* frames -> FrameDecoder (bytes fed in arbitrary pieces) -> open_entry ->
  messages() / ArrowBatchBuilder give exactly the items that were encoded;
* select() agrees with a small reference model of the reader's filters;
* ChunkAssembler puts split payloads back together and follows its rules for
  duplicates, restarts, gaps and eviction.
"""

from __future__ import annotations

import base64
import itertools
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import (
    CODECS,
    U64,
    Built,
    Item,
    ack_set_from_acked,
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
    ChunkAssembler,
    ChunkError,
    MessageId,
    compress,
    encode_batch,
    encode_payload_command,
    is_batch,
    is_chunk,
    messages,
    open_entry,
    pb,
    select,
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
            case.ledger, case.entry, case.partition, frame.metadata, frame.payload,
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
                if bem and bem.HasField("index") else None
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
    positions = data.draw(
        st.lists(st.sampled_from(range(entry.count)), unique=True).map(sorted)
    )
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


# ---------------------------------------------------------------------------
# select(): the reader's filters against a reference model
# ---------------------------------------------------------------------------


def _reference_select(
    built: Built,
    ledger: int,
    entry: int,
    *,
    marker: bool,
    ack_set: list[int],
    start: MessageId | None,
    inclusive: bool,
) -> list[int]:
    """What a reader delivers, written out plainly (protocol.md §2.4)."""
    if marker:
        return []
    # The ack set as one big bit string: word k holds bits 64k .. 64k+63.
    acks = 0
    for k, word in enumerate(ack_set):
        acks |= (word % (1 << 64)) << (64 * k)
    out = []
    for pos, (item, index) in enumerate(zip(built.items, built.batch_indexes, strict=True)):
        if start is not None:
            here, bound = (ledger, entry), (start.ledger, start.entry)
            if here < bound:
                continue
            if here == bound:
                whole_entry = not built.batched or start.batch_index == -1
                if whole_entry and not inclusive:
                    continue
                if not whole_entry:
                    if inclusive and index < start.batch_index:
                        continue
                    if not inclusive and index <= start.batch_index:
                        continue
        if built.batched:
            if item.compacted_out:
                continue
            if ack_set and not (acks >> index) & 1:
                continue
        out.append(pos)
    return out


@st.composite
def start_ids(draw: st.DrawFn, ledger: int, entry: int, count: int) -> MessageId | None:
    """A start id placed before, at or after the entry (ledger and entry)."""
    if draw(st.integers(0, 5)) == 0:
        return None
    where = draw(
        st.sampled_from(["same", "same", "same", "entry-", "entry+", "ledger-", "ledger+"])
    )
    s_ledger, s_entry = ledger, entry
    if where == "entry-":
        s_entry = entry - draw(st.integers(1, 3))
    elif where == "entry+":
        s_entry = entry + draw(st.integers(1, 3))
    elif where == "ledger-":
        s_ledger, s_entry = ledger - 1, draw(st.integers(-1, 50))
    elif where == "ledger+":
        s_ledger, s_entry = ledger + 1, draw(st.integers(-1, 50))
    return MessageId(s_ledger, s_entry, draw(st.integers(-1, 3)), draw(st.integers(-1, count + 1)))


@settings(PROPS, max_examples=300)
@given(built=built_entries(compacted=True, max_items=10), data=st.data())
def test_select_matches_reference_model(built, data) -> None:
    ledger, entry_id = data.draw(st.integers(0, 100)), data.draw(st.integers(0, 100))
    meta = built.metadata
    marker = data.draw(st.integers(0, 9)) == 0
    if marker:
        meta.marker_type = data.draw(st.integers(0, 20))
    ack_set = data.draw(st.one_of(ack_sets, st.builds(
        lambda acked: ack_set_from_acked(max(built.batch_indexes) + 1, acked),
        st.sets(st.integers(0, max([*built.batch_indexes, 0]))),
    )))
    start = data.draw(start_ids(ledger, entry_id, max(built.batch_indexes) + 1))
    inclusive = data.draw(st.booleans())

    entry = open_entry(ledger, entry_id, 2, meta, built.payload)
    got = select(entry, ack_set=ack_set, start=start, start_inclusive=inclusive)
    want = _reference_select(
        built, ledger, entry_id, marker=marker, ack_set=ack_set, start=start, inclusive=inclusive
    )
    assert got == want
    skipped = entry.count - len(got)
    assert skipped == len(built.items) - len(want)
    assert [m.message_id.batch_index for m in messages(entry, got)] == [
        built.batch_indexes[p] for p in want
    ]


def _plain_batch(count: int, compacted_out: set[int] = frozenset()) -> Built:  # type: ignore[assignment]
    its = [Item(payload=bytes([i % 256]), compacted_out=i in compacted_out) for i in range(count)]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=0, publish_time=1)
    return build_entry(its, meta, pb.NONE)


@PROPS
@given(
    count=st.integers(1, 140),
    data=st.data(),
)
def test_ack_set_bits_select_unacked_items(count, data) -> None:
    """Bit i clear = acked = skipped, over several 64-bit words, negative ones included."""
    acked = data.draw(st.sets(st.integers(0, count - 1)))
    words = ack_set_from_acked(count, acked)
    if count > 63 and 63 not in acked:
        assert words[0] < 0  # bit 63 set: the int64 word is negative
    built = _plain_batch(count)
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    got = select(entry, ack_set=words)
    assert got == [i for i in range(count) if i not in acked]
    assert select(entry, ack_set=[]) == list(range(count))
    assert select(entry) == list(range(count))


@PROPS
@given(count=st.integers(1, 20), data=st.data())
def test_compacted_batch_indexes_map_positions_to_batch_indexes(count, data) -> None:
    kept = sorted(data.draw(st.sets(st.integers(0, 2 * count), min_size=count, max_size=count)))
    its = [Item(payload=b"v%d" % i) for i in range(count)]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=100, publish_time=1)
    built = build_entry(its, meta, data.draw(codecs), compacted_batch_indexes=kept)
    entry = open_entry(5, 6, -1, built.metadata, built.payload)
    assert list(entry.batch_indexes) == kept
    got = messages(entry)
    assert [m.message_id.batch_index for m in got] == kept
    assert [m.value for m in got] == [b"v%d" % i for i in range(count)]
    assert [m.sequence_id for m in got] == [100 + k for k in kept]
    # The ack set and the start id speak real batch indexes.
    acked = data.draw(st.sets(st.sampled_from(kept)))
    words = ack_set_from_acked(max(kept) + 1, acked)
    assert select(entry, ack_set=words) == [p for p, k in enumerate(kept) if k not in acked]
    pivot = data.draw(st.integers(-1, 2 * count + 1))
    start = MessageId(5, 6, -1, pivot)
    if pivot == -1:
        assert select(entry, start=start) == list(range(count))
        assert select(entry, start=start, start_inclusive=False) == []
    else:
        assert select(entry, start=start) == [p for p, k in enumerate(kept) if k >= pivot]
        assert select(entry, start=start, start_inclusive=False) == [
            p for p, k in enumerate(kept) if k > pivot
        ]


@PROPS
@given(built=built_entries(), marker_type=st.integers(0, 1 << 20), ack_set=ack_sets)
def test_markers_are_skipped_whole(built, marker_type, ack_set) -> None:
    built.metadata.marker_type = marker_type
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    assert entry.is_marker
    assert select(entry, ack_set=ack_set) == []
    assert select(entry, start=MessageId(0, 0)) == []


# ---------------------------------------------------------------------------
# Chunked messages
# ---------------------------------------------------------------------------


def _chunks(
    payload: bytes, codec: int, cuts: list[int], *, uuid: str = "prod-7", seq: int = 7
) -> tuple[list[pb.MessageMetadata], list[bytes], bytes]:
    """Metadata and payload of each chunk of ``payload`` compressed then cut."""
    whole = compress(codec, payload)
    bounds = [0, *sorted(min(c, len(whole)) for c in cuts), len(whole)]
    parts = [whole[a:b] for a, b in itertools.pairwise(bounds)]
    metas = []
    for i in range(len(parts)):
        meta = pb.MessageMetadata(
            producer_name="prod", sequence_id=seq, publish_time=1000, uuid=uuid,
            chunk_id=i, num_chunks_from_msg=len(parts), total_chunk_msg_size=len(whole),
        )
        if codec != pb.NONE:
            meta.compression = codec
            meta.uncompressed_size = len(payload)
        metas.append(meta)
    return metas, parts, whole


chunk_payloads = st.binary(min_size=0, max_size=600) | st.binary(max_size=20).map(lambda b: b * 40)
chunk_cuts = st.lists(st.integers(0, 1000), min_size=1, max_size=7)


def _open(whole, ledger: int = 1, partition: int = -1):
    entry = open_entry(ledger, whole.last[1], partition, whole.metadata, whole.payload)
    (message,) = messages(entry)
    return message


@PROPS
@given(payload=chunk_payloads, codec=codecs, cuts=chunk_cuts)
def test_chunks_reassemble_exactly(payload, codec, cuts) -> None:
    metas, parts, whole = _chunks(payload, codec, cuts)
    assembler = ChunkAssembler()
    results = []
    for i, (meta, part) in enumerate(zip(metas, parts, strict=True)):
        assert is_chunk(meta)
        results.append(assembler.add(1, 10 + i, meta, part))
    assert results[:-1] == [None] * (len(parts) - 1)
    done = results[-1]
    assert done is not None
    assert done.payload == whole
    assert done.first == (1, 10)
    assert done.last == (1, 10 + len(parts) - 1)
    assert done.metadata.chunk_id == 0
    assert _open(done).value == payload
    assert assembler.pending == 0
    assert assembler.dropped == 0


@PROPS
@given(payload=chunk_payloads, codec=codecs, cuts=chunk_cuts, data=st.data())
def test_duplicate_chunks_are_dropped_and_counted(payload, codec, cuts, data) -> None:
    metas, parts, whole = _chunks(payload, codec, cuts)
    n = len(parts)
    # After chunk i (not the last), re-deliver some chunks 1..i (chunk 0 would restart).
    order: list[int] = []
    duplicates = 0
    for i in range(n):
        order.append(i)
        if 0 < i < n - 1:
            again = data.draw(st.lists(st.integers(1, i), max_size=2))
            order += again
            duplicates += len(again)
    assembler = ChunkAssembler()
    results = [assembler.add(1, k, metas[k], parts[k]) for k in order]
    assert next(r for r in results if r is not None).payload == whole
    assert results[-1] is not None
    assert assembler.dropped == duplicates
    # Chunks of a finished message have no context any more: dropped too.
    tail = data.draw(st.integers(1, n - 1))
    assert assembler.add(1, 99, metas[tail], parts[tail]) is None
    assert assembler.dropped == duplicates + 1
    assert assembler.pending == 0


@PROPS
@given(payload=chunk_payloads, codec=codecs, cuts=chunk_cuts, data=st.data())
def test_chunk_zero_again_restarts(payload, codec, cuts, data) -> None:
    metas, parts, whole = _chunks(payload, codec, cuts)
    n = len(parts)
    first_run = data.draw(st.integers(1, n - 1))  # chunks 0 .. first_run-1, then a restart
    assembler = ChunkAssembler()
    for k in range(first_run):
        assert assembler.add(1, k, metas[k], parts[k]) is None
    results = [assembler.add(2, k, metas[k], parts[k]) for k in range(n)]
    assert results[-1] is not None
    assert results[-1].payload == whole
    assert results[-1].first == (2, 0)
    assert assembler.dropped == 0
    assert assembler.pending == 0


@PROPS
@given(payload=st.binary(min_size=3, max_size=300), codec=codecs,
       cuts=st.lists(st.integers(0, 1000), min_size=2, max_size=6), data=st.data())
def test_chunk_gap_raises(payload, codec, cuts, data) -> None:
    metas, parts, _ = _chunks(payload, codec, cuts)
    n = len(parts)
    missing = data.draw(st.integers(1, n - 2))
    assembler = ChunkAssembler()
    for k in range(missing):
        assembler.add(4, k, metas[k], parts[k])
    with pytest.raises(ChunkError, match="missing") as info:
        assembler.add(4, missing + 1, metas[missing + 1], parts[missing + 1], partition=2)
    assert info.value.message_id == f"4:{missing + 1}:2:-1"
    assert assembler.pending == 0  # the broken message is dropped
    # ... and what follows of it has no context any more.
    if missing + 2 < n:
        assert assembler.add(4, 50, metas[missing + 2], parts[missing + 2]) is None
        assert assembler.dropped == 1


@PROPS
@given(payload=chunk_payloads, codec=codecs, cuts=chunk_cuts, data=st.data())
def test_chunk_without_context_is_dropped(payload, codec, cuts, data) -> None:
    metas, parts, _ = _chunks(payload, codec, cuts)
    start = data.draw(st.integers(1, len(parts) - 1))  # a read that began mid-message
    assembler = ChunkAssembler()
    for k in range(start, len(parts)):
        assert assembler.add(1, k, metas[k], parts[k]) is None
    assert assembler.dropped == len(parts) - start
    assert assembler.pending == 0


@PROPS
@given(payload=st.binary(max_size=300), codec=codecs, cuts=chunk_cuts,
       delta=st.integers(-50, 50).filter(bool), data=st.data())
def test_chunk_total_size_mismatch_raises(payload, codec, cuts, delta, data) -> None:
    metas, parts, whole = _chunks(payload, codec, cuts)
    assume(len(whole) + delta >= 0)
    for meta in metas:
        meta.total_chunk_msg_size = len(whole) + delta
    assembler = ChunkAssembler()
    with pytest.raises(ChunkError):
        for k in range(len(parts)):
            assert assembler.add(1, k, metas[k], parts[k]) is None
    assert assembler.pending == 0


@PROPS
@given(payload=st.binary(max_size=100), cuts=chunk_cuts, data=st.data())
def test_chunks_disagreeing_with_the_first_raise(payload, cuts, data) -> None:
    metas, parts, _ = _chunks(payload, pb.NONE, cuts)
    n = len(parts)
    k = data.draw(st.integers(1, n - 1))
    if data.draw(st.booleans()):
        metas[k].num_chunks_from_msg = data.draw(st.integers(k + 1, n + 5).filter(lambda c: c != n))
    else:
        metas[k].total_chunk_msg_size += data.draw(st.integers(1, 10))
    assembler = ChunkAssembler()
    for j in range(k):
        assembler.add(1, j, metas[j], parts[j])
    with pytest.raises(ChunkError):
        assembler.add(1, k, metas[k], parts[k])
    assert assembler.pending == 0


@PROPS
@given(max_pending=st.integers(1, 5), extra=st.integers(0, 5), data=st.data())
def test_max_pending_evicts_oldest(max_pending, extra, data) -> None:
    total = max_pending + extra
    messages_ = [_chunks(b"payload-%d" % m, pb.NONE, [3], uuid=f"u{m}") for m in range(total)]
    assembler = ChunkAssembler(max_pending=max_pending)
    for m, (metas, parts, _) in enumerate(messages_):
        assert assembler.add(1, m, metas[0], parts[0]) is None
    assert assembler.pending == max_pending
    assert assembler.evicted == [f"u{m}" for m in range(extra)]
    # Evicted messages lost their context; kept ones complete.
    for m, (metas, parts, _) in enumerate(messages_):
        done = assembler.add(1, 100 + m, metas[1], parts[1])
        if m < extra:
            assert done is None
        else:
            assert done is not None
            assert done.payload == b"payload-%d" % m
    assert assembler.dropped == extra
    assert assembler.pending == 0


@PROPS
@given(its=st.lists(st.builds(Item, payload=st.binary(max_size=20)), min_size=1, max_size=5),
       codec=st.sampled_from(CODECS))
def test_encode_batch_sets_payload_sizes(its, codec) -> None:
    smms = [item.smm() for item in its]
    raw = encode_batch(zip(smms, [i.payload for i in its], strict=True))
    assert [s.payload_size for s in smms] == [len(i.payload) for i in its]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1,
                              num_messages_in_batch=len(its))
    if codec != pb.NONE:
        meta.compression = codec
        meta.uncompressed_size = len(raw)
    entry = open_entry(1, 1, -1, meta, compress(codec, raw))
    assert [m.value for m in messages(entry)] == [i.payload for i in its]


@PROPS
@given(key=st.binary(max_size=40))
def test_binary_keys_survive_base64(key) -> None:
    item = Item(payload=b"v", key=key, key_mode="b64")
    built = build_entry([item], pb.MessageMetadata(producer_name="p", sequence_id=1,
                                                    publish_time=1), pb.NONE)
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
        cmd.SerializeToString(), meta.SerializeToString(), b"xyz",
        broker_entry_metadata=bem.SerializeToString(),
    ) == encode_payload_command(cmd, meta, b"xyz", broker_entry_metadata=bem)
