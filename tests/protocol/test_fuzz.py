"""Fuzz properties: whatever bytes arrive, decoding ends in a result or a ProtocolError.

Every input goes through the whole receive pipeline (:func:`run_pipeline`):
a :class:`FrameDecoder` with a small frame limit, fed in random pieces and
closed; for each payload frame the :class:`ChunkAssembler` (chunks),
:func:`open_entry` with the same limit, :func:`select`, :func:`messages` and
:class:`ArrowBatchBuilder`; beside it, the reader's own path (``open_entry(split=False)``,
items located by the builder), which must end the same way: the same batch, or
a ProtocolError where the first path's build raised one. The invariant: only
:class:`~pulsar_spark.protocol.errors.ProtocolError` may come out, never any
other exception; no input hangs; and (sampled with tracemalloc) no input
makes the decoder allocate much beyond the frame limit.

Inputs, with their share of the examples (at least 20,000 in all):

a. valid frames mutated: bit flips, byte replacements, insertions,
   deletions, copies; on the raw frame, or on one part (command, metadata,
   payload, uncompressed batch) re-framed with a correct CRC so that decoding
   gets past the checksum;
b. valid streams truncated anywhere;
c. garbage: random bytes, random bytes in a well-sized frame, random protobuf
   fields as command or metadata;
d. valid frames whose sizes lie: uncompressed_size, num_messages_in_batch,
   compacted_batch_indexes, chunk sizes and counts, and every size field of
   the framing and of the batch layout;
e. valid prefixes followed by garbage.

The inputs are built in ``fuzz_seeds.py`` (a, b) and ``fuzz_garbage.py``
(c, d, e). Seeds are frames from the strategies (MESSAGE and SEND, batched or not, every
codec, with and without broker entry metadata and checksum), chunk sequences,
simple commands, and the real frames of the golden captures.
"""

from __future__ import annotations

import os
import random
import time
import tracemalloc

import pytest
from fuzz_garbage import bomb_stream, garbage_stream, lying_stream, prefix_garbage_stream
from fuzz_seeds import (
    LIMIT,
    drawn_streams,
    drawn_with_cuts,
    mutate,
    mutated_part_stream,
    mutated_raw_stream,
    truncated_stream,
    valid_stream,
    with_cuts,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    CODECS,
    Item,
    build_entry,
    message_command,
    pieces,
    raw_payload_frame,
)

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import (
    ChunkAssembler,
    Frame,
    FrameDecoder,
    MessageId,
    ProtocolError,
    compress,
    is_chunk,
    messages,
    open_entry,
    pb,
    select,
)
from pulsar_spark.protocol.ids.message_id import to_signed64

pytestmark = pytest.mark.fuzz

#: Longest any single input may take to decode (generous: CI machines are slow).
MAX_SECONDS = 10.0
TOPIC = "persistent://public/default/fuzz-partition-1"


def _fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, round(examples * _SCALE)),
        deadline=None,
        database=None,
        derandomize=False,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
        ],
    )


# Example counts per input kind; their sum is what CI runs (>= 20,000).
# PULSAR_SPARK_FUZZ_SCALE multiplies them for longer local runs.
_SCALE = float(os.environ.get("PULSAR_SPARK_FUZZ_SCALE", "1"))
EXAMPLES = {
    "mutated_raw": 3500,
    "mutated_parts": 3500,
    "truncated": 3000,
    "garbage": 3500,
    "lying_sizes": 4000,
    "prefix_garbage": 2500,
}
assert sum(EXAMPLES.values()) >= 20_000


# ---------------------------------------------------------------------------
# The pipeline under test
# ---------------------------------------------------------------------------


