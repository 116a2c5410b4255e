"""Batch items located without protobuf objects (:mod:`pulsar_spark.columnar.rows.items`),
and the builder that guesses item places and checks the guesses.

The reference is the exact split (:func:`split_batch`, one protobuf parse per
item): every way of locating must give the same items, the same rows, and the
same errors where the exact split finds the batch corrupt.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.columnar.rows.items import locate_by_headers, locate_items, locate_uniform
from pulsar_spark.protocol import BatchDecodeError, CorruptMessage, pb
from pulsar_spark.protocol.batch import encode_batch, split_batch
from pulsar_spark.protocol.entry import open_entry, select
from tests.protocol.strategies import build_entry, item_lists, metadata_base

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPIC = "persistent://public/default/items"


def raw_batch(items: list[tuple[pb.SingleMessageMetadata, bytes]]) -> bytes:
    return encode_batch(items)


def entry_of(raw: bytes, count: int, *, split: bool, entry_id: int = 7, **meta: object):
    metadata = pb.MessageMetadata(
        producer_name="p",
        sequence_id=100,
        publish_time=1_700_000_000_000,
        num_messages_in_batch=count,
        **meta,
    )
    return open_entry(3, entry_id, -1, metadata, raw, split=split)


def rows(entries, positions=None) -> list[dict]:
    builder = ArrowBatchBuilder(TOPIC)
    for i, entry in enumerate(entries):
        builder.add(entry, None if positions is None else positions[i])
    return builder.build().to_pylist()


def same_rows(raws: list[tuple[bytes, int]], positions=None) -> list[dict]:
    """Rows of the entries opened split and unsplit, which must agree."""
    exact = rows(
        [entry_of(r, c, split=True, entry_id=i) for i, (r, c) in enumerate(raws)], positions
    )
    lazy = rows(
        [entry_of(r, c, split=False, entry_id=i) for i, (r, c) in enumerate(raws)], positions
    )
    assert lazy == exact
    return lazy


def fixed_items(count: int, size: int = 100) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """Items of equal length: the layout of one producer's fixed-size records."""
    return [
        (
            pb.SingleMessageMetadata(sequence_id=1000 + i, event_time=1_700_000_000_000 + i),
            bytes([i % 256]) * size,
        )
        for i in range(count)
    ]


# -- locate_items --------------------------------------------------------------


@PROPS
@given(its=item_lists(1, 12))
def test_locate_items_agrees_with_split_batch(its) -> None:
    raw = raw_batch([(item.smm(), item.payload) for item in its])
    _, starts, sizes = split_batch(raw, len(its))
    assert locate_items(raw, len(its)) == (starts, sizes)


def test_locate_items_reads_a_payload_size_after_other_fields() -> None:
    first = pb.SingleMessageMetadata(partition_key="k" * 200, payload_size=3)
    first.properties.add(key="a", value="b")
    raw = raw_batch([(first, b"abc"), (pb.SingleMessageMetadata(), b"x" * 300)])
    assert locate_items(raw, 2) == split_batch(raw, 2)[1:]


@pytest.mark.parametrize(
    ("raw", "count", "reason"),
    [
        (b"\x00\x00", 1, "item 0 at byte 0 is cut off before its metadata size"),
        (b"\x00\x00\x00\x09\x18\x01", 1, "metadata of batch item 0 (9 bytes at byte 4) runs past"),
        (b"\x00\x00\x00\x02\x18\x05ab", 1, "payload of batch item 0 (5 bytes at byte 6) runs past"),
        (b"\x00\x00\x00\x02\x18\x01ab", 1, "1 bytes are left after the 1 messages"),
        (b"\x00\x00\x00\x02\x28\x01a", 1, "batch item 0 has no readable payload_size"),
        (b"\x00\x00\x00\x02\x18\x81", 1, "varint cut off"),
    ],
)
def test_locate_items_refuses_a_broken_layout(raw: bytes, count: int, reason: str) -> None:
    with pytest.raises(BatchDecodeError, match=re.escape(reason)):
        locate_items(raw, count)


# -- locate_uniform -------------------------------------------------------------


