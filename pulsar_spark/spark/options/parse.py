"""Parsed options: :func:`parse_options` turns Spark's option map into :class:`PulsarOptions`.

Spark hands a data source its options as strings in a case-insensitive map.
:func:`parse_options` checks every name against
:data:`~pulsar_spark.spark.options.table.OPTIONS` (any case, aliases
included), parses every value with its row's parser (defaults too), then runs
the checks that involve several options. Every error is a
:class:`PulsarOptionError` naming the option. Which options a read or a write
accepts is :meth:`PulsarOptions.check_scope`'s, from the same table. Nothing
here imports pyspark.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from ..errors import PulsarOptionError

if TYPE_CHECKING:  # the table and parsers load to parse (on the driver), not to unpickle
    from pulsar_spark.client import ChunkLimits
    from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo

    from .auth import AuthSpec
    from .crypto import KeySource
    from .keystore import Secret
    from .table import Option, Scope
    from .values import OffsetSpec

__all__ = [
    "PulsarOptions",
    "parse_options",
]

#: Options Spark itself puts in a source's or sink's option map (lower case, as Spark's
#: Python worker hands them over), not ours to check: ``queryName`` (named stream
#: queries), ``checkpointLocation`` and the asynchronous progress tracking keys of
#: ``DataStreamWriter`` (Spark reads them from the sink's options).
_SPARK_OWN = frozenset({
    "checkpointlocation",
    "queryname",
    "asyncprogresstrackingenabled",
    "asyncprogresstrackingcheckpointintervalms",
    "_asyncprogresstrackingoverridesinksupportcheck",
})  # fmt: skip
#: What ``load([a, b])`` gives a source: a JSON array of paths (ours: topics).
_PATHS = "paths"
_PLUGIN, _PARAMS = "pulsar.client.authPluginClassName", "pulsar.client.authParams"
#: Options of which at most one may be given, and how the error says so.
_SELECTORS = ("topic", "topics", "topicsPattern")
_EXCLUSIVE = (
    ("startingOffsets", "startingTime"),
    ("endingOffsets", "endingTime"),
    ("avroSchema", "jsonSchema"),
    ("avroSchema", "protobufSchema"),
    ("jsonSchema", "protobufSchema"),
)
#: Options that raw mode (``schemaMode=raw``) has no use for.
_TYPED_ONLY = (
    "avroSchema",
    "jsonSchema",
    "protobufSchema",
    "decodeErrorMode",
    "valueSchemaType",
    "keyValueEncoding",
    "recordName",
    "recordNamespace",
)


@dataclass(frozen=True)
class PulsarOptions:
    """Every option, parsed (field names and defaults: the options table). Durations
    are seconds; positions :class:`~pulsar_spark.protocol.ids.position.Position`\\ s."""

    given: tuple[str, ...]  # canonical names of the options given
    service_url: str
    topic: str | None
    topics: tuple[str, ...] | None
    topics_pattern: str | None
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    starting_time: OffsetSpec | None
    ending_time: OffsetSpec | None
    fail_on_data_loss: bool
    min_partitions: int | None
    push_filters: str
    schema_mode: str
    avro_schema: SchemaInfo | None
    json_schema: SchemaInfo | None
    protobuf_schema: SchemaInfo | None
    decode_error_mode: str
    row_layout: str
    value_schema_type: str
    record_name: str
    record_namespace: str | None
    key_value_encoding: KeyValueEncoding | None
    max_records_per_trigger: int | None
    max_bytes_per_trigger: int | None
    min_records_per_trigger: int | None
    max_trigger_delay_ms: int
    subscription_name: str | None
    durable: bool
    receiver_queue_size: int
    read_buffer_bytes: int
    chunk_expiry: float
    max_pending_chunked_messages: int
    drop_incomplete_chunks: bool
    poll_timeout: float
    connect_timeout: float
    operation_timeout: float
    auth: AuthSpec | None
    tls_trust_certs_file: str | None
    tls_allow_insecure: bool
    tls_validate_hostname: bool
    batching: bool
    batch_max_messages: int
    batch_max_bytes: int
    batch_max_delay: float
    compression: str | None
    max_pending_messages: int
    max_pending_bytes: int
    send_timeout: float
    delivery_guarantee: str
    transaction_timeout_ms: int
    transaction_log_topic: str | None
    producer_name_prefix: str | None
    private_key: KeySource | None
    crypto_failure_action: str
    encryption_keys: tuple[str, ...] | None
    public_key: KeySource | None
    listener_name: str | None
    keepalive_interval: int
    use_key_store_tls: bool
    trust_store_type: str
    trust_store_path: str | None
    trust_store_password: Secret | None
    key_store_type: str
    key_store_path: str | None
    key_store_password: Secret | None
    subscription_prefix: str | None
    read_compacted: bool

    def check_scope(self, scope: Scope) -> None:
        """Raise for an option given that applies nowhere in ``scope`` (the flags of what
        is being built: ``Scope.BATCH_READ``, ``Scope.READ``, ``Scope.WRITE``, ...)."""
        from .table import by_spelling

        for name in self.given:
            option = by_spelling(name)
            assert option is not None
            if not option.scope & scope:
                raise PulsarOptionError(name, _out_of_scope(option.scope, scope))

    @property
    def chunk_limits(self) -> ChunkLimits:
        """The bounds of incomplete chunked messages the three chunk options give."""
        from pulsar_spark.client import ChunkLimits

        return ChunkLimits(
            self.max_pending_chunked_messages, self.chunk_expiry, self.drop_incomplete_chunks
        )

    def for_stream_read(self) -> PulsarOptions:
        """These options as a stream reads them: stream defaults for options not given;
        partitions a start's JSON leaves out start where a stream starts, at the latest
        message (as StreamNative's streams do)."""
        from pulsar_spark.protocol.ids.position import Position

        from .table import OPTIONS
        from .values import OffsetSpec

        changes: dict[str, object] = {
            o.field: o.parse(o.name, o.stream_default)
            for o in OPTIONS
            if o.stream_default is not None and o.field and o.name not in self.given
        }
        for field in ("starting_offsets", "starting_time"):
            spec = changes.get(field, getattr(self, field))
            if isinstance(spec, OffsetSpec) and spec.is_json:
                changes[field] = dataclasses.replace(spec, default=Position.latest())
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def _out_of_scope(option: Scope, scope: Scope) -> str:
    from .table import Scope

    if not option & Scope.WRITE and not scope & Scope.READ:
        return "applies to reads only, not to writes"
    if not option & Scope.READ and not scope & Scope.WRITE:
        return "applies to writes only, not to reads"
    if option & Scope.READ == Scope.STREAM_READ:
        return "applies to streaming reads only (spark.readStream)"
    if option & Scope.READ == Scope.BATCH_READ:
        return "applies to batch reads only; a stream has no end"
    return f"applies to {option.label}, not to {scope.label}"  # pragma: no cover


def _unknown(name: str) -> PulsarOptionError:
    import difflib

    from .table import OPTIONS, by_spelling, spellings

    names = sorted({o.name for o in OPTIONS})
    close = difflib.get_close_matches(name.lower(), spellings(), n=1)
    found = by_spelling(close[0]) if close else None
    hint = f" (did you mean {found.name!r}?)" if found else ""
    return PulsarOptionError(name, f"unknown option{hint}; valid options: {', '.join(names)}")


def _given(raw: Mapping[str, str]) -> dict[str, str]:
    """Canonical name -> text of each option given; unknown names and an option given
    under two spellings are errors."""
    from .table import by_spelling

    values: dict[str, str] = {}
    spelled: dict[str, str] = {}
    implied: list[tuple[str, str, str]] = []  # (our option, value, the foreign key)
    for key, value in raw.items():
        if str(key).lower() in _SPARK_OWN:
            continue
        if str(key).lower() == _PATHS:
            implied.append(("topics", ",".join(_paths(str(key), value)), str(key)))
            continue
        option = by_spelling(str(key))
        if option is None:
            text = "" if value is None else str(value)
            instead = _foreign(str(key), text)
            implied += [(name, item, str(key)) for name, item in instead.items()]
            continue
        if option.name in values:
            msg = f"given twice, as {spelled[option.name]!r} and {key!r}"
            raise PulsarOptionError(option.name, msg)
        values[option.name] = "" if value is None else str(value)
        spelled[option.name] = str(key)
    for name, item, key in implied:
        option = by_spelling(name)
        assert option is not None
        if option.name in values and values[option.name].strip().lower() != item.lower():
            msg = f"means {option.name}={item}, but {spelled[option.name]!r} is given too"
            raise PulsarOptionError(key, msg)
        values.setdefault(option.name, item)
        spelled.setdefault(option.name, key)
    return values


def _paths(key: str, value: object) -> list[str]:
    """The topics of ``load([t1, t2, ...])``: Spark passes them as a JSON array."""
    try:
        items = json.loads(str(value))
    except ValueError:
        items = None
    if not isinstance(items, list) or not items or not all(isinstance(i, str) for i in items):
        msg = f"expected a JSON array of topic names (as load([...]) gives), got {value!r}"
        raise PulsarOptionError(key, msg)
    return items


def _foreign(key: str, value: str) -> dict[str, str]:
    """Another connector's option, a Java client field under a passthrough prefix, or
    an error (:mod:`.migration`, :mod:`.passthrough`)."""
    from . import migration, passthrough
    from .table import OPTIONS

    instead = migration.resolve(key, value)
    if instead is not None:
        return instead
    java = passthrough.lookup(key)
    if java is not None:
        return migration.apply(java, key, value)
    if passthrough.prefix_of(key):
        raise passthrough.unknown_key(key, [s for o in OPTIONS for s in (o.name, *o.aliases)])
    raise _unknown(key)


def _check_exclusive(given: Mapping[str, str]) -> None:
    selectors = [n for n in _SELECTORS if n in given]
    if len(selectors) > 1:
        msg = f"give only one of topic, topics or topicsPattern (also given: {selectors[0]})"
        raise PulsarOptionError(selectors[1], msg)
    for offsets, time in _EXCLUSIVE:
        if offsets in given and time in given:
            raise PulsarOptionError(time, f"cannot be combined with {offsets}")
    if given.get("schemaMode", "").strip().lower() == "raw":
        for name in _TYPED_ONLY:
            if name in given:
                msg = "decodes or encodes values: it has no use with schemaMode=raw"
                raise PulsarOptionError(name, msg)


def _value(option: Option, text: str | None) -> object:
    if text is None or (option.required and not text.strip()):
        if option.required:
            raise PulsarOptionError(option.name, f"is required, e.g. {option.example}")
        text = option.default
    return None if text is None else option.parse(option.name, text)


def parse_options(raw: Mapping[str, str]) -> PulsarOptions:
    """Check and parse Spark's option map (any key case).

    Raises:
        PulsarOptionError: naming the option at fault.
    """
    from .auth import auth_spec
    from .keystore import check_key_store_options
    from .table import OPTIONS
    from .values import OffsetSpec

    given = _given(raw)
    _check_exclusive(given)
    values = {option.name: _value(option, given.get(option.name)) for option in OPTIONS}
    start, end = values["startingTime"], values["endingTime"]
    if (
        isinstance(start, OffsetSpec)
        and isinstance(end, OffsetSpec)
        and start.default.kind == end.default.kind == "time"
        and not (start.is_json or end.is_json)
        and ((end.default.time_ms or 0) < (start.default.time_ms or 0))
    ):
        raise PulsarOptionError(option="endingTime", message="is before startingTime")
    if values["subscriptionMode"] is False and values["subscriptionName"] is not None:
        msg = "names a durable subscription: leave it out for subscriptionMode=nonDurable"
        raise PulsarOptionError(option="subscriptionName", message=msg)
    fields = {o.field: values[o.name] for o in OPTIONS if o.field is not None}
    check_key_store_options(given, cast("str | None", values[_PLUGIN]))
    fields["auth"] = auth_spec(
        cast("str | None", values[_PLUGIN]),
        cast("str | None", values[_PARAMS]),
        plugin_name=_PLUGIN,
        params_name=_PARAMS,
    )
    return PulsarOptions(given=tuple(given), **fields)  # type: ignore[arg-type]