class _Sink:
    """Receive-side state across the frames of one input."""

    def __init__(self) -> None:
        self.assembler = ChunkAssembler(max_pending=4, max_message_size=4 * LIMIT)
        self.builder = ArrowBatchBuilder(TOPIC, partition=1)
        # The same entries, opened without splitting: the builder locates items.
        self.lazy = ArrowBatchBuilder(TOPIC, partition=1)
        self.rows = 0
        self.built = 0

    def frame(self, frame: Frame) -> None:
        if frame.metadata is None or frame.payload is None:
            return
        ack_set: list[int] = []
        if frame.command.type == pb.BaseCommand.MESSAGE:
            msg = frame.command.message
            ledger = to_signed64(msg.message_id.ledgerId)
            entry_id = to_signed64(msg.message_id.entryId)
            partition = msg.message_id.partition
            ack_set = list(msg.ack_set)
        else:
            ledger = entry_id = partition = -1
        try:
            metadata, payload = frame.metadata, frame.payload
            if is_chunk(metadata):
                whole = self.assembler.add(ledger, entry_id, metadata, payload, partition=partition)
                if whole is None:
                    return
                metadata, payload = whole.metadata, whole.payload
            entry = open_entry(
                ledger,
                entry_id,
                partition,
                metadata,
                payload,
                broker_entry_metadata=frame.broker_entry_metadata,
                limit=LIMIT,
            )
            chosen = select(entry, ack_set=ack_set)
            select(entry, start=MessageId(ledger, entry_id, partition, 1), start_inclusive=False)
            assert len(messages(entry, chosen)) == len(chosen)
            messages(entry)
        except ProtocolError:
            return
        # What opened split opens unsplit (only the item count is checked).
        lazy = open_entry(
            ledger,
            entry_id,
            partition,
            metadata,
            payload,
            broker_entry_metadata=frame.broker_entry_metadata,
            limit=LIMIT,
            split=False,
        )
        self.lazy.add(lazy, select(lazy, ack_set=ack_set))
        self.builder.add(entry, chosen)
        self.rows += len(chosen)
        if self.builder.rows > 64:
            self.build()

    def build(self) -> None:
        """Build a batch; corrupt item metadata may fail it, as our error only."""
        rows = self.builder.rows
        try:
            batch = self.builder.build()
        except ProtocolError as exc:
            assert exc.message_id is not None
            with pytest.raises(ProtocolError) as lazy_error:
                self.lazy.build()
            assert lazy_error.value.message_id is not None
        else:
            assert batch.num_rows == rows
            self.built += rows
            assert self.lazy.build().equals(batch)
        assert self.builder.rows == 0
        assert self.lazy.rows == 0


def run_pipeline(data: bytes, cuts: list[int]) -> None:
    """Decode ``data`` (fed in pieces) the way a reader does, to the Arrow batch.

    Only ProtocolError may escape, and only from the framing layer, which is
    sticky: after it the stream is over.
    """
    started = time.monotonic()
    sink = _Sink()
    decoder = FrameDecoder(max_frame_size=LIMIT)
    try:
        for piece in pieces(data, cuts):
            decoder.feed(piece)
            for frame in decoder:
                assert frame.size <= LIMIT
                sink.frame(frame)
        decoder.close()
    except ProtocolError as exc:
        # The error is sticky: every later call raises it again.
        with pytest.raises(ProtocolError):
            decoder.feed(b"\x00")
        assert exc.offset is not None
    sink.build()
    assert sink.built <= sink.rows
    elapsed = time.monotonic() - started
    assert elapsed < MAX_SECONDS, f"decoding {len(data)} bytes took {elapsed:.1f} s"


def check(data: bytes, cuts: list[int]) -> None:
    """The invariant: run_pipeline ends normally or with a ProtocolError, inside."""
    run_pipeline(data, cuts)


# ---------------------------------------------------------------------------
# The fuzz tests
# ---------------------------------------------------------------------------

Case = tuple[bytes, list[int]]


def _keep(rnd: random.Random, data: bytes) -> bytes:
    return data


