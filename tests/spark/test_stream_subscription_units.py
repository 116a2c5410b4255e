"""The stream subscription's rules, without a broker: what a cumulative ack may cover
(``ack_point``), when a mark-delete position keeps a stream's position (``holds``), the
subscription's place in the offsets, and the options that choose it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.spark.errors import CheckpointOffsetError, PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.stream.offsets import (
    SUBSCRIPTION_KEY,
    dump_offsets,
    parse_offsets,
    subscription_in,
)
from pulsar_spark.spark.stream.subscription import ack_point, holds, new_name

T = "persistent://public/default/t-partition-0"


def _after(ledger: int, entry: int, batch: int = -1) -> Position:
    return Position.after(MessageId(ledger, entry, 0, batch))


def test_ack_point_is_the_last_whole_entry_before_the_position() -> None:
    assert ack_point(_after(7, 4)) == MessageId(7, 4, 0, -1)
    assert ack_point(_after(7, 4, batch=3)) == MessageId(7, 3, 0, -1)  # entry 4 half read
    assert ack_point(_after(7, 0, batch=3)) is None  # the entry before is in another ledger
    assert ack_point(Position.at(MessageId(7, 4, 0, -1))) == MessageId(7, 3, 0, -1)
    assert ack_point(Position.earliest()) is None


def test_holds_a_position_at_or_after_its_mark_delete() -> None:
    position = _after(7, 4)
    assert holds(MessageId(7, 4, 0, -1), position)  # acknowledged up to what was read
    assert holds(MessageId(7, 2, 0, -1), position)  # behind it: holds more
    assert holds(MessageId(5, -1, 0, -1), position)
    assert not holds(MessageId(7, 5, 0, -1), position)  # moved past it (a TTL, a new one)
    assert not holds(MessageId(9, 3, 0, -1), position)  # made anew at the latest message
    assert not holds(None, position)  # the broker does not tell (pulsar-lite)
    # Apache Pulsar moves a subscription at a ledger's last entry to the next one's start.
    assert holds(MessageId(9, -1, 0, -1), position)
    # Half an entry read: that entry must still be kept.
    assert holds(MessageId(7, 3, 0, -1), _after(7, 4, batch=2))
    assert not holds(MessageId(7, 4, 0, -1), _after(7, 4, batch=2))
    assert not holds(MessageId(9, -1, 0, -1), _after(7, 4, batch=2))
    # Nothing read yet: held while nothing is acknowledged in its ledger.
    assert holds(MessageId(3, -1, 0, -1), Position.earliest())
    assert not holds(MessageId(3, 0, 0, -1), Position.earliest())


@given(st.integers(0, 50), st.integers(-1, 50), st.integers(0, 50), st.integers(0, 50))
def test_a_position_is_held_exactly_when_what_follows_it_is_unacknowledged(
    mark_ledger: int, mark_entry: int, ledger: int, entry: int
) -> None:
    """Against a model: the entries after the position, in its ledger, are all after
    the mark-delete position (or the mark-delete is a later ledger's start)."""
    position = _after(ledger, entry)
    mark = MessageId(mark_ledger, mark_entry, 0, -1)
    first_needed = (ledger, entry + 1)
    expected = (mark_ledger, mark_entry) < first_needed or (
        mark_entry == -1 and mark_ledger > ledger
    )
    assert holds(mark, position) is expected
    if expected and (mark_ledger, mark_entry) < first_needed:
        assert ack_point(position) is not None  # the commit can move it up to there


def test_the_subscription_travels_in_the_offsets_beside_the_positions() -> None:
    offset = dump_offsets({T: _after(3, 9)}, "pulsar-spark-stream-abc")
    assert offset == {T: "after:3:9:0:-1", SUBSCRIPTION_KEY: "pulsar-spark-stream-abc"}
    assert parse_offsets(offset) == {T: _after(3, 9)}
    assert subscription_in(offset) == "pulsar-spark-stream-abc"
    # A checkpoint of an earlier version (or nonDurable): no subscription.
    assert subscription_in({T: "after:3:9:0:-1"}) is None
    assert dump_offsets({T: _after(3, 9)}) == {T: "after:3:9:0:-1"}
    with pytest.raises(CheckpointOffsetError, match="subscription"):
        subscription_in({T: "earliest", SUBSCRIPTION_KEY: 7})


def test_generated_names_say_what_made_them_and_start_with_the_prefix() -> None:
    assert new_name().startswith("pulsar-spark-stream-")
    assert new_name("team-a").startswith("team-a-pulsar-spark-stream-")
    assert new_name() != new_name()


def test_subscription_mode_options() -> None:
    base = {"service.url": "pulsar://localhost:6650", "topic": "t"}
    assert parse_options(base).durable is True
    assert parse_options({**base, "subscriptionMode": "NonDurable"}).durable is False
    with pytest.raises(PulsarOptionError, match="subscriptionMode"):
        parse_options({**base, "subscriptionMode": "sometimes"})
    with pytest.raises(PulsarOptionError, match="subscriptionName"):
        parse_options({**base, "subscriptionMode": "nonDurable", "subscriptionName": "x"})
