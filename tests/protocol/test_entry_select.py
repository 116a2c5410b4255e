"""Example tests of select(): the reader's filters by start id, ack set, compaction and markers."""

from __future__ import annotations

import pytest
from strategies import Item, ack_set_from_acked, build_entry

from pulsar_spark.protocol import MessageId, messages, open_entry, pb, select


def _meta(**kw: object) -> pb.MessageMetadata:
    return pb.MessageMetadata(producer_name="prod", sequence_id=10, publish_time=1000, **kw)


def _batch(items: list[Item], codec: int = pb.NONE, **kw: object):
    return build_entry(items, _meta(), codec, **kw)  # type: ignore[arg-type]


# -- select -------------------------------------------------------------------


def _five():
    built = _batch([Item(payload=bytes([i])) for i in range(5)])
    return open_entry(10, 20, -1, built.metadata, built.payload)


@pytest.mark.parametrize(
    ("start", "inclusive", "want"),
    [
        (None, True, [0, 1, 2, 3, 4]),
        (MessageId(10, 20, -1, 2), True, [2, 3, 4]),
        (MessageId(10, 20, -1, 2), False, [3, 4]),
        (MessageId(10, 20, -1, 4), False, []),
        (MessageId(10, 20, -1, 0), True, [0, 1, 2, 3, 4]),
        (MessageId(10, 20, -1, -1), True, [0, 1, 2, 3, 4]),  # whole entry
        (MessageId(10, 20, -1, -1), False, []),
        (MessageId(10, 19, -1, 3), False, [0, 1, 2, 3, 4]),  # start before the entry
        (MessageId(10, 21, -1, -1), True, []),  # start after the entry
        (MessageId(9, 1000, -1, -1), False, [0, 1, 2, 3, 4]),  # earlier ledger
        (MessageId(11, 0, -1, -1), True, []),  # later ledger
        (MessageId(-1, -1, -1, -1), True, [0, 1, 2, 3, 4]),  # earliest
    ],
)
def test_select_start_ids(start: MessageId | None, inclusive: bool, want: list[int]) -> None:
    assert select(_five(), start=start, start_inclusive=inclusive) == want


def test_select_start_on_a_single_message() -> None:
    single = build_entry([Item(payload=b"x")], _meta(), pb.NONE, batched=False)
    entry = open_entry(10, 20, -1, single.metadata, single.payload)
    assert select(entry, start=MessageId(10, 20)) == [0]
    assert select(entry, start=MessageId(10, 20), start_inclusive=False) == []
    assert select(entry, start=MessageId(10, 19), start_inclusive=False) == [0]
    assert select(entry, start=MessageId(10, 21)) == []


def test_select_ack_set_words() -> None:
    entry = _five()
    assert select(entry, ack_set=[0b10110]) == [1, 2, 4]
    assert select(entry, ack_set=[0]) == []
    assert select(entry, ack_set=[-1]) == [0, 1, 2, 3, 4]  # all 64 bits set
    assert select(entry, ack_set=[]) == [0, 1, 2, 3, 4]


def test_select_ack_set_second_word_and_sign_bit() -> None:
    built = _batch([Item(payload=b"x") for _ in range(70)])
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    words = ack_set_from_acked(70, {0, 64, 69})
    assert words[0] == -2  # bits 1..63 set: negative as int64
    assert words[1] == 0b011110
    assert select(entry, ack_set=words) == [i for i in range(70) if i not in {0, 64, 69}]
    # Bits beyond the given words count as acked.
    assert select(entry, ack_set=[-1]) == list(range(64))


def test_select_skips_compacted_out_and_markers() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"b", compacted_out=True), Item(payload=b"c")])
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    assert select(entry) == [0, 2]
    assert select(entry, ack_set=[0b110]) == [2]
    built.metadata.marker_type = 0  # presence marks a marker
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    assert entry.is_marker
    assert select(entry) == []


def test_select_compacted_batch_indexes() -> None:
    built = _batch([Item(payload=b"a"), Item(payload=b"c")], compacted_batch_indexes=[0, 2])
    entry = open_entry(1, 1, -1, built.metadata, built.payload)
    assert [str(m.message_id) for m in messages(entry)] == ["1:1:-1:0", "1:1:-1:2"]
    assert select(entry, start=MessageId(1, 1, -1, 1)) == [1]
    assert select(entry, start=MessageId(1, 1, -1, 2), start_inclusive=False) == []
    assert select(entry, ack_set=[0b011]) == [0]  # real index 2 is acked
    assert [m.sequence_id for m in messages(entry)] == [10, 12]
