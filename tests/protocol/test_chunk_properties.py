"""Hypothesis properties of ChunkAssembler: reassembly, duplicates, restarts, gaps, eviction."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import (
    codecs,
)

from pulsar_spark.protocol import (
    ChunkAssembler,
    ChunkError,
    compress,
    is_chunk,
    messages,
    open_entry,
    pb,
)

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
            producer_name="prod",
            sequence_id=seq,
            publish_time=1000,
            uuid=uuid,
            chunk_id=i,
            num_chunks_from_msg=len(parts),
            total_chunk_msg_size=len(whole),
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
@given(
    payload=st.binary(min_size=3, max_size=300),
    codec=codecs,
    cuts=st.lists(st.integers(0, 1000), min_size=2, max_size=6),
    data=st.data(),
)
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
@given(
    payload=st.binary(max_size=300),
    codec=codecs,
    cuts=chunk_cuts,
    delta=st.integers(-50, 50).filter(bool),
    data=st.data(),
)
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
