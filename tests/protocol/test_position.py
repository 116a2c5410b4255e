"""Positions: one text form that reads back to the same position; errors name the option."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_spark.protocol.errors import PulsarError
from pulsar_spark.protocol.ids.message_id import EARLIEST, INT64_MAX, LATEST, MessageId
from pulsar_spark.protocol.ids.position import InvalidPosition, Position

INT64 = st.integers(-(1 << 63), INT64_MAX)
INT32 = st.integers(-(1 << 31), (1 << 31) - 1)
# Real ids and the corners: -1 everywhere, INT64_MAX, extreme values.
COMPONENT64 = st.one_of(st.integers(-1, 1 << 20), st.sampled_from([-1, 0, INT64_MAX]), INT64)
COMPONENT32 = st.one_of(st.integers(-1, 64), INT32)

message_ids = st.builds(MessageId, COMPONENT64, COMPONENT64, COMPONENT32, COMPONENT32)
times = st.integers(-(1 << 62), 1 << 62)

positions = st.one_of(
    st.just(Position.earliest()),
    st.just(Position.latest()),
    st.builds(Position.at, message_ids),
    st.builds(Position.after, message_ids),
    st.builds(Position.at_time, times),
    st.builds(Position.of, message_ids, inclusive=st.booleans()),
)


# ---------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------


@given(positions)
@example(Position.at(MessageId(-1, -1, 3, 2)))
@example(Position.after(MessageId(INT64_MAX, INT64_MAX)))
@example(Position.at_time(0))
@example(Position.at_time(-5))
def test_text_form_reads_back(position: Position) -> None:
    text = str(position)
    assert Position.parse(text) == position
    assert str(Position.parse(text)) == text
    assert Position.parse(f"  {text}\n", what="startingOffsets") == position


@given(message_ids)
def test_id_kinds_round_trip(mid: MessageId) -> None:
    for position, kind in ((Position.at(mid), "from"), (Position.after(mid), "after")):
        back = Position.parse(str(position))
        assert back == position
        if mid.is_earliest:
            assert back.kind == "earliest"
        elif mid.is_latest:
            assert back.kind == "latest"
        else:
            assert back.kind == kind
            assert back.message_id == mid
            assert str(back) == f"{kind}:{mid}"


@given(times)
def test_time_round_trip(ms: int) -> None:
    position = Position.at_time(ms)
    assert str(position) == f"time:{ms}"
    assert Position.parse(str(position)) == position
    assert position.time_ms == ms
    assert position.message_id is None


@given(positions)
def test_positions_are_values(position: Position) -> None:
    again = Position.parse(str(position))
    assert hash(again) == hash(position)
    assert {position, again} == {position}


# ---------------------------------------------------------------------------
# Accepted spellings
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["earliest", "EARLIEST", "Earliest", " earliest ", "eArLiEsT"])
def test_earliest_any_case(text: str) -> None:
    assert Position.parse(text) == Position.earliest()
    assert Position.parse(text).kind == "earliest"


@pytest.mark.parametrize("text", ["latest", "LATEST", "Latest", "\tlatest\n"])
def test_latest_any_case(text: str) -> None:
    assert Position.parse(text) == Position.latest()
    assert Position.parse(text).kind == "latest"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:2:3:4", MessageId(1, 2, 3, 4)),
        ("1:2", MessageId(1, 2, -1, -1)),
        ("1:2:0", MessageId(1, 2, 0, -1)),
        (" 7:8:-1:5 ", MessageId(7, 8, -1, 5)),
    ],
)
def test_bare_id_is_from(text: str, expected: MessageId) -> None:
    position = Position.parse(text)
    assert position == Position.at(expected)
    assert position.kind == "from"
    assert position.inclusive
    assert str(position) == f"from:{expected}"


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("from:1:2:3:4", "from"),
        ("FROM:1:2:3:4", "from"),
        ("After:1:2:3:4", "after"),
        ("AFTER:1:2:3:4", "after"),
    ],
)
def test_prefixes_any_case(text: str, kind: str) -> None:
    position = Position.parse(text)
    assert position.kind == kind
    assert position.message_id == MessageId(1, 2, 3, 4)


@pytest.mark.parametrize("text", ["time:1700000000000", "TIME:1700000000000", "Time:1700000000000"])
def test_time_any_case(text: str) -> None:
    assert Position.parse(text) == Position.at_time(1_700_000_000_000)


U64_MINUS_ONE = str((1 << 64) - 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The wire's uint64 -1 for ledger and entry is the earliest id.
        (f"{U64_MINUS_ONE}:{U64_MINUS_ONE}", Position.earliest()),
        (f"{U64_MINUS_ONE}:{U64_MINUS_ONE}:-1:-1", Position.earliest()),
        (f"from:{U64_MINUS_ONE}:{U64_MINUS_ONE}:-1:-1", Position.earliest()),
        (f"after:{U64_MINUS_ONE}:{U64_MINUS_ONE}:-1:-1", Position.earliest()),
        ("-1:-1:-1:-1", Position.earliest()),
        (str(LATEST), Position.latest()),
        (f"after:{LATEST}", Position.latest()),
        # Only one component at -1 is an ordinary (if odd) id.
        (f"{U64_MINUS_ONE}:5", Position.at(MessageId(-1, 5))),
    ],
)
def test_wire_ids_for_earliest_and_latest(text: str, expected: Position) -> None:
    assert Position.parse(text) == expected


def test_of_maps_the_wire_ids() -> None:
    for inclusive in (True, False):
        assert Position.of(EARLIEST, inclusive=inclusive) == Position.earliest()
        assert Position.of(LATEST, inclusive=inclusive) == Position.latest()
    mid = MessageId(3, 4, 0, 1)
    assert Position.of(mid, inclusive=True) == Position.at(mid)
    assert Position.of(mid, inclusive=False) == Position.after(mid)


# ---------------------------------------------------------------------------
# Reading a position
# ---------------------------------------------------------------------------


def test_inclusive_and_is_id() -> None:
    mid = MessageId(1, 2, -1, 0)
    assert Position.at(mid).inclusive and Position.at(mid).is_id
    assert not Position.after(mid).inclusive and Position.after(mid).is_id
    for position in (Position.earliest(), Position.latest(), Position.at_time(5)):
        assert position.inclusive
        assert not position.is_id


def test_id_or() -> None:
    mid = MessageId(1, 2, 0, 3)
    assert Position.at(mid).id_or() == mid
    assert Position.after(mid).id_or() == mid
    assert Position.earliest().id_or() == EARLIEST
    assert Position.latest().id_or() == LATEST
    with pytest.raises(InvalidPosition, match=r"time:5 names a time, not a message id"):
        Position.at_time(5).id_or()


# ---------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------

MALFORMED = [
    "",
    "   ",
    "bogus",
    "earliest:",
    "latest:1:2",
    "earliest latest",
    "from:",
    "from:x",
    "from:1",
    "from:1:2:3:4:5",
    "from:latest",
    "after:",
    "after:earliest",
    "fromm:1:2",
    "1",
    "1:2:3:4:5",
    "1:x:3:4",
    "1.5:2",
    f"{1 << 64}:0",
    f"1:2:{1 << 31}:0",
    "time:",
    "time:x",
    "time:1.5",
    "time:1e3",
    "time:true",
    "time:1:2",
    "time",
    ":",
    "::",
]


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_text_names_the_option(text: str) -> None:
    with pytest.raises(InvalidPosition) as caught:
        Position.parse(text, what="startingOffsets")
    message = str(caught.value)
    assert message.startswith(f"startingOffsets={text!r} is not a position")
    assert "'earliest', 'latest'" in message
    # Part of the hierarchy, not retriable, and still a ValueError.
    assert isinstance(caught.value, PulsarError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.retriable is False


def test_default_name_is_position() -> None:
    with pytest.raises(InvalidPosition, match=r"^position='nope' is not a position"):
        Position.parse("nope")


def test_the_cause_is_in_the_text() -> None:
    with pytest.raises(InvalidPosition, match=r"has a part that is not an integer"):
        Position.parse("from:1:x", what="endingOffsets")
    with pytest.raises(InvalidPosition, match=r"invalid literal for int"):
        Position.parse("time:x", what="startingTime")


def test_a_time_before_1970_reads_back() -> None:
    # Before every message: a read from the start, as before the redesign.
    assert Position.parse("time:-5", what="startingTime") == Position.at_time(-5)
    assert str(Position.at_time(-5)) == "time:-5"
    assert Position.at_time(-5).time_ms == -5


@pytest.mark.parametrize("value", [None, 5, 1.5, b"earliest", ["earliest"]])
def test_non_text_names_the_option(value: object) -> None:
    with pytest.raises(InvalidPosition) as caught:
        Position.parse(value, what="startingOffsets")  # type: ignore[arg-type]
    assert str(caught.value).startswith(f"startingOffsets={value!r}: a position is text")
    assert type(value).__name__ in str(caught.value)


@pytest.mark.parametrize("value", [True, False, 1.5, "5", None])
def test_at_time_rejects_what_is_not_epoch_ms(value: object) -> None:
    with pytest.raises(InvalidPosition, match=r"epoch milliseconds"):
        Position.at_time(value)  # type: ignore[arg-type]


@given(st.text(max_size=40))
@example("from:1:2:3:4")
@example("TIME:00012")
def test_any_text_parses_or_raises_invalid_position(text: str) -> None:
    try:
        position = Position.parse(text, what="opt")
    except InvalidPosition as exc:
        assert str(exc).startswith(f"opt={text!r}")
    else:
        # Whatever is accepted has the one text form, which reads back the same.
        assert Position.parse(str(position)) == position
