"""Example tests of chunked-message reassembly (protocol.md §2.5)."""

from __future__ import annotations

import pytest

from pulsar_spark.protocol import (
    ChunkAssembler,
    ChunkError,
    compress,
    is_chunk,
    messages,
    open_entry,
    pb,
)


def _chunk_meta(chunk_id: int, count: int, total: int, uuid: str = "prod-1", **kw: object):
    return pb.MessageMetadata(
        producer_name="prod",
        sequence_id=1,
        publish_time=1000,
        uuid=uuid,
        chunk_id=chunk_id,
        num_chunks_from_msg=count,
        total_chunk_msg_size=total,
        **kw,
    )


def test_is_chunk() -> None:
    assert is_chunk(_chunk_meta(0, 2, 10))
    assert not is_chunk(_chunk_meta(0, 1, 10))  # one chunk: a plain message
    batch = _chunk_meta(0, 2, 10, num_messages_in_batch=1)
    assert not is_chunk(batch)  # chunks are never batched
    assert not is_chunk(pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1))


def test_three_chunks_of_a_compressed_message() -> None:
    payload = b"The quick brown fox " * 50
    whole = compress(pb.ZLIB, payload)
    parts = [whole[:10], whole[10:25], whole[25:]]
    assembler = ChunkAssembler()
    metas = [
        _chunk_meta(i, 3, len(whole), compression=pb.ZLIB, uncompressed_size=len(payload))
        for i in range(3)
    ]
    assert assembler.add(5, 1, metas[0], parts[0]) is None
    assert assembler.pending == 1
    assert assembler.add(5, 2, metas[1], memoryview(parts[1])) is None
    done = assembler.add(5, 3, metas[2], parts[2])
    assert done is not None
    assert (done.first, done.last) == ((5, 1), (5, 3))
    assert done.payload == whole
    entry = open_entry(5, 3, -1, done.metadata, done.payload)
    (message,) = messages(entry)
    assert message.value == payload
    assert str(message.message_id) == "5:3:-1:-1"


def test_duplicate_chunk_is_dropped() -> None:
    assembler = ChunkAssembler()
    assembler.add(1, 1, _chunk_meta(0, 3, 3), b"a")
    assembler.add(1, 2, _chunk_meta(1, 3, 3), b"b")
    assert assembler.add(1, 2, _chunk_meta(1, 3, 3), b"b") is None
    assert assembler.dropped == 1
    done = assembler.add(1, 3, _chunk_meta(2, 3, 3), b"c")
    assert done is not None
    assert done.payload == b"abc"


def test_chunk_zero_again_starts_over() -> None:
    assembler = ChunkAssembler()
    assembler.add(1, 1, _chunk_meta(0, 2, 2), b"x")
    assembler.add(1, 5, _chunk_meta(0, 2, 2), b"a")
    done = assembler.add(1, 6, _chunk_meta(1, 2, 2), b"b")
    assert done is not None
    assert done.payload == b"ab"
    assert done.first == (1, 5)
    assert assembler.dropped == 0


def test_gap_raises_and_forgets_the_message() -> None:
    assembler = ChunkAssembler()
    assembler.add(1, 1, _chunk_meta(0, 4, 4), b"a")
    with pytest.raises(ChunkError, match="missing") as info:
        assembler.add(1, 3, _chunk_meta(2, 4, 4), b"c", partition=7)
    assert info.value.message_id == "1:3:7:-1"
    assert "message 1:3:7:-1" in str(info.value)
    assert assembler.pending == 0


def test_chunk_without_start_is_dropped() -> None:
    assembler = ChunkAssembler()
    assert assembler.add(1, 2, _chunk_meta(1, 2, 2), b"b") is None
    assert assembler.dropped == 1
    assert assembler.pending == 0


@pytest.mark.parametrize(
    ("total", "match"), [(5, "add up to 2 bytes, not 5"), (1, "more than its declared 1")]
)
def test_total_size_mismatch_raises(total: int, match: str) -> None:
    assembler = ChunkAssembler()
    with pytest.raises(ChunkError, match=match):
        assembler.add(1, 1, _chunk_meta(0, 2, total), b"a")
        assembler.add(1, 2, _chunk_meta(1, 2, total), b"b")
    assert assembler.pending == 0


def test_later_chunk_disagreeing_with_the_first_raises() -> None:
    assembler = ChunkAssembler()
    assembler.add(1, 1, _chunk_meta(0, 3, 3), b"a")
    with pytest.raises(ChunkError, match="first chunk declared 3 chunks"):
        assembler.add(1, 2, _chunk_meta(1, 2, 2), b"b")
    assert assembler.pending == 0


@pytest.mark.parametrize(
    "meta",
    [
        _chunk_meta(2, 2, 10),  # chunk id beyond the count
        _chunk_meta(-1, 2, 10),
        pb.MessageMetadata(
            producer_name="p",
            sequence_id=1,
            publish_time=1,
            chunk_id=0,
            num_chunks_from_msg=2,
            total_chunk_msg_size=2,
        ),  # no uuid
    ],
    ids=["id-too-big", "id-negative", "no-uuid"],
)
def test_inconsistent_chunk_metadata(meta: pb.MessageMetadata) -> None:
    with pytest.raises(ChunkError, match="inconsistent"):
        ChunkAssembler().add(1, 1, meta, b"ab")


def test_declared_size_above_the_limit() -> None:
    assembler = ChunkAssembler(max_message_size=100)
    with pytest.raises(ChunkError, match="above the limit"):
        assembler.add(1, 1, _chunk_meta(0, 2, 101), b"a")
    with pytest.raises(ChunkError):
        assembler.add(1, 1, _chunk_meta(0, 2, -1), b"a")
    assert assembler.pending == 0


def test_max_pending_evicts_the_oldest() -> None:
    assembler = ChunkAssembler(max_pending=2)
    for name in ("a", "b", "c"):
        assembler.add(1, 1, _chunk_meta(0, 2, 2, uuid=name), b"x")
    assert assembler.evicted == ["a"]
    assert assembler.pending == 2
    assert assembler.add(1, 2, _chunk_meta(1, 2, 2, uuid="a"), b"y") is None
    assert assembler.dropped == 1
    done = assembler.add(1, 3, _chunk_meta(1, 2, 2, uuid="b"), b"y")
    assert done is not None
    assert done.payload == b"xy"


def test_restart_refreshes_eviction_order() -> None:
    assembler = ChunkAssembler(max_pending=2)
    assembler.add(1, 1, _chunk_meta(0, 2, 2, uuid="a"), b"x")
    assembler.add(1, 2, _chunk_meta(0, 2, 2, uuid="b"), b"x")
    assembler.add(1, 3, _chunk_meta(0, 2, 2, uuid="a"), b"x")  # "a" starts over: newest
    assembler.add(1, 4, _chunk_meta(0, 2, 2, uuid="c"), b"x")
    assert assembler.evicted == ["b"]
