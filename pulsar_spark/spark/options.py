"""The options of ``spark.read/df.write.format("pulsar")``, parsed once.

Spark hands a data source its options as strings in a case-insensitive map.
:func:`parse_options` turns them into a frozen :class:`PulsarOptions`: every
name is checked against :data:`OPTIONS` (case-insensitively, aliases
included), every value is parsed, and every error is a
:class:`PulsarOptionError` naming the option. Nothing here imports pyspark.

Names follow the Kafka and StreamNative connectors: ``service.url``,
``topic``/``topics``/``topicsPattern``, ``startingOffsets``/``endingOffsets``,
``startingTime``/``endingTime``, ``failOnDataLoss``, ``minPartitions``,
``pollTimeoutMs``, and the ``pulsar.client.*``/``pulsar.producer.*`` keys of
the Java client's configuration (each also without its prefix).
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..protocol.message_id import MessageId

__all__ = [
    "OPTIONS",
    "AuthSpec",
    "OffsetSpec",
    "Option",
    "PulsarOptionError",
    "PulsarOptions",
    "markdown_table",
    "parse_options",
    "parse_time",
    "pattern_parts",
]

READ, WRITE, BOTH = "read", "write", "read and write"


class PulsarOptionError(ValueError):
    """A bad, missing, unknown or conflicting option; ``option`` names it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"pulsar option {option!r}: {message}")
        self.option = option


@dataclass(frozen=True)
class Option:
    """One option: its canonical spelling, where it applies, other spellings."""

    name: str
    scope: str
    default: str
    doc: str
    aliases: tuple[str, ...] = ()


_C = "pulsar.client."
_P = "pulsar.producer."

#: Every option, in the order the README's table lists them.
OPTIONS: tuple[Option, ...] = (
    Option("service.url", BOTH, "(required)", "`pulsar://host:6650` or `pulsar+ssl://host:6651`",
           ("serviceUrl", _C + "serviceUrl")),
    Option("topic", BOTH, "", "one topic (a partitioned topic reads every partition); "
           "for writes, the topic every row goes to; `load(\"orders\")` sets it too", ("path",)),
    Option("topics", READ, "", "a comma-separated list of topics"),
    Option("topicsPattern", READ, "", "a regex over the topics of one namespace, e.g. "
           "`persistent://public/default/orders-.*` (no namespace: `public/default`)"),
    Option("startingOffsets", READ, "earliest", "`earliest`, `latest` or JSON per topic or "
           "partition (inclusive); streams default to `latest`"),
    Option("endingOffsets", READ, "latest", "`latest` or JSON per topic or partition "
           "(exclusive; `latest` includes the last message)"),
    Option("startingTime", READ, "", "publish time (epoch ms or ISO-8601) to start at, "
           "inclusive; excludes `startingOffsets`", ("startingTimestamp",)),
    Option("endingTime", READ, "", "publish time (epoch ms or ISO-8601) to stop before, "
           "exclusive; excludes `endingOffsets`", ("endingTimestamp",)),
    Option("failOnDataLoss", READ, "true", "fail when a starting message id (or a stream's "
           "position) no longer exists (retention, truncation, deletion); false: log a warning "
           "and read on from the first message still available"),
    Option("minPartitions", READ, "", "at least this many Spark tasks: large topic "
           "partitions are split by entry ranges (or publish-time ranges across ledgers)"),
    Option("maxRecordsPerTrigger", READ, "", "streams: rows per micro-batch at most, shared "
           "fairly by the partitions (Spark 4.2+)", ("maxOffsetsPerTrigger",)),
    Option("subscriptionName", READ, "", "streams: a durable subscription moved to each "
           "committed micro-batch's end (the broker's backlog shows the query's progress); "
           "none by default"),
    Option("receiverQueueSize", READ, "1000", "messages in flight per reading task",
           ("pulsar.reader.receiverQueueSize", "pulsar.consumer.receiverQueueSize")),
    Option("pollTimeoutMs", READ, "120000", "how long a reading task may go without "
           "progress (reconnects included) before it fails"),
    Option(_C + "connectionTimeoutMs", BOTH, "10000", "TCP connect and handshake timeout",
           ("connectionTimeoutMs",)),
    Option(_C + "operationTimeoutMs", BOTH, "30000", "lookups, subscribe, producer creation",
           ("operationTimeoutMs",)),
    Option(_C + "authPluginClassName", BOTH, "", "`org.apache.pulsar.client.impl.auth."
           "AuthenticationToken`, `...AuthenticationBasic`, `...AuthenticationTls`, "
           "`...oauth2.AuthenticationOAuth2`, or `token`, `basic`, `tls`, `oauth2`",
           ("authPluginClassName",)),
    Option(_C + "authParams", BOTH, "", "the plugin's parameters, as the Java client takes "
           "them (`token:...`, `file:///...`, JSON, `key:value,key:value`)", ("authParams",)),
    Option(_C + "tlsTrustCertsFilePath", BOTH, "", "CA bundle for `pulsar+ssl://`",
           ("tlsTrustCertsFilePath",)),
    Option(_C + "tlsAllowInsecureConnection", BOTH, "false", "accept any server certificate",
           ("tlsAllowInsecureConnection",)),
    Option(_C + "tlsHostnameVerificationEnable", BOTH, "true", "check the server "
           "certificate's host name (the Java client's default is false)",
           ("tlsHostnameVerificationEnable",)),
    Option(_P + "batchingEnabled", WRITE, "true", "gather messages into batches",
           ("batchingEnabled",)),
    Option(_P + "batchingMaxMessages", WRITE, "1000", "messages per batch at most",
           ("batchingMaxMessages",)),
    Option(_P + "batchingMaxBytes", WRITE, "131072", "bytes per batch at most",
           ("batchingMaxBytes",)),
    Option(_P + "batchingMaxPublishDelayMicros", WRITE, "10000", "how long a batch may wait "
           "to fill", ("batchingMaxPublishDelayMicros",)),
    Option(_P + "compressionType", WRITE, "NONE", "NONE, LZ4, ZLIB, ZSTD or SNAPPY",
           ("compressionType",)),
    Option(_P + "maxPendingMessages", WRITE, "10000", "messages sent and not yet "
           "acknowledged, per producer", ("maxPendingMessages",)),
    Option(_P + "sendTimeoutMs", WRITE, "30000", "how long a message may wait for its "
           "receipt (reconnects included) before the task fails", ("sendTimeoutMs",)),
    Option("producerNamePrefix", WRITE, "", "producer names become "
           "`<prefix>-<stage>-<task>-<attempt>`; the broker picks names otherwise",
           (_P + "producerName",)),
)

