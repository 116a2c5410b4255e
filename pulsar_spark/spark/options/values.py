"""Option value parsers: text in, a typed value out, or a :class:`PulsarOptionError`.

Each parser takes ``(option name, text)`` so that its errors name the option;
:data:`~pulsar_spark.spark.options.table.OPTIONS` says which parser reads which
option. Also here: :class:`OffsetSpec`, what the offsets parsers return. The
authentication options are :mod:`.auth`'s. Nothing here imports pyspark.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from pulsar_spark.protocol.errors import InvalidMessageId
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.protocol.ids.serialized import id_from_bytes

from ..errors import PulsarOptionError

__all__ = ["OffsetSpec", "parse_time", "pattern_parts"]


# -- typed values --------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends: a default and per-topic/partition positions.

    ``startingOffsets``/``endingOffsets`` give ``earliest``, ``latest`` or a
    message id (``from:`` the id; StreamNative's bytes give ``from:``/``after:``
    the id's entry), ``startingTime``/``endingTime`` publish times (``time:``) or
    earliest/latest.
    ``by_topic`` maps a full topic name to a position for every partition (or,
    for an id, the partition the id names); ``by_partition`` maps ``(full topic
    name, partition)`` to a position.
    """

    default: Position
    by_topic: tuple[tuple[str, Position], ...] = ()
    by_partition: tuple[tuple[tuple[str, int], Position], ...] = ()

    @property
    def is_json(self) -> bool:
        return bool(self.by_topic or self.by_partition)


# -- scalars ---------------------------------------------------------------------------


def text(name: str, value: str) -> str:
    """The text as given (parameters checked together with another option)."""
    return value


def non_empty(name: str, value: str) -> str:
    """The text without surrounding blanks; an error when nothing is left."""
    if not value.strip():
        raise PulsarOptionError(name, "is empty")
    return value.strip()


def boolean(name: str, value: str) -> bool:
    found = value.strip().lower()
    if found in ("true", "false"):
        return found == "true"
    raise PulsarOptionError(name, f"expected true or false, got {value!r}")


def delivery_guarantee(name: str, value: str) -> str:
    """``at-least-once`` or ``exactly-once`` (transactions): what a sink promises."""
    found = value.strip().lower().replace("_", "-")
    if found in ("at-least-once", "exactly-once"):
        return found
    msg = f"expected at-least-once or exactly-once, got {value!r}"
    raise PulsarOptionError(name, msg)


def push_filters(name: str, value: str) -> str:
    """``auto``, ``true`` or ``false``: when a batch read takes Spark's filters
    (:mod:`.pushdown`)."""
    found = value.strip().lower()
    if found in ("auto", "true", "false"):
        return found
    raise PulsarOptionError(name, f"expected auto, true or false, got {value!r}")


def positive(name: str, value: str) -> int:
    """An integer of at least 1."""
    return _int(name, value, minimum=1)


def buffer_bytes(name: str, value: str) -> int:
    """A byte budget of at least 1 MiB."""
    return _int(name, value, minimum=1 << 20)


def _int(name: str, value: str, *, minimum: int) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise PulsarOptionError(name, f"expected an integer, got {value!r}") from None
    if number < minimum:
        raise PulsarOptionError(name, f"must be at least {minimum}, got {number}")
    return number


def millis(name: str, value: str) -> float:
    """Milliseconds (at least 1) as seconds."""
    return positive(name, value) / 1000.0


def micros(name: str, value: str) -> float:
    """Microseconds (at least 1) as seconds."""
    return positive(name, value) / 1e6


_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_UNITS_MS["d"] = 24 * _UNITS_MS["h"]
_DURATION = re.compile(r"(\d+)\s*([a-z]+)?")


def duration_ms(name: str, value: str) -> int:
    """A positive duration in Spark's syntax as whole milliseconds (``maxTriggerDelay``):
    an integer with ``us``, ``ms``, ``s``, ``m``/``min``, ``h`` or ``d`` (``15m``, ``30s``,
    ``500ms``); a bare integer is milliseconds, as Spark's ``timeStringAsMs`` reads it."""
    found = _DURATION.fullmatch(value.strip().lower())
    unit = found.group(2) if found else None
    if found is None or (unit is not None and unit not in _UNITS_MS):
        units = ", ".join(_UNITS_MS)
        msg = f"expected a duration such as 15m, 30s or 500ms (units: {units}), got {value!r}"
        raise PulsarOptionError(name, msg)
    ms = int(int(found.group(1)) * _UNITS_MS[unit or "ms"])
    if ms < 1:
        msg = f"expected a duration of at least 1ms, got {value!r}"
        raise PulsarOptionError(name, msg)
    return ms


_CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


def codec(name: str, value: str) -> str | None:
    """A compression codec's name, lower case; None for ``NONE``."""
    found = value.strip().upper()
    if found not in _CODECS:
        raise PulsarOptionError(name, f"expected one of {', '.join(_CODECS)}, got {value!r}")
    return None if found == "NONE" else found.lower()


