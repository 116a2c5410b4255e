"""Message ids: signed/unsigned 64-bit masking, text form, order, wire form."""

from __future__ import annotations

import pytest

from pulsar_spark.protocol import EARLIEST, LATEST, MessageId, pb
from pulsar_spark.protocol.ids.message_id import INT64_MAX, to_signed64, to_unsigned64

U64_MAX = 2**64 - 1


@pytest.mark.parametrize(
    ("signed", "unsigned"),
    [
        (0, 0),
        (1, 1),
        (-1, U64_MAX),
        (-2, U64_MAX - 1),
        (INT64_MAX, INT64_MAX),
        (-(2**63), 2**63),
    ],
)
def test_signed_unsigned_masking(signed: int, unsigned: int) -> None:
    assert to_unsigned64(signed) == unsigned
    assert to_signed64(unsigned) == signed
    assert to_signed64(to_unsigned64(signed)) == signed


def test_earliest_and_latest() -> None:
    assert (EARLIEST.ledger, EARLIEST.entry, EARLIEST.partition, EARLIEST.batch_index) == (
        -1,
        -1,
        -1,
        -1,
    )
    assert (LATEST.ledger, LATEST.entry) == (INT64_MAX, INT64_MAX)
    assert EARLIEST.is_earliest and not EARLIEST.is_latest
    assert LATEST.is_latest and not LATEST.is_earliest
    assert EARLIEST < MessageId(0, 0) < LATEST


# ---------------------------------------------------------------------------
# Text
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mid",
    [
        MessageId(1, 2),
        MessageId(1, 2, 3, 4),
        MessageId(-1, -1, -1, -1),
        MessageId(INT64_MAX, INT64_MAX, 0, 0),
        MessageId(123456789012, 0, 15, 999),
    ],
)
def test_str_parse_round_trip(mid: MessageId) -> None:
    text = str(mid)
    assert text == f"{mid.ledger}:{mid.entry}:{mid.partition}:{mid.batch_index}"
    assert MessageId.parse(text) == mid


def test_str_form() -> None:
    assert str(MessageId(20, 3)) == "20:3:-1:-1"
    assert str(MessageId(20, 3, 0, 7)) == "20:3:0:7"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("5:6", MessageId(5, 6, -1, -1)),
        ("5:6:2", MessageId(5, 6, 2, -1)),
        (" 5:6:2:9 ", MessageId(5, 6, 2, 9)),
        ("-1:-1", EARLIEST),
        # The uint64 form some tools print for -1 (dedup receipts: -1:-1).
        ("18446744073709551615:18446744073709551615", EARLIEST),
    ],
)
def test_parse(text: str, expected: MessageId) -> None:
    assert MessageId.parse(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "5", "1:2:3:4:5", "a:b", "1:x", "1.5:2", "18446744073709551616:0", "1:2:3:2147483648"],
)
def test_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="message id"):
        MessageId.parse(text)


# ---------------------------------------------------------------------------
# Order
# ---------------------------------------------------------------------------


def test_order_is_ledger_entry_batch_index() -> None:
    ids = [
        MessageId(2, 0, -1, 0),
        MessageId(1, 5, -1, 3),
        MessageId(1, 5, -1, -1),
        MessageId(1, 4, -1, 10),
        MessageId(1, 5, -1, 0),
        MessageId(-1, -1),
        MessageId(1, 10, -1, -1),
    ]
    assert sorted(ids) == [
        MessageId(-1, -1),
        MessageId(1, 4, -1, 10),
        MessageId(1, 5, -1, -1),  # the whole entry sorts before its items
        MessageId(1, 5, -1, 0),
        MessageId(1, 5, -1, 3),
        MessageId(1, 10, -1, -1),
        MessageId(2, 0, -1, 0),
    ]


def test_order_ignores_the_partition() -> None:
    a, b = MessageId(1, 2, 0, 3), MessageId(1, 2, 7, 3)
    assert a <= b and b <= a
    assert not a < b and not b < a
    assert a != b  # equality still tells partitions apart
    assert MessageId(1, 2, 9, 0) < MessageId(1, 3, 0, 0)


def test_comparison_operators() -> None:
    lo, hi = MessageId(1, 2, -1, 0), MessageId(1, 2, -1, 1)
    assert lo < hi and lo <= hi and hi > lo and hi >= lo
    assert not (hi < lo) and not (lo > hi)
    assert lo == MessageId(1, 2, -1, 0)
    assert hash(lo) == hash(MessageId(1, 2, -1, 0))
    assert lo.position == (1, 2, 0)


def test_comparison_with_other_types_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        _ = MessageId(1, 2) < (1, 2)
    with pytest.raises(TypeError):
        _ = MessageId(1, 2) >= 3
    assert MessageId(1, 2) != "1:2:-1:-1"


def test_with_batch_index() -> None:
    assert MessageId(1, 2, 3).with_batch_index(4) == MessageId(1, 2, 3, 4)


# ---------------------------------------------------------------------------
# Wire form
# ---------------------------------------------------------------------------


def test_to_pb_masks_negative_ids() -> None:
    data = EARLIEST.to_pb()
    assert (data.ledgerId, data.entryId) == (U64_MAX, U64_MAX)
    assert not data.HasField("partition")
    assert not data.HasField("batch_index")
    assert data.partition == -1 and data.batch_index == -1  # the .proto's defaults
    # The wire form is the varint of 2^64-1: ten bytes each.
    minus_one = b"\xff" * 9 + b"\x01"
    assert data.SerializeToString() == b"\x08" + minus_one + b"\x10" + minus_one


def test_to_pb_sets_partition_and_batch_index_when_given() -> None:
    data = MessageId(7, 8, 2, 5).to_pb()
    assert (data.ledgerId, data.entryId, data.partition, data.batch_index) == (7, 8, 2, 5)
    assert not MessageId(7, 8, 2, 5).to_pb(with_batch_index=False).HasField("batch_index")


@pytest.mark.parametrize(
    "mid",
    [MessageId(7, 8), MessageId(7, 8, 2, 5), EARLIEST, LATEST, MessageId(0, 0, 0, 0)],
)
def test_pb_round_trip(mid: MessageId) -> None:
    data = mid.to_pb()
    wire = pb.MessageIdData.FromString(data.SerializeToString())
    assert MessageId.from_pb(wire) == mid


def test_from_pb_reads_unsigned_minus_one() -> None:
    data = pb.MessageIdData(ledgerId=U64_MAX, entryId=U64_MAX - 1, partition=3, batch_index=4)
    assert MessageId.from_pb(data) == MessageId(-1, -2, 3, 4)


def test_from_pb_partition_override() -> None:
    data = pb.MessageIdData(ledgerId=1, entryId=2)
    assert MessageId.from_pb(data) == MessageId(1, 2, -1, -1)
    assert MessageId.from_pb(data, partition=4) == MessageId(1, 2, 4, -1)