_BY_NAME: dict[str, Option] = {}
for _option in OPTIONS:
    for _spelling in (_option.name, *_option.aliases):
        _BY_NAME[_spelling.lower()] = _option

_AUTH_CLASSES = {
    "org.apache.pulsar.client.impl.auth.authenticationtoken": "token",
    "org.apache.pulsar.client.impl.auth.authenticationbasic": "basic",
    "org.apache.pulsar.client.impl.auth.authenticationtls": "tls",
    "org.apache.pulsar.client.impl.auth.oauth2.authenticationoauth2": "oauth2",
    "token": "token", "basic": "basic", "tls": "tls", "oauth2": "oauth2",
}
_CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")
#: Options Spark itself passes to a streaming sink, not ours to check.
_SPARK_OWN = frozenset({"checkpointlocation"})


@dataclass(frozen=True)
class OffsetSpec:
    """``startingOffsets``/``endingOffsets``: a default and per-topic/partition positions.

    A position is ``"earliest"``, ``"latest"`` or a message id string
    ``ledger:entry:partition:batch``. ``by_topic`` maps a full topic name to a
    position for every partition (or, for an id, the partition the id names);
    ``by_partition`` maps ``(full topic name, partition)`` to a position.
    """

    default: str
    by_topic: tuple[tuple[str, str], ...] = ()
    by_partition: tuple[tuple[tuple[str, int], str], ...] = ()

    @property
    def is_json(self) -> bool:
        return bool(self.by_topic or self.by_partition)


@dataclass(frozen=True)
class AuthSpec:
    """The authentication plugin and its parameters, built into a client-side
    :class:`~pulsar_spark.client.Authentication` in each task (those hold locks
    and are not picklable)."""

    kind: str  # token, basic, tls, oauth2
    params: tuple[tuple[str, str], ...]

    def __repr__(self) -> str:  # never print credentials
        return f"AuthSpec(kind={self.kind!r}, params=<{len(self.params)} hidden>)"


