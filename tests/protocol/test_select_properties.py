"""Hypothesis properties of select(): the reader's filters against a reference model."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import (
    Built,
    Item,
    ack_set_from_acked,
    ack_sets,
    build_entry,
    built_entries,
    codecs,
)

from pulsar_spark.protocol import MessageId, messages, open_entry, pb, select

PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


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
    ack_set = data.draw(
        st.one_of(
            ack_sets,
            st.builds(
                lambda acked: ack_set_from_acked(max(built.batch_indexes) + 1, acked),
                st.sets(st.integers(0, max([*built.batch_indexes, 0]))),
            ),
        )
    )
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