def test_equal_items_are_located_at_once() -> None:
    raws = [raw_batch(fixed_items(50)), raw_batch(fixed_items(7, 3))]
    data = np.frombuffer(b"".join(raws), np.uint8)
    fits, sizes, smm_starts, payload_starts = locate_uniform(
        data, np.array([0, len(raws[0])]), np.array([len(r) for r in raws]), np.array([50, 7])
    )
    assert fits.tolist() == [True, True]
    assert sizes.tolist() == [100, 3]
    exact = [split_batch(r, n)[1] for r, n in ((raws[0], 50), (raws[1], 7))]
    assert payload_starts.tolist() == exact[0] + [len(raws[0]) + s for s in exact[1]]
    lengths = []
    for meta, payload in fixed_items(50) + fixed_items(7, 3):
        meta.payload_size = len(payload)
        lengths.append(len(meta.SerializeToString()))
    assert (payload_starts - smm_starts).tolist() == lengths


def test_items_of_different_lengths_are_not_guessed() -> None:
    raw = raw_batch([(pb.SingleMessageMetadata(), b"a" * n) for n in (1, 2, 3)])
    fits, *_ = locate_uniform(
        np.frombuffer(raw, np.uint8), np.array([0]), np.array([len(raw)]), np.array([3])
    )
    assert not fits[0]


# -- locate_by_headers -------------------------------------------------------------


def event_items(count: int, seed: int = 0) -> list[tuple[pb.SingleMessageMetadata, bytes]]:
    """Application events: text payloads of varied length, a key, two properties."""
    return [
        (
            pb.SingleMessageMetadata(
                partition_key=f"user-{i * 7 + seed}",
                properties=[
                    pb.KeyValue(key="kind", value="click" * (i % 3)),
                    pb.KeyValue(key="source", value="web"),
                ],
                event_time=1_700_000_000_000 + i,
            ),
            b'{"n": %d, "pad": "%s"}' % (i, b"x" * ((i * 37 + seed) % 90)),
        )
        for i in range(count)
    ]


def test_items_of_text_payloads_are_located_by_their_zero_led_sizes() -> None:
    raws = [raw_batch(event_items(40)), raw_batch(event_items(1, 3)), raw_batch(event_items(9))]
    data = np.frombuffer(b"".join(raws), np.uint8)
    bases = np.cumsum([0] + [len(r) for r in raws[:-1]])
    fits, payload_starts, sizes = locate_by_headers(
        data, bases, np.array([len(r) for r in raws]), np.array([40, 1, 9])
    )
    assert fits.tolist() == [True, True, True]
    exact_starts, exact_sizes = [], []
    for base, raw, count in zip(bases.tolist(), raws, (40, 1, 9), strict=True):
        _, starts, item_sizes = split_batch(raw, count)
        exact_starts += [base + s for s in starts]
        exact_sizes += item_sizes
    assert payload_starts.tolist() == exact_starts
    assert sizes.tolist() == exact_sizes


def test_a_batch_with_more_zero_runs_than_items_is_not_guessed() -> None:
    raw = raw_batch(
        [(pb.SingleMessageMetadata(), b"a\x00\x00\x00\x00b"), (pb.SingleMessageMetadata(), b"c")]
    )
    fits, payload_starts, _ = locate_by_headers(
        np.frombuffer(raw, np.uint8), np.array([0]), np.array([len(raw)]), np.array([2])
    )
    assert not fits[0]
    assert len(payload_starts) == 0


def counted_wrong() -> bytes:
    """Three items with as many zero runs as items, but not theirs: item 1's
    metadata is longer than 255 bytes (its size starts with two zero bytes only)
    and item 0's payload holds a run. Only the metadata show the guess wrong."""
    big = pb.SingleMessageMetadata(properties=[pb.KeyValue(key="k", value="v" * 300)])
    raw = raw_batch(
        [
            (pb.SingleMessageMetadata(), b"ab\x00\x00\x00\x02cdefgh"),
            (big, b"second"),
            (pb.SingleMessageMetadata(), b"third"),
        ]
    )
    fits, *_ = locate_by_headers(
        np.frombuffer(raw, np.uint8), np.array([0]), np.array([len(raw)]), np.array([3])
    )
    assert fits[0]  # the guess is taken; the builder must find it wrong
    return raw


