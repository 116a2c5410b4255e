"""SUBSCRIBE as the readers send it: Exclusive, durable or not, a start id, and
``read_compacted`` (field 11) only when asked for; it survives a frame round trip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.protocol import commands, pb
from pulsar_spark.protocol.ids.message_id import MessageId

T = pb.BaseCommand


@given(
    read_compacted=st.booleans(),
    durable=st.booleans(),
    name=st.text(min_size=1, max_size=40),
    ledger=st.integers(0, 2**40),
    entry=st.integers(0, 2**40),
)
def test_subscribe_carries_read_compacted_only_when_asked(
    read_compacted: bool, durable: bool, name: str, ledger: int, entry: int
) -> None:
    command = commands.subscribe(
        7,
        3,
        topic="persistent://public/default/t",
        subscription=name,
        durable=durable,
        earliest=False,
        start_message_id=MessageId(ledger, entry),
        read_compacted=read_compacted,
    )
    decoded = T.FromString(command.SerializeToString())
    assert decoded.type == T.SUBSCRIBE
    sub = decoded.subscribe
    assert sub.HasField("read_compacted") is read_compacted
    assert sub.read_compacted is read_compacted
    assert (
        sub.subType == pb.CommandSubscribe.Exclusive
    )  # Apache Pulsar allows compacted reads on it
    assert (sub.subscription, sub.durable) == (name, durable)
    assert (sub.start_message_id.ledgerId, sub.start_message_id.entryId) == (ledger, entry)


def test_the_default_leaves_field_11_off_the_wire() -> None:
    plain = commands.subscribe(1, 1, topic="t", subscription="s", durable=False, earliest=True)
    compacted = commands.subscribe(
        1, 1, topic="t", subscription="s", durable=False, earliest=True, read_compacted=True
    )
    extra = len(compacted.SerializeToString()) - len(plain.SerializeToString())
    assert extra == 2  # tag 11 (varint) and the value 1
