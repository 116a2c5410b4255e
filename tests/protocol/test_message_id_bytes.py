"""Serialized message ids: our bytes round-trip, equal the official client's and read its."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.protocol import EARLIEST, LATEST, MessageId, pb
from pulsar_spark.protocol.errors import InvalidMessageId
from pulsar_spark.protocol.ids.message_id import INT64_MAX
from pulsar_spark.protocol.ids.serialized import SerializedId, id_from_bytes, id_to_bytes

pulsar: Any = pytest.importorskip("pulsar")

ids = st.builds(
    MessageId,
    st.integers(0, INT64_MAX),
    st.integers(0, INT64_MAX),
    st.integers(-1, 2**31 - 1),
    st.integers(-1, 2**31 - 1),
) | st.sampled_from([EARLIEST, LATEST])


@given(ids, st.none() | ids)
def test_bytes_round_trip(mid: MessageId, first: MessageId | None) -> None:
    assert id_from_bytes(id_to_bytes(mid, first_chunk=first)) == SerializedId(mid, first)


@given(ids)
def test_our_bytes_are_the_official_clients(mid: MessageId) -> None:
    official = pulsar.MessageId(mid.partition, mid.ledger, mid.entry, mid.batch_index)
    assert id_to_bytes(mid) == official.serialize()
    back = pulsar.MessageId.deserialize(id_to_bytes(mid))
    found = (back.ledger_id(), back.entry_id(), back.partition(), back.batch_index())
    assert found == (mid.ledger, mid.entry, mid.partition, mid.batch_index)
    assert id_from_bytes(official.serialize()).message_id == mid


def test_the_sentinels_are_javas() -> None:
    # MessageId.earliest and MessageId.latest as StreamNative's README prints them.
    earliest = [8, *[-1] * 9, 1, 16, *[-1] * 9, 1]
    latest = [8, *[-1] * 8, 127, 16, *[-1] * 8, 127]
    assert list(id_to_bytes(EARLIEST)) == [b & 0xFF for b in earliest]
    assert list(id_to_bytes(LATEST)) == [b & 0xFF for b in latest]
    assert id_to_bytes(EARLIEST) == pulsar.MessageId.earliest.serialize()
    assert id_to_bytes(LATEST) == pulsar.MessageId.latest.serialize()
    # StreamNative's README example: ledger 11, entry 101, partition 1, batch index 1.
    assert id_from_bytes(bytes([8, 11, 16, 101, 24, 1, 32, 1])).message_id == MessageId(
        11, 101, 1, 1
    )


def test_batch_bookkeeping_is_not_part_of_the_position() -> None:
    data = MessageId(3, 4, 0, 2).to_pb()
    data.batch_size = 10
    data.ack_set.extend([5, 7])
    assert id_from_bytes(data.SerializeToString()) == SerializedId(MessageId(3, 4, 0, 2))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"\x01\x02", "corrupt protobuf"),
        (bytes([8, 12]), "entryId missing"),
        (b"", "ledgerId, entryId missing"),
        (id_to_bytes(MessageId(-1, 5)), "name no message"),
        (id_to_bytes(MessageId(1, 5, -2)), "below -1"),
        (id_to_bytes(MessageId(1, 5), first_chunk=MessageId(-3, 0)), "first chunk's ledger"),
    ],
)
def test_bytes_that_are_no_message_id(raw: bytes, says: str) -> None:
    with pytest.raises(InvalidMessageId, match=says):
        id_from_bytes(raw)


def test_a_chunked_messages_id() -> None:
    data = pb.MessageIdData(ledgerId=7, entryId=9, partition=2)
    data.first_chunk_message_id.CopyFrom(pb.MessageIdData(ledgerId=7, entryId=6, partition=2))
    assert id_from_bytes(data.SerializeToString()) == SerializedId(
        MessageId(7, 9, 2), MessageId(7, 6, 2)
    )