def test_a_wrong_guess_from_zero_runs_is_caught_by_the_metadata() -> None:
    got = same_rows([(counted_wrong(), 3), (raw_batch(event_items(5)), 5)])
    assert [r["value"] for r in got[:3]] == [b"ab\x00\x00\x00\x02cdefgh", b"second", b"third"]
    assert got[1]["properties"] == [("k", "v" * 300)]


def test_binary_payloads_read_alike_and_stop_the_zero_run_guess() -> None:
    binary = [
        (pb.SingleMessageMetadata(partition_key=f"k{i}"), b"\x00" * (i % 7 + 3) + b"z")
        for i in range(6)
    ]
    raws = [(raw_batch(binary[: n + 1]), n + 1) for n in range(6)] * 2
    builder = ArrowBatchBuilder(TOPIC)
    for i, (raw, count) in enumerate(raws):
        builder.add(entry_of(raw, count, split=False, entry_id=i))
    lazy = builder.build().to_pylist()
    assert not builder._try_headers  # twelve entries, none laid out by zero runs
    assert lazy == same_rows(raws)


@PROPS
@given(
    entries=st.lists(
        st.lists(
            st.tuples(
                st.lists(st.tuples(st.text(max_size=3), st.text(max_size=300)), max_size=2),
                st.one_of(st.none(), st.text(max_size=12)),
                st.lists(st.sampled_from([0, 0, 1, 0x61, 0x7B]), max_size=40).map(bytes),
            ),
            min_size=1,
            max_size=8,
        ),
        min_size=1,
        max_size=5,
    ),
    data=st.data(),
)
def test_zero_heavy_payloads_and_long_metadata_read_like_the_exact_split(entries, data) -> None:
    raws = []
    for items in entries:
        built = [
            (
                pb.SingleMessageMetadata(
                    properties=[pb.KeyValue(key=k, value=v) for k, v in props],
                    **({} if key is None else {"partition_key": key}),
                ),
                payload,
            )
            for props, key, payload in items
        ]
        raws.append((raw_batch(built), len(built)))
    same_rows(raws)
    positions = [sorted(data.draw(st.sets(st.integers(0, c - 1), min_size=1))) for _, c in raws]
    same_rows(raws, positions)


# -- the builder: guesses checked against every item's metadata ------------------


def test_a_batch_of_equal_items_reads_like_the_exact_split() -> None:
    got = same_rows([(raw_batch(fixed_items(200)), 200), (raw_batch(fixed_items(5, 0)), 5)])
    assert len(got) == 205
    assert got[199]["value"] == bytes([199]) * 100
    assert got[199]["sequenceId"] == 1199
    assert got[200]["value"] == b""


def wrong_guess() -> bytes:
    """Three items whose lengths add up as if all were as long as the first
    (6 + 5 bytes each), all with 2-byte metadata: the guess passes the size and
    header checks, and only item 1's payload_size shows it wrong."""
    raw = raw_batch(
        [
            (pb.SingleMessageMetadata(), b"a" * 5),
            (pb.SingleMessageMetadata(), b"b"),
            (pb.SingleMessageMetadata(), b"c" * 9),
        ]
    )
    assert len(raw) == 3 * (4 + 2 + 5)
    assert raw[11:15] == b"\x00\x00\x00\x02"
    return raw


def test_a_wrong_guess_is_caught_by_the_sizes() -> None:
    got = same_rows([(wrong_guess(), 3), (raw_batch(fixed_items(3)), 3)])
    assert [r["value"] for r in got[:3]] == [b"aaaaa", b"b", b"c" * 9]


def test_a_wrong_guess_is_caught_in_items_not_read() -> None:
    # Only item 2 is picked: item 1, which proves the guess wrong, is still checked.
    got = same_rows([(wrong_guess(), 3)], positions=[[2]])
    assert [r["value"] for r in got] == [b"c" * 9]
    assert [r["messageId"] for r in got] == ["3:0:-1:2"]