def subscription(name: str, value: str) -> str:
    """A durable subscription's name (not the prefix of the connector's readers)."""
    found = value.strip()
    if not found or found.startswith("reader-"):
        msg = "is empty or starts with 'reader-', the prefix of the connector's non-durable readers"
        raise PulsarOptionError(name, msg)
    return found


def subscription_mode(name: str, value: str) -> bool:
    """``durable`` (True) or ``nonDurable`` (False), any case."""
    found = {"durable": True, "nondurable": False}.get(value.strip().lower())
    if found is None:
        raise PulsarOptionError(name, f"expected durable or nonDurable, got {value!r}")
    return found


# -- service and topics ----------------------------------------------------------------


def service_url(name: str, value: str) -> str:
    from pulsar_spark.client import InvalidServiceUrl, parse_service_url

    try:
        parse_service_url(value)
    except InvalidServiceUrl as exc:
        raise PulsarOptionError(name, str(exc)) from None
    return value.strip()


def topic(name: str, value: str) -> str:
    """One topic's full name."""
    from pulsar_spark.client import InvalidTopicName, parse_topic

    if "," in value:
        raise PulsarOptionError(name, f"{value!r} holds a comma: use topics for a list")
    try:
        return str(parse_topic(value))
    except InvalidTopicName as exc:
        raise PulsarOptionError(name, str(exc)) from None


def topic_list(name: str, value: str) -> tuple[str, ...]:
    """Comma-separated topics, full names, each once."""
    names = [t.strip() for t in value.split(",") if t.strip()]
    if not names:
        raise PulsarOptionError(name, "is empty")
    return tuple(dict.fromkeys(topic(name, t) for t in names))


def topics_pattern(name: str, value: str) -> str:
    pattern = value.strip()
    if not pattern:
        raise PulsarOptionError(name, "is empty")
    try:
        re.compile(pattern_parts(pattern)[1])
    except re.error as exc:
        raise PulsarOptionError(name, f"is not a valid regex: {exc}") from None
    return pattern


def pattern_parts(pattern: str) -> tuple[str, str]:
    """``topicsPattern`` as (namespace ``tenant/ns``, regex over full topic names).

    ``persistent://tenant/ns/regex`` and ``tenant/ns/regex`` name their namespace;
    a bare regex looks in ``public/default``.
    """
    value = pattern.strip()
    domain, sep, rest = value.partition("://")
    if not sep:
        domain, rest = "persistent", value
    parts = rest.split("/", 2)
    if len(parts) == 3:
        tenant, namespace, regex = parts
    else:
        tenant, namespace, regex = "public", "default", rest
    prefix = f"{re.escape(domain)}://{re.escape(tenant)}/{re.escape(namespace)}/"
    return f"{tenant}/{namespace}", prefix + regex


# -- positions -------------------------------------------------------------------------


_MS = re.compile(r"^-?\d+$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_FRACTION = re.compile(r"(?<=:\d\d)\.(\d+)")


def parse_time(name: str, value: str) -> int:
    """Epoch milliseconds, or ISO-8601 (``2026-11-22T10:00:00Z``; no zone = UTC), as ms."""
    found = value.strip()
    if _MS.match(found):
        return int(found)
    iso = found[:-1] + "+00:00" if found.endswith(("Z", "z")) else found
    # Python 3.10's fromisoformat takes only 3 or 6 digits of fraction.
    iso = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], iso)
    try:
        moment = dt.datetime.fromisoformat(iso)
    except ValueError:
        msg = f"expected epoch milliseconds or an ISO-8601 time, got {value!r}"
        raise PulsarOptionError(name, msg) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return (moment - _EPOCH) // dt.timedelta(milliseconds=1)  # exact, unlike timestamp()