@dataclass(frozen=True)
class PulsarOptions:
    """Every option, parsed. Times are seconds; publish times epoch ms."""

    given: tuple[str, ...]  # canonical names of the options given
    service_url: str
    topic: str | None = None
    topics: tuple[str, ...] | None = None
    topics_pattern: str | None = None
    starting_offsets: OffsetSpec = OffsetSpec("earliest")
    ending_offsets: OffsetSpec = OffsetSpec("latest")
    starting_time: int | None = None
    ending_time: int | None = None
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_trigger: int | None = None
    subscription_name: str | None = None
    receiver_queue_size: int = 1000
    poll_timeout: float = 120.0
    connect_timeout: float = 10.0
    operation_timeout: float = 30.0
    auth: AuthSpec | None = None
    tls_trust_certs_file: str | None = None
    tls_allow_insecure: bool = False
    tls_validate_hostname: bool = True
    batching: bool = True
    batch_max_messages: int = 1000
    batch_max_bytes: int = 128 * 1024
    batch_max_delay: float = 0.01
    compression: str | None = None
    max_pending_messages: int = 10_000
    send_timeout: float = 30.0
    producer_name_prefix: str | None = None

    def check_scope(self, scope: str) -> None:
        """Raise for an option given that does not apply to ``scope`` (read or write)."""
        for name in self.given:
            option = _BY_NAME[name.lower()]
            if option.scope not in (scope, BOTH):
                other = "reads" if option.scope == READ else "writes"
                raise PulsarOptionError(name, f"applies to {other} only, not to {scope}s")


# -- value parsers -----------------------------------------------------------------


def _bool(name: str, text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "false"):
        return value == "true"
    raise PulsarOptionError(name, f"expected true or false, got {text!r}")


