"""Other connectors' options: what each of StreamNative's, Databricks' and Kafka's does here.

A job moved from StreamNative's connector, Databricks' Pulsar source or Spark's
Kafka source keeps its ``.option(...)`` lines. Options with the same meaning
here are aliases on their :data:`~.table.OPTIONS` row (the ``ALIAS``
rows below only document them). Every other option of theirs is one
:class:`Foreign` row: ``IGNORED`` (accepted, with one WARNING per process
saying why it has no effect here), ``REFUSED`` (an error saying what to do
instead), or ``BY_VALUE`` (the value decides: a value meaning what we do
anyway is accepted, one we do not offer is an error, and
``allowDifferentTopicSchemas=true`` becomes ``schemaMode=raw``). The Java
client's ``pulsar.client.*``, ``pulsar.reader.*`` and ``pulsar.producer.*``
keys are :mod:`.passthrough`'s. :func:`resolve` is what
:func:`~.parse.parse_options` asks about a name the options table does not
know. No warning or error shows a value: some are passwords. Nothing here
imports pyspark.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import PulsarOptionError

__all__ = ["FOREIGN", "Foreign", "Treatment", "apply", "lookup", "resolve", "warn_once", "warned"]

log = logging.getLogger(__name__)


class Treatment(enum.Enum):
    """What happens to one of their options here."""

    ALIAS = "same meaning"  # a spelling of one of our rows
    IGNORED = "accepted, no effect (one WARNING)"
    REFUSED = "error"
    BY_VALUE = "depends on the value"


#: What ``decide(name, value)`` of a BY_VALUE row returns: our options to set instead
#: (an empty dict: accepted as it is). It raises for a value we do not offer.
Decide = Callable[[str, str], dict[str, str]]


@dataclass(frozen=True)
class Foreign:
    """One option of another connector: ``name`` (a ``.*`` suffix: every key under that
    prefix), where it comes from, what it does here (``note``: the words of the
    migration table in ``docs/guides/migrating.md`` and the warning's or error's text)
    and, for ``ALIAS``, our option it spells."""

    name: str
    origin: str
    kind: Treatment
    note: str
    target: str | None = None
    decide: Decide | None = None
    #: A value the test feeds through the parser.
    example: str = "true"


def _bool(name: str, value: str) -> bool:
    found = value.strip().lower()
    if found not in ("true", "false"):
        raise PulsarOptionError(name, f"expected true or false, got {value!r}")
    return found == "true"


def _only_false(instead: str) -> Decide:
    """false is what we do anyway; true is an error saying ``instead``."""

    def decide(name: str, value: str) -> dict[str, str]:
        if _bool(name, value):
            raise PulsarOptionError(name, instead)
        return {}

    return decide


def _different_schemas(name: str, value: str) -> dict[str, str]:
    return {"schemaMode": "raw"} if _bool(name, value) else {}


SN, DB, BOTH, KAFKA = "StreamNative", "Databricks", "StreamNative, Databricks", "Kafka"
_NO_ADMIN = (
    "has no effect here: the connector needs no admin API (partitions, topics, last "
    "message ids and publish times all come over the binary protocol)"
)
_WAIT = (
    "is not offered: this connector does not wait for topics to appear; create the "
    "topics before the query starts (pulsar-admin topics create), or remove this option"
)

# fmt: off
#: Every option of StreamNative's README and of Databricks' Pulsar documentation (and
#: the Kafka source's that Kafka users bring), in the order of the migration table of
#: ``docs/guides/migrating.md``.
FOREIGN: tuple[Foreign, ...] = (
    Foreign("service.url", BOTH, Treatment.ALIAS, "same", "service.url",
            example="pulsar://localhost:6650"),
    Foreign("serviceUrl", DB, Treatment.ALIAS, "same (`read_pulsar`'s spelling)", "service.url",
            example="pulsar://localhost:6650"),
    Foreign("admin.url", BOTH, Treatment.IGNORED, _NO_ADMIN, example="http://localhost:8080"),
    Foreign("pulsar.admin.*", BOTH, Treatment.IGNORED, _NO_ADMIN, example="token"),
    Foreign("topic", BOTH, Treatment.ALIAS, "same", "topic", example="t"),
    Foreign("topics", BOTH, Treatment.ALIAS, "same", "topics", example="a,b"),
    Foreign("topicsPattern", BOTH, Treatment.ALIAS,
            "same (a Java regex; a name without a namespace means `public/default`)",
            "topicsPattern", example="persistent://public/default/t-.*"),
    Foreign("startingOffsets", BOTH, Treatment.ALIAS,
            "same: `earliest`, `latest` and their JSON (`JsonUtils.topicOffsets`: per "
            "topic-partition, a message id's `toByteArray()` bytes, `MessageId.earliest`/"
            "`latest` too), read as they read it: the id's whole entry, that message included "
            "(a batch index does not narrow it); topics left out start at `earliest` (batch) "
            "or `latest` (streams). Readable ids (`ledger:entry:partition:batch`, one "
            "message) may be mixed in", "startingOffsets", example="earliest"),
    Foreign("endingOffsets", SN, Treatment.ALIAS,
            "same: `latest` and their JSON, whose ids are read up to their entry's last "
            "message (their end message is included, as there; readable ids are exclusive "
            "ends); topics left out end at `latest`", "endingOffsets", example="latest"),
    Foreign("startingTime", BOTH, Treatment.ALIAS,
            "same: epoch ms or their JSON per topic-partition (`{\"topic\": ms}`, -1 "
            "earliest, -2 latest; topics left out start at `earliest`, streams `latest`), "
            "the first message published at or after it; ISO-8601 also taken",
            "startingTime", example="1700000000000"),
    Foreign("endingTime", SN, Treatment.ALIAS,
            "same values as startingTime (JSON: topics left out end at `latest`); differs: "
            "the read stops before the first message published at or after it, where "
            "theirs also returned that message's entry (so `[t1, t2)` and `[t2, t3)` "
            "overlapped; Kafka's endingTimestamp is exclusive too)",
            "endingTime", example="1700000000000"),
    Foreign("failOnDataLoss", BOTH, Treatment.ALIAS,
            "same; the default is `true` (StreamNative's code defaulted to false)",
            "failOnDataLoss", example="false"),
    Foreign("pollTimeoutMs", BOTH, Treatment.ALIAS,
            "how long a reading task may go without progress before it fails",
            "pollTimeoutMs", example="60000"),
    Foreign("predefinedSubscription", BOTH, Treatment.ALIAS,
            "same for streams: names the query's durable subscription (every stream has "
            "one, `pulsar-spark-stream-<hex>` by default), moved to each committed "
            "micro-batch's end and kept when the query stops (batch reads leave nothing on "
            "the broker and refuse it)", "subscriptionName", example="my-sub"),
    Foreign("subscriptionPrefix", BOTH, Treatment.ALIAS,
            "same: every subscription the connector makes starts with it "
            "(`<prefix>-reader-<hex>` for non-durable readers, "
            "`<prefix>-pulsar-spark-stream-<hex>` for a stream's durable one), so a "
            "namespace with `subscriptionAuthMode=Prefix` accepts them when the prefix is "
            "the role",
            "subscriptionPrefix", example="team-a"),
    Foreign("maxBytesPerTrigger", BOTH, Treatment.ALIAS,
            "same (bytes of payload per micro-batch, shared fairly by the partitions; at "
            "least one message each micro-batch)", "maxBytesPerTrigger", example="1048576"),
    Foreign("waitingForNonExistedTopic", SN, Treatment.BY_VALUE,
            "`false`: accepted (what this connector does); `true`: error, " + _WAIT,
            decide=_only_false(_WAIT)),
    Foreign("allowDifferentTopicSchemas", SN, Treatment.BY_VALUE,
            "`true`: same as `schemaMode=raw` (binary `value`, no schema); `false`: "
            "accepted (topics are decoded with their schemas)",
            decide=_different_schemas),
    Foreign("pulsarClientAuthPluginClassName", DB, Treatment.ALIAS, "same (`read_pulsar`)",
            "pulsar.client.authPluginClassName", example="token"),
    Foreign("pulsarClientAuthParams", DB, Treatment.ALIAS, "same (`read_pulsar`)",
            "pulsar.client.authParams", example="token:abc"),
    Foreign("pulsarClientUseKeyStoreTls", DB, Treatment.ALIAS, "same (`read_pulsar`)",
            "pulsar.client.useKeyStoreTls", example="false"),
    Foreign("pulsarClientTlsTrustStoreType", DB, Treatment.ALIAS, "same (`read_pulsar`)",
            "pulsar.client.tlsTrustStoreType", example="PKCS12"),
    Foreign("pulsarClientTlsTrustStorePath", DB, Treatment.ALIAS, "same (`read_pulsar`)",
            "pulsar.client.tlsTrustStorePath", example="/tmp/trust.p12"),
    Foreign("pulsarClientTlsTrustStorePassword", DB, Treatment.ALIAS, "same (`read_pulsar`)",
            "pulsar.client.tlsTrustStorePassword", example="secret"),
    Foreign("readCompacted", SN, Treatment.ALIAS,
            "same (batch and stream reads of the compacted view: the latest message per "
            "key up to the compaction horizon, then every message)", "readCompacted",
            example="true"),
    Foreign("maxOffsetsPerTrigger", KAFKA, Treatment.ALIAS, "same (messages per micro-batch)",
            "maxRecordsPerTrigger", example="1000"),
    Foreign("minOffsetsPerTrigger", KAFKA, Treatment.ALIAS,
            "same (messages a micro-batch waits for, up to maxTriggerDelay; ignored by "
            "Trigger.AvailableNow)", "minRecordsPerTrigger", example="1000"),
    Foreign("maxTriggerDelay", KAFKA, Treatment.ALIAS,
            "same (Spark's durations, default 15m; needs minOffsetsPerTrigger)",
            "maxTriggerDelay", example="15m"),
    Foreign("startingTimestamp", KAFKA, Treatment.ALIAS, "same (publish time)", "startingTime",
            example="1700000000000"),
    Foreign("endingTimestamp", KAFKA, Treatment.ALIAS, "same (publish time)", "endingTime",
            example="1700000000000"),
    Foreign("subscribe", KAFKA, Treatment.REFUSED, "is Kafka's: use topics (a comma list)",
            example="a,b"),
    Foreign("subscribePattern", KAFKA, Treatment.REFUSED,
            "is Kafka's: use topicsPattern (a regex over one namespace's topics)",
            example="t-.*"),
    Foreign("kafka.bootstrap.servers", KAFKA, Treatment.REFUSED,
            "is Kafka's: use service.url (pulsar://host:6650)", example="host:9092"),
    Foreign("includeHeaders", KAFKA, Treatment.IGNORED,
            "has no effect here: message properties are always read, in the `properties` "
            "column (a map), and written from it"),
)
# fmt: on

_EXACT = {f.name.lower(): f for f in FOREIGN if not f.name.endswith(".*")}
_PREFIXES = tuple((f.name[:-1].lower(), f) for f in FOREIGN if f.name.endswith(".*"))
_warned: set[str] = set()


def warned() -> frozenset[str]:
    """Names (lower case) warned about in this process."""
    return frozenset(_warned)


def warn_once(name: str, note: str) -> None:
    """One WARNING per process and option name; never the value."""
    key = name.lower()
    if key in _warned:
        return
    _warned.add(key)
    log.warning("pulsar option %r %s", name, note)


def lookup(key: str) -> Foreign | None:
    """The row for ``key`` (any case), by name or by prefix."""
    found = _EXACT.get(key.lower())
    if found is None:
        found = next((f for p, f in _PREFIXES if key.lower().startswith(p)), None)
    return found


def resolve(key: str, value: str) -> dict[str, str] | None:
    """What option ``key`` (not in the options table) means here: our options to set
    instead (possibly none), or None when it is not another connector's option.

    Raises:
        PulsarOptionError: naming ``key``, for an option or value we do not offer.
    """
    row = lookup(key)
    if row is None or row.kind is Treatment.ALIAS:
        return None
    return apply(row, key, value)


def apply(row: Foreign, key: str, value: str) -> dict[str, str]:
    """What ``row`` (not an ALIAS) does with ``key`` given as ``value``; see :func:`resolve`."""
    if row.kind is Treatment.IGNORED:
        warn_once(key, row.note)
        return {}
    if row.kind is Treatment.REFUSED:
        raise PulsarOptionError(key, row.note)
    assert row.decide is not None
    return row.decide(key, value)


def markdown_table(rows: tuple[Foreign, ...] = FOREIGN) -> str:
    """The option table of ``docs/guides/migrating.md`` ("Their options", between
    ``<!-- migration -->`` markers), or of :data:`~.passthrough.JAVA_FIELDS` (between
    ``<!-- java-fields -->`` markers); a test keeps the page equal to it."""
    lines = ["| their option | from | here |", "|---|---|---|"]
    for row in rows:
        if row.kind is Treatment.ALIAS:
            here = f"`{row.target}`: {row.note}"
        elif row.kind is Treatment.IGNORED:
            here = f"accepted with one WARNING: it {row.note}"
        elif row.kind is Treatment.REFUSED:
            here = f"error: it {row.note}"
        else:
            here = row.note
        lines.append(f"| `{row.name}` | {row.origin} | {here} |")
    return "\n".join(lines)