def _time_position(name: str, where: str, value: object, *, ending: bool) -> Position:
    """One publish time: epoch ms or ISO-8601, or StreamNative's -1 (earliest), -2 (latest)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        msg = f"{where}a time is epoch milliseconds, ISO-8601, -1 or -2, got {value!r}"
        raise PulsarOptionError(name, msg)
    text = str(value).strip()
    word = {"-1": "earliest", "-2": "latest"}.get(text, text.lower())
    if word == "earliest":
        if ending:
            raise PulsarOptionError(name, f"{where}an ending time cannot be earliest (-1)")
        return Position.earliest()
    if word == "latest":
        return Position.latest()
    try:
        return Position.at_time(parse_time(name, text))
    except PulsarOptionError as exc:
        raise PulsarOptionError(name, f"{where}{exc.reason}") from None


def _publish_times(name: str, value: str, *, ending: bool) -> OffsetSpec:
    """``startingTime``/``endingTime``: one time for every partition, or JSON per topic
    or partition (StreamNative's ``{"topic": ms}``, also ``{"topic": {"0": ms}}``);
    topics the JSON leaves out read from their first message (start) or to their last
    (end)."""
    found = value.strip()
    if not found.startswith("{"):
        return OffsetSpec(_time_position(name, "", found, ending=ending))
    expected = 'epoch ms, ISO-8601 or JSON like {"persistent://public/default/t": 1700000000000}'
    return _per_topic(name, found, expected, ending=ending, position=_time_position)


def starting_time(name: str, value: str) -> OffsetSpec:
    return _publish_times(name, value, ending=False)


def ending_time(name: str, value: str) -> OffsetSpec:
    return _publish_times(name, value, ending=True)


def _position(name: str, where: str, value: object, *, ending: bool) -> Position:
    """One position inside an offsets JSON: earliest/latest/-2/-1, an id string, or a
    message id's serialized bytes (StreamNative's form, see :func:`_streamnative_position`)."""
    if isinstance(value, bool):
        value = None  # not a number here
    if isinstance(value, list):
        return _streamnative_position(name, where, value, ending=ending)
    word = value.strip().lower() if isinstance(value, str) else None
    if value in (-2, "-2") or word == "earliest":
        if ending:
            raise PulsarOptionError(name, f"{where}an ending position cannot be earliest (-2)")
        return Position.earliest()
    if value in (-1, "-1") or word == "latest":
        return Position.latest()
    if isinstance(value, str):
        try:
            return Position.of(MessageId.parse(value), inclusive=True)
        except ValueError as exc:
            raise PulsarOptionError(name, f"{where}{exc}") from None
    msg = (
        f"{where}a position is 'earliest' (-2), 'latest' (-1), a message id "
        f"'ledger:entry:partition:batch' or its bytes [8, ...], got {value!r}"
    )
    raise PulsarOptionError(name, msg)


def _streamnative_position(name: str, where: str, value: list[object], *, ending: bool) -> Position:
    """A message id as StreamNative's JSON gives it: Java's ``MessageId.toByteArray()``
    as a list of (signed) bytes.

    StreamNative's positions are entries, and both ends are read: a start reads its
    entry from its first message, an end to its last (a batch index does not narrow
    either, as there), so the same job reads the same messages. A chunked message's id
    starts at its first chunk. ``MessageId.earliest``/``latest`` are earliest/latest.
    """
    numbers = [b for b in value if isinstance(b, int) and not isinstance(b, bool)]
    if not value or len(numbers) != len(value) or not all(-128 <= b <= 255 for b in numbers):
        msg = f"{where}a message id's bytes are a list of integers from -128 to 255, got {value!r}"
        raise PulsarOptionError(name, msg)
    try:
        found = id_from_bytes(bytes(b & 0xFF for b in numbers))
    except InvalidMessageId as exc:
        raise PulsarOptionError(name, f"{where}{exc}") from None
    mid = found.message_id
    if mid.is_earliest and ending:
        raise PulsarOptionError(name, f"{where}an ending position cannot be MessageId.earliest")
    if not ending and found.first_chunk is not None:
        mid = found.first_chunk
    entry = MessageId(mid.ledger, mid.entry, found.message_id.partition)
    return Position.of(entry, inclusive=not ending)


def _offsets(name: str, value: str, *, ending: bool) -> OffsetSpec:
    found = value.strip()
    if found.lower() in ("earliest", "latest"):
        return OffsetSpec(_position(name, "", found, ending=ending))
    words = "'latest'" if ending else "'earliest', 'latest'"
    expected = f'{words} or JSON like {{"topic": "ledger:entry:partition:batch"}}'
    return _per_topic(name, found, expected, ending=ending, position=_position)


def _per_topic(
    name: str,
    found: str,
    expected: str,
    *,
    ending: bool,
    position: Callable[..., Position],
) -> OffsetSpec:
    """JSON keyed by topic (a topic-partition key, or a topic's name with a map of
    partition numbers), each value read by ``position``."""
    from pulsar_spark.client import parse_topic

    try:
        data = json.loads(found)
    except ValueError:
        raise PulsarOptionError(name, f"expected {expected}, got {found!r}") from None
    if not isinstance(data, dict) or not data:
        raise PulsarOptionError(name, "the JSON must be a non-empty object keyed by topic")
    by_topic: dict[str, Position] = {}
    by_partition: dict[tuple[str, int], Position] = {}
    for key, item in data.items():
        try:
            parsed = parse_topic(key)
        except ValueError as exc:
            raise PulsarOptionError(name, str(exc)) from None
        where = f"{key!r}: "
        if isinstance(item, dict):  # Kafka style: {"topic": {"0": pos, "1": pos}}
            if parsed.partition >= 0:
                msg = f"{key!r} names a partition; give partitions under the topic's name"
                raise PulsarOptionError(name, msg)
            for part, pos in item.items():
                index = _int(name, str(part), minimum=-1)
                at = f"{key!r} partition {part}: "
                by_partition[(str(parsed), index)] = position(name, at, pos, ending=ending)
        elif parsed.partition >= 0:
            at_partition = (str(parsed.base), parsed.partition)
            by_partition[at_partition] = position(name, where, item, ending=ending)
        else:
            by_topic[str(parsed)] = position(name, where, item, ending=ending)
    default = Position.latest() if ending else Position.earliest()
    return OffsetSpec(default, tuple(sorted(by_topic.items())), tuple(sorted(by_partition.items())))


def starting_offsets(name: str, value: str) -> OffsetSpec:
    return _offsets(name, value, ending=False)


def ending_offsets(name: str, value: str) -> OffsetSpec:
    return _offsets(name, value, ending=True)