def _int(name: str, text: str, *, minimum: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise PulsarOptionError(name, f"expected an integer, got {text!r}") from None
    if value < minimum:
        raise PulsarOptionError(name, f"must be at least {minimum}, got {value}")
    return value


def _seconds(name: str, text: str, *, scale: float = 1000.0) -> float:
    return _int(name, text, minimum=1) / scale


_MS = re.compile(r"^-?\d+$")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_FRACTION = re.compile(r"(?<=:\d\d)\.(\d+)")


def parse_time(name: str, text: str) -> int:
    """Epoch milliseconds, or ISO-8601 (``2026-11-22T10:00:00Z``; no zone = UTC), as ms."""
    value = text.strip()
    if _MS.match(value):
        return int(value)
    iso = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    # Python 3.10's fromisoformat takes only 3 or 6 digits of fraction.
    iso = _FRACTION.sub(lambda m: "." + (m.group(1) + "000000")[:6], iso)
    try:
        moment = dt.datetime.fromisoformat(iso)
    except ValueError:
        msg = f"expected epoch milliseconds or an ISO-8601 time, got {text!r}"
        raise PulsarOptionError(name, msg) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return (moment - _EPOCH) // dt.timedelta(milliseconds=1)  # exact, unlike timestamp()


def _position(name: str, value: object, *, ending: bool) -> str:
    """One position inside an offsets JSON: earliest/latest/-2/-1 or an id string."""
    if isinstance(value, bool):
        value = None  # not a number here
    if value in (-2, "-2") or (isinstance(value, str) and value.strip().lower() == "earliest"):
        if ending:
            raise PulsarOptionError(name, "an ending position cannot be earliest (-2)")
        return "earliest"
    if value in (-1, "-1") or (isinstance(value, str) and value.strip().lower() == "latest"):
        return "latest"
    if isinstance(value, str):
        try:
            return str(MessageId.parse(value))
        except ValueError as exc:
            raise PulsarOptionError(name, str(exc)) from None
    msg = (f"a position is 'earliest' (-2), 'latest' (-1) or a message id "
           f"'ledger:entry:partition:batch', got {value!r}")
    raise PulsarOptionError(name, msg)


def _offsets(name: str, text: str, *, ending: bool) -> OffsetSpec:
    from ..client.names import parse_topic

    value = text.strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(_position(name, value, ending=ending))
    try:
        data = json.loads(value)
    except ValueError:
        allowed = "'latest'" if ending else "'earliest', 'latest'"
        msg = f"expected {allowed} or JSON like {{\"topic\": \"ledger:entry:partition:batch\"}}"
        raise PulsarOptionError(name, f"{msg}, got {text!r}") from None
    if not isinstance(data, dict) or not data:
        raise PulsarOptionError(name, "the JSON must be a non-empty object keyed by topic")
    by_topic: dict[str, str] = {}
    by_partition: dict[tuple[str, int], str] = {}
    for key, item in data.items():
        try:
            topic = parse_topic(key)
        except ValueError as exc:
            raise PulsarOptionError(name, str(exc)) from None
        if isinstance(item, dict):  # Kafka style: {"topic": {"0": pos, "1": pos}}
            if topic.partition >= 0:
                msg = f"{key!r} names a partition; give partitions under the topic's name"
                raise PulsarOptionError(name, msg)
            for part, pos in item.items():
                index = _int(name, str(part), minimum=-1)
                by_partition[(str(topic), index)] = _position(name, pos, ending=ending)
        elif topic.partition >= 0:
            by_partition[(str(topic.base), topic.partition)] = _position(name, item,
                                                                         ending=ending)
        else:
            by_topic[str(topic)] = _position(name, item, ending=ending)
    default = "latest" if ending else "earliest"
    return OffsetSpec(default, tuple(sorted(by_topic.items())),
                      tuple(sorted(by_partition.items())))


def _split_params(name: str, text: str) -> dict[str, str]:
    """The Java client's two parameter formats: JSON, or ``key:value,key:value``."""
    value = text.strip()
    if value.startswith("{"):
        try:
            data = json.loads(value)
        except ValueError:
            raise PulsarOptionError(name, "is not valid JSON") from None
        if not isinstance(data, dict):
            raise PulsarOptionError(name, "must be a JSON object")
        return {str(k): str(v) for k, v in data.items()}
    params = {}
    for part in value.split(","):
        key, sep, item = part.partition(":")
        if not sep:
            raise PulsarOptionError(name, "expected JSON or key:value,key:value")
        params[key.strip()] = item.strip()
    return params


def _auth(plugin: str | None, params: str | None) -> AuthSpec | None:
    plugin_name, params_name = _C + "authPluginClassName", _C + "authParams"
    if plugin is None:
        if params is not None:
            raise PulsarOptionError(params_name, f"needs {plugin_name}")
        return None
    kind = _AUTH_CLASSES.get(plugin.strip().lower())
    if kind is None:
        known = sorted(k for k in _AUTH_CLASSES if "." in k)
        short = ", ".join(sorted(set(_AUTH_CLASSES.values())))
        msg = f"unsupported plugin {plugin!r}; supported: {', '.join(known)} (or {short})"
        raise PulsarOptionError(plugin_name, msg)
    text = (params or "").strip()
    if kind == "token":
        # token:<jwt>, file:///path, {"token": ...} or {"file": ...}, or the bare token.
        if text.startswith("{"):
            found = _split_params(params_name, text)
            items = {k: v for k, v in found.items() if k in ("token", "file")}
        elif text.startswith("token:"):
            items = {"token": text[len("token:"):]}
        elif text.startswith("file:"):
            items = {"file": text}
        else:
            items = {"token": text} if text else {}
        if not items:
            raise PulsarOptionError(params_name, "token authentication needs token:<jwt> "
                                                 "or file:///path/to/token")
        return AuthSpec(kind, tuple(sorted(items.items())))
    if not text:
        raise PulsarOptionError(params_name, f"{kind} authentication needs parameters")
    found = _split_params(params_name, text)
    required = {"basic": ("userId", "password"), "tls": ("tlsCertFile", "tlsKeyFile"),
                "oauth2": ("issuerUrl",)}[kind]
    missing = [k for k in required if not found.get(k)]
    if kind == "oauth2" and not (found.get("privateKey") or (
            found.get("clientId") and found.get("clientSecret"))):
        missing.append("privateKey (or clientId and clientSecret)")
    if missing:
        raise PulsarOptionError(params_name, f"{kind} authentication needs {', '.join(missing)}")
    return AuthSpec(kind, tuple(sorted(found.items())))


# -- the whole set -------------------------------------------------------------------


def markdown_table() -> str:
    """The options reference as a Markdown table, generated from :data:`OPTIONS` (the
    README carries it between ``<!-- options -->`` markers; a test keeps them equal)."""
    lines = ["| option | applies to | default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        name = f"`{option.name}`"
        if option.aliases:
            name += " (also " + ", ".join(f"`{a}`" for a in option.aliases) + ")"
        lines.append(f"| {name} | {option.scope} | {option.default} | {option.doc} |")
    return "\n".join(lines)


def _unknown(name: str) -> PulsarOptionError:
    spellings = sorted({o.name for o in OPTIONS})
    close = difflib.get_close_matches(name.lower(), list(_BY_NAME), n=1)
    hint = f" (did you mean {_BY_NAME[close[0]].name!r}?)" if close else ""
    return PulsarOptionError(
        name, f"unknown option{hint}; valid options: {', '.join(spellings)}"
    )


def parse_options(raw: Mapping[str, str]) -> PulsarOptions:
    """Check and parse Spark's option map (any key case).

    Raises:
        PulsarOptionError: naming the option at fault.
    """
    values: dict[str, str] = {}
    spelled: dict[str, str] = {}
    for key, value in raw.items():
        if str(key).lower() in _SPARK_OWN:
            continue
        option = _BY_NAME.get(str(key).lower())
        if option is None:
            raise _unknown(str(key))
        if option.name in values:
            msg = f"given twice, as {spelled[option.name]!r} and {key!r}"
            raise PulsarOptionError(option.name, msg)
        values[option.name] = "" if value is None else str(value)
        spelled[option.name] = str(key)

    def get(name: str) -> str | None:
        return values.get(name)

    kwargs: dict[str, object] = {"given": tuple(values)}
    url = get("service.url")
    if not url or not url.strip():
        raise PulsarOptionError(option="service.url", message="is required, e.g. pulsar://localhost:6650")
    from ..client.errors import InvalidServiceUrl
    from ..client.names import parse_service_url

    try:
        parse_service_url(url)
    except InvalidServiceUrl as exc:
        raise PulsarOptionError(option="service.url", message=str(exc)) from None
    kwargs["service_url"] = url.strip()

    selectors = [n for n in ("topic", "topics", "topicsPattern") if get(n) is not None]
    if len(selectors) > 1:
        raise PulsarOptionError(selectors[1], f"give only one of topic, topics or "
                                              f"topicsPattern (also given: {selectors[0]})")
    if get("topic") is not None:
        kwargs["topic"] = _topic("topic", get("topic") or "")
    if get("topics") is not None:
        names = [t.strip() for t in (get("topics") or "").split(",") if t.strip()]
        if not names:
            raise PulsarOptionError(option="topics", message="is empty")
        kwargs["topics"] = tuple(dict.fromkeys(_topic("topics", t) for t in names))
    if get("topicsPattern") is not None:
        pattern = (get("topicsPattern") or "").strip()
        if not pattern:
            raise PulsarOptionError(option="topicsPattern", message="is empty")
        try:
            re.compile(pattern_parts(pattern)[1])
        except re.error as exc:
            msg = f"is not a valid regex: {exc}"
            raise PulsarOptionError(option="topicsPattern", message=msg) from None
        kwargs["topics_pattern"] = pattern

    for offsets, time in (("startingOffsets", "startingTime"), ("endingOffsets", "endingTime")):
        if get(offsets) is not None and get(time) is not None:
            raise PulsarOptionError(time, f"cannot be combined with {offsets}")
    if get("startingOffsets") is not None:
        kwargs["starting_offsets"] = _offsets("startingOffsets", get("startingOffsets") or "",
                                              ending=False)
    if get("endingOffsets") is not None:
        kwargs["ending_offsets"] = _offsets("endingOffsets", get("endingOffsets") or "",
                                            ending=True)
    if get("startingTime") is not None:
        kwargs["starting_time"] = parse_time("startingTime", get("startingTime") or "")
    if get("endingTime") is not None:
        kwargs["ending_time"] = parse_time("endingTime", get("endingTime") or "")
    start, end = kwargs.get("starting_time"), kwargs.get("ending_time")
    if isinstance(start, int) and isinstance(end, int) and end < start:
        raise PulsarOptionError(option="endingTime", message="is before startingTime")

    simple: list[tuple[str, str, object]] = [
        ("failOnDataLoss", "fail_on_data_loss", _bool),
        ("minPartitions", "min_partitions", lambda n, t: _int(n, t, minimum=1)),
        ("maxRecordsPerTrigger", "max_records_per_trigger",
         lambda n, t: _int(n, t, minimum=1)),
        ("receiverQueueSize", "receiver_queue_size", lambda n, t: _int(n, t, minimum=1)),
        ("pollTimeoutMs", "poll_timeout", _seconds),
        (_C + "connectionTimeoutMs", "connect_timeout", _seconds),
        (_C + "operationTimeoutMs", "operation_timeout", _seconds),
        (_C + "tlsAllowInsecureConnection", "tls_allow_insecure", _bool),
        (_C + "tlsHostnameVerificationEnable", "tls_validate_hostname", _bool),
        (_P + "batchingEnabled", "batching", _bool),
        (_P + "batchingMaxMessages", "batch_max_messages", lambda n, t: _int(n, t, minimum=1)),
        (_P + "batchingMaxBytes", "batch_max_bytes", lambda n, t: _int(n, t, minimum=1)),
        (_P + "batchingMaxPublishDelayMicros", "batch_max_delay",
         lambda n, t: _seconds(n, t, scale=1e6)),
        (_P + "maxPendingMessages", "max_pending_messages", lambda n, t: _int(n, t, minimum=1)),
        (_P + "sendTimeoutMs", "send_timeout", _seconds),
    ]
    for name, attr, parse in simple:
        text = get(name)
        if text is not None:
            kwargs[attr] = parse(name, text)  # type: ignore[operator]

    codec = get(_P + "compressionType")
    if codec is not None:
        if codec.strip().upper() not in _CODECS:
            raise PulsarOptionError(_P + "compressionType",
                                    f"expected one of {', '.join(_CODECS)}, got {codec!r}")
        kwargs["compression"] = None if codec.strip().upper() == "NONE" else codec.strip().lower()
    trust = get(_C + "tlsTrustCertsFilePath")
    if trust is not None:
        if not trust.strip():
            raise PulsarOptionError(_C + "tlsTrustCertsFilePath", "is empty")
        kwargs["tls_trust_certs_file"] = trust.strip()
    subscription = get("subscriptionName")
    if subscription is not None:
        if not subscription.strip() or subscription.strip().startswith("reader-"):
            msg = ("is empty or starts with 'reader-', the prefix of the connector's "
                   "non-durable readers")
            raise PulsarOptionError(option="subscriptionName", message=msg)
        kwargs["subscription_name"] = subscription.strip()
    prefix = get("producerNamePrefix")
    if prefix is not None:
        if not prefix.strip():
            raise PulsarOptionError(option="producerNamePrefix", message="is empty")
        kwargs["producer_name_prefix"] = prefix.strip()
    kwargs["auth"] = _auth(get(_C + "authPluginClassName"), get(_C + "authParams"))
    return PulsarOptions(**kwargs)  # type: ignore[arg-type]


def _topic(option: str, name: str) -> str:
    from ..client.errors import InvalidTopicName
    from ..client.names import parse_topic

    if "," in name:
        raise PulsarOptionError(option, f"{name!r} holds a comma: use topics for a list")
    try:
        return str(parse_topic(name))
    except InvalidTopicName as exc:
        raise PulsarOptionError(option, str(exc)) from None


def pattern_parts(pattern: str) -> tuple[str, str]:
    """``topicsPattern`` as (namespace ``tenant/ns``, regex over full topic names).

    ``persistent://tenant/ns/regex`` and ``tenant/ns/regex`` name their namespace;
    a bare regex looks in ``public/default``.
    """
    text = pattern.strip()
    domain, sep, rest = text.partition("://")
    if not sep:
        domain, rest = "persistent", text
    parts = rest.split("/", 2)
    if len(parts) == 3:
        tenant, namespace, regex = parts
    else:
        tenant, namespace, regex = "public", "default", rest
    return f"{tenant}/{namespace}", f"{re.escape(domain)}://{re.escape(tenant)}/" \
                                    f"{re.escape(namespace)}/{regex}"