@_fuzz_settings(EXAMPLES["mutated_raw"])
@given(
    case=st.one_of(
        with_cuts(mutated_raw_stream),
        with_cuts(mutated_raw_stream),
        with_cuts(mutated_raw_stream),
        drawn_with_cuts(drawn_streams, mutate),
    )
)
def test_fuzz_mutated_frames(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["mutated_parts"])
@given(case=with_cuts(mutated_part_stream))
def test_fuzz_mutated_frame_parts(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["truncated"])
@given(
    case=st.one_of(
        with_cuts(truncated_stream),
        with_cuts(truncated_stream),
        with_cuts(truncated_stream),
        drawn_with_cuts(drawn_streams, lambda rnd, data: data[: rnd.randrange(len(data) + 1)]),
    )
)
def test_fuzz_truncated_frames(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["garbage"])
@given(
    case=st.one_of(
        with_cuts(garbage_stream),
        with_cuts(garbage_stream),
        drawn_with_cuts(st.binary(max_size=600), _keep),
    )
)
def test_fuzz_garbage(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["lying_sizes"])
@given(case=with_cuts(lying_stream))
def test_fuzz_lying_sizes(case: Case) -> None:
    check(*case)


@_fuzz_settings(EXAMPLES["prefix_garbage"])
@given(case=with_cuts(prefix_garbage_stream))
def test_fuzz_valid_prefix_then_garbage(case: Case) -> None:
    check(*case)


# ---------------------------------------------------------------------------
# Memory: sampled with tracemalloc
# ---------------------------------------------------------------------------


def _memory_bound(size: int) -> int:
    """Peak traced allocation allowed while decoding one input of ``size`` bytes.

    A few frame limits (a payload inflated up to the limit, a retry of the
    codec, the joined Arrow values), plus what the input itself costs to hold
    (the decoder buffers it, frames copy it, chunks keep it), plus room for
    the Python and protobuf objects of a small input.
    """
    return 3 * LIMIT + 4 * size + 128 * 1024


_warmed_up = False


def _warm_up() -> None:
    """Decode a few inputs untraced: first calls allocate caches and lazy imports."""
    global _warmed_up
    if not _warmed_up:
        for seed in range(40):
            rnd = random.Random(seed)
            for build in (valid_stream, lying_stream, garbage_stream):
                run_pipeline(build(rnd), [])
        _warmed_up = True


def _traced_peak(data: bytes, cuts: list[int]) -> int:
    _warm_up()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base, _ = tracemalloc.get_traced_memory()
        run_pipeline(data, cuts)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


@_fuzz_settings(300)
@given(
    case=st.one_of(
        with_cuts(lying_stream),
        with_cuts(bomb_stream),
        with_cuts(mutated_part_stream),
        with_cuts(mutated_raw_stream),
        with_cuts(garbage_stream),
    )
)
def test_fuzz_memory_stays_near_the_frame_limit(case: Case) -> None:
    data, cuts = case
    used = _traced_peak(data, cuts)
    assert used <= _memory_bound(len(data)), (
        f"decoding {len(data)} bytes allocated {used} bytes at peak "
        f"(bound {_memory_bound(len(data))})"
    )


@pytest.mark.parametrize("codec", CODECS[1:])
def test_huge_declared_sizes_allocate_nothing_like_them(codec: int) -> None:
    """MESSAGEs that claim 4 GiB, or just over the limit, inside: rejected
    before allocating; one that claims exactly the limit allocates about it."""
    for declared in (2**32 - 1, LIMIT + 1, LIMIT):
        meta = pb.MessageMetadata(
            producer_name="p",
            sequence_id=1,
            publish_time=1,
            compression=codec,
            uncompressed_size=declared,
            num_messages_in_batch=2**31 - 1,
        )
        frame = raw_payload_frame(
            message_command(1, 1).SerializeToString(),
            meta.SerializeToString(),
            compress(codec, b"\x00" * 100),
        )
        assert _traced_peak(frame, []) < _memory_bound(len(frame))


def test_batch_of_valid_items_survives_the_pipeline() -> None:
    """Sanity: the pipeline does decode valid input to rows."""
    items = [Item(payload=b"a"), Item(payload=b"b", compacted_out=True), Item(null_value=True)]
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=1)
    built = build_entry(items, meta, pb.ZSTD)
    frame = raw_payload_frame(
        message_command(2, 3).SerializeToString(), built.metadata.SerializeToString(), built.payload
    )
    sink = _Sink()
    decoder = FrameDecoder(max_frame_size=LIMIT)
    decoder.feed(frame)
    for f in decoder:
        sink.frame(f)
    assert sink.rows == 2
    assert sink.builder.build().column("value").to_pylist() == [b"a", None]