@PROPS
@given(
    entries=st.lists(
        st.one_of(
            st.builds(
                lambda n, size: raw_batch(fixed_items(n, size)),
                st.integers(1, 40),
                st.integers(0, 300),
            ),
            item_lists(1, 10, allow_compacted_out=False).map(
                lambda its: raw_batch([(i.smm(), i.payload) for i in its])
            ),
        ),
        min_size=1,
        max_size=6,
    ),
    data=st.data(),
)
def test_any_mix_of_entries_reads_like_the_exact_split(entries, data) -> None:
    raws = [(raw, _count(raw)) for raw in entries]
    positions = []
    for _, count in raws:
        chosen = data.draw(st.sets(st.integers(0, count - 1), min_size=1), label="positions")
        positions.append(sorted(chosen))
    same_rows(raws)
    same_rows(raws, positions)


def _count(raw: bytes) -> int:
    pos = n = 0
    while pos < len(raw):
        head = int.from_bytes(raw[pos : pos + 4], "big")
        item = pb.SingleMessageMetadata.FromString(raw[pos + 4 : pos + 4 + head])
        pos += 4 + head + item.payload_size
        n += 1
    return n


@PROPS
@given(
    built=st.lists(
        st.builds(
            build_entry,
            item_lists(1, 6),
            metadata_base(),
            st.sampled_from([pb.NONE, pb.LZ4]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_entries_from_the_strategies_read_alike(built) -> None:
    def collect(split: bool) -> list[dict]:
        builder = ArrowBatchBuilder(TOPIC, partition=2)
        for i, b in enumerate(built):
            entry = open_entry(4, i, 2, b.metadata, b.payload, split=split)
            builder.add(entry, select(entry))
        return builder.build().to_pylist()

    assert collect(False) == collect(True)


def test_compacted_out_items_are_dropped_by_the_builder_when_not_yet_located() -> None:
    raw = raw_batch(
        [
            (pb.SingleMessageMetadata(), b"kept"),
            (pb.SingleMessageMetadata(compacted_out=True), b"gone"),
            (pb.SingleMessageMetadata(), b"also"),
        ]
    )
    exact, lazy = entry_of(raw, 3, split=True), entry_of(raw, 3, split=False)
    assert select(exact) == [0, 2]
    assert select(lazy) == [0, 1, 2]  # not located: select cannot tell
    assert not lazy.located
    for entry in (exact, lazy):
        assert [r["value"] for r in rows([entry], [select(entry)])] == [b"kept", b"also"]


@pytest.mark.parametrize(
    "raw",
    [
        # metadata that no reader decodes (a group): same verdict as the exact split
        b"\x00\x00\x00\x03\x18\x01\x0b" + b"a" + b"\x00\x00\x00\x03\x18\x01\x0b" + b"b",
        # a payload past the end
        b"\x00\x00\x00\x02\x18\x09abc" + b"\x00\x00\x00\x02\x18\x09abc",
        # a payload_size that is not there at all
        b"\x00\x00\x00\x02\x28\x01a" + b"\x00\x00\x00\x02\x28\x01b",
    ],
)
def test_a_corrupt_unsplit_batch_fails_the_build_naming_the_entry(raw: bytes) -> None:
    builder = ArrowBatchBuilder(TOPIC)
    builder.add(entry_of(raw, 2, split=False, entry_id=9))
    with pytest.raises(CorruptMessage) as caught:
        builder.build()
    assert caught.value.message_id is not None
    assert caught.value.message_id.startswith("3:9:-1:")
    assert builder.rows == 0


@pytest.mark.parametrize(
    "dropped",
    [
        pb.SingleMessageMetadata(
            compacted_out=True, partition_key="!!", partition_key_b64_encoded=True
        ),
        pb.SingleMessageMetadata(compacted_out=True, event_time=2**63),
    ],
    ids=["bad-base64-key", "time-out-of-range"],
)
def test_a_compacted_out_item_is_dropped_before_its_fields_are_checked(dropped) -> None:
    raw = raw_batch([(pb.SingleMessageMetadata(), b"kept"), (dropped, b"gone")])
    for split in (True, False):
        entry = entry_of(raw, 2, split=split)
        assert [r["value"] for r in rows([entry], [select(entry)])] == [b"kept"]
