"""The options table: every option once, with its spellings, scope, parser, default and doc.

One :class:`Option` row per option holds every fact about it: the canonical
name and its aliases (Spark's option map is case-insensitive, so are these),
where it applies (:class:`Scope`: batch or stream, read or write), the parser
that turns its text into a value (:mod:`.values`), the
:class:`~pulsar_spark.spark.options.parse.PulsarOptions` field that value goes to,
its default as a user would write it, and its documentation.
:func:`~pulsar_spark.spark.options.parse.parse_options` is a loop over this table,
and the documentation's options reference (``docs/reference/options.md``) is
:func:`markdown_table`. Nothing here imports pyspark.

Names follow the Kafka and StreamNative connectors: ``service.url``,
``topic``/``topics``/``topicsPattern``, ``startingOffsets``/``endingOffsets``,
``startingTime``/``endingTime``, ``failOnDataLoss``, ``minPartitions``,
``pollTimeoutMs``, and the ``pulsar.client.*``/``pulsar.producer.*`` keys of
the Java client's configuration (each also without its prefix).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import PulsarOptionError
from ..streamnative_rows import row_layout
from . import crypto
from . import keystore as ks
from . import reading as rd
from . import schema as sch
from . import values as v
from .auth import auth_plugin

__all__ = ["OPTIONS", "Option", "Scope", "by_spelling", "markdown_table"]


class Scope(enum.Flag):
    """Where an option applies; also what a check is made for (one or more flags)."""

    BATCH_READ = enum.auto()
    STREAM_READ = enum.auto()
    BATCH_WRITE = enum.auto()
    STREAM_WRITE = enum.auto()
    READ = BATCH_READ | STREAM_READ
    WRITE = BATCH_WRITE | STREAM_WRITE
    ALL = READ | WRITE

    @property
    def label(self) -> str:
        """How the options reference's "applies to" column says it."""
        return _LABELS[self]


_LABELS = {
    Scope.READ: "read",
    Scope.BATCH_READ: "batch read",
    Scope.STREAM_READ: "stream read",
    Scope.WRITE: "write",
    Scope.BATCH_WRITE: "batch write",
    Scope.STREAM_WRITE: "stream write",
    Scope.ALL: "read and write",
}


@dataclass(frozen=True)
class Option:
    """One option. ``parse(name, text)`` gives the value of :class:`PulsarOptions` field
    ``field`` (None: the value is read by a check across options); ``default``, text
    as a user would give it, is parsed the same way when the option is not given
    (None: the field is None)."""

    name: str
    aliases: tuple[str, ...]
    scope: Scope
    parse: Callable[[str, str], object]
    field: str | None
    default: str | None
    doc: str
    #: Given a blank value or not at all: an error showing ``example``.
    required: bool = False
    example: str = ""
    #: The default of stream reads, when it differs.
    stream_default: str | None = None


def _millis_or_none(name: str, value: str) -> float:
    """Milliseconds as seconds; ``0`` is no limit (the Java client's sendTimeout(0))."""
    if value.strip() == "0":
        return 0.0
    try:
        return v.millis(name, value)
    except PulsarOptionError:
        raise PulsarOptionError(
            name, f"expected 0 (no limit) or a positive number of milliseconds, got {value!r}"
        ) from None


_C = "pulsar.client."
_P = "pulsar.producer."
_RC = ("pulsar.reader.", "pulsar.consumer.")
BATCH_READ, STREAM_READ = Scope.BATCH_READ, Scope.STREAM_READ
READ, WRITE, ALL = Scope.READ, Scope.WRITE, Scope.ALL

# A table: one option a row, laid out by hand.
# fmt: off
#: Every option, in the order the options reference lists them:
#: name, aliases, scope, parser, PulsarOptions field, default, doc.
OPTIONS: tuple[Option, ...] = (
    Option("service.url", ("serviceUrl", _C + "serviceUrl"), ALL, v.service_url, "service_url",
           None, "`pulsar://host:6650` or `pulsar+ssl://host:6651`",
           required=True, example="pulsar://localhost:6650"),
    Option("topic", ("path",), ALL, v.topic, "topic", None,
           "one topic (a partitioned topic reads every partition); for writes, the topic "
           "every row goes to; `load(\"orders\")` sets it too"),
    Option("topics", (), READ, v.topic_list, "topics", None,
           "a comma-separated list of topics"),
    Option("topicsPattern", (), READ, v.topics_pattern, "topics_pattern", None,
           "a regex over the topics of one namespace, e.g. "
           "`persistent://public/default/orders-.*` (no namespace: `public/default`)"),
    Option("startingOffsets", (), READ, v.starting_offsets, "starting_offsets", "earliest",
           "`earliest`, `latest` or JSON per topic or partition: readable message ids "
           "(inclusive) or StreamNative's `toByteArray()` bytes (their entry, inclusive); "
           "partitions left out start at the default",
           stream_default="latest"),
    Option("endingOffsets", (), BATCH_READ, v.ending_offsets, "ending_offsets", "latest",
           "`latest` or JSON per topic or partition: readable message ids (exclusive) or "
           "StreamNative's bytes (their entry included); `latest` includes the last message"),
    Option("startingTime", ("startingTimestamp",), READ, v.starting_time, "starting_time", None,
           "publish time (epoch ms or ISO-8601) to start at, inclusive, or JSON per topic "
           "or partition (`{\"orders\": 1700000000000}`; -1 earliest, -2 latest; "
           "partitions left out start at the default); excludes `startingOffsets`"),
    Option("endingTime", ("endingTimestamp",), BATCH_READ, v.ending_time, "ending_time", None,
           "publish time (epoch ms or ISO-8601) to stop before, exclusive, or JSON per "
           "topic or partition (-2 latest; partitions left out end at `latest`); excludes "
           "`endingOffsets`"),
    Option("failOnDataLoss", (), READ, v.boolean, "fail_on_data_loss", "true",
           "fail, naming topic, positions and cause, when messages a read needs are gone: "
           "a starting message id (or a stream's position its subscription no longer "
           "holds) removed by retention, TTL, truncation or deletion, a topic deleted and "
           "created again, a chunked message begun in the range never completed; false: "
           "log a warning and read on from what exists"),
    Option("minPartitions", (), READ, v.positive, "min_partitions", None,
           "at least this many Spark tasks per read or micro-batch: large topic "
           "partitions are split by entry ranges (or publish-time ranges across ledgers)"),
    Option("pushFilters", (), BATCH_READ, v.push_filters, "push_filters", "auto",
           "with Spark's `spark.sql.python.filterPushdown.enabled` (Spark 4.1+), filters on "
           "`topic`, `partition` and `publishTime` narrow what is read (see [filter "
           "pushdown](../guides/batch.md)); "
           "`auto`: where Spark keeps a pushed plan to its own query (not in 4.1 to 4.3), "
           "`true`: on 4.1 to 4.3 too (load a DataFrame per filtered query there), `false`: "
           "never"),
    Option("maxRecordsPerTrigger", ("maxOffsetsPerTrigger",), STREAM_READ, v.positive,
           "max_records_per_trigger", None,
           "rows per micro-batch at most, shared fairly by the partitions (Spark 4.2+)"),
    Option("maxBytesPerTrigger", (), STREAM_READ, v.positive, "max_bytes_per_trigger", None,
           "bytes of message payload (decompressed, as `value` holds it) per micro-batch at "
           "most, shared fairly by the partitions; a micro-batch takes at least one message, "
           "even one larger than this (Spark 4.2+)"),
    Option("minRecordsPerTrigger", ("minOffsetsPerTrigger",), STREAM_READ, v.positive,
           "min_records_per_trigger", None,
           "a micro-batch waits until this many messages are there, or `maxTriggerDelay` "
           "passed since the last micro-batch; ignored by `Trigger.AvailableNow` and "
           "`Trigger.Once` (Spark 4.2+)"),
    Option("maxTriggerDelay", (), STREAM_READ, v.duration_ms, "max_trigger_delay_ms",
           "15m",  # Kafka's default
           "longest wait for `minRecordsPerTrigger` (Spark's durations: `30s`, `15m`, "
           "`500ms`; a bare number is milliseconds)"),
    Option("subscriptionName", ("predefinedSubscription",), STREAM_READ, v.subscription,
           "subscription_name", None,
           "the name of the stream's durable subscription (by default "
           "`pulsar-spark-stream-<hex>`, fixed when the query first plans and kept in its "
           "checkpoint)"),
    Option("subscriptionMode", (), STREAM_READ, v.subscription_mode, "durable", "durable",
           "`durable`: the stream holds its data on the broker with a durable subscription, "
           "moved to each committed micro-batch's end (see [streaming]"
           "(../guides/streaming.md)); `nonDurable`: nothing on the "
           "broker, safe only where retention keeps the data until the stream reads it"),
    Option("subscriptionPrefix", ("pulsar.reader.subscriptionRolePrefix",), READ,
           rd.subscription_prefix, "subscription_prefix", None,
           "every subscription the connector makes starts with it: `<prefix>-reader-<hex>` "
           "(`reader-<hex>` without it), a stream's durable one "
           "`<prefix>-pulsar-spark-stream-<hex>`: give the role's name where the namespace "
           "has `subscriptionAuthMode=Prefix`"),
    Option("readCompacted", ("pulsar.reader.readCompacted",), READ, v.boolean,
           "read_compacted", "false",
           "read the compacted view of the topics (Apache Pulsar): up to the compaction "
           "horizon only the latest message of each key, then every message after it"),
    Option("schemaMode", (), ALL, sch.schema_mode, "schema_mode", "auto",
           "`auto`: reads decode `value` (and a KEY_VALUE topic's `key`) with the topic's "
           "schema at planning time or the one given (`avroSchema`, `jsonSchema`, "
           "`protobufSchema`), writes register a schema derived from the DataFrame; `raw`: "
           "binary `value` and no schema anywhere"),
    Option("avroSchema", ("valueAvroSchema",), ALL, sch.avro_schema, "avro_schema", None,
           "an Avro schema (JSON) for values: reads decode Avro binary values into it (each "
           "message's own schema version, if any, resolves into it), on any broker; writes "
           "encode and register it"),
    Option("jsonSchema", ("valueJsonSchema",), READ, sch.json_schema, "json_schema", None,
           "JSON values' type: a Spark DDL string (`id BIGINT, name STRING`) or an Avro "
           "schema (JSON), for topics with no schema in the broker"),
    Option("protobufSchema", ("valueProtobufSchema",), ALL, sch.protobuf_schema,
           "protobuf_schema", None,
           "a protobuf message for values: PROTOBUF_NATIVE schema data (JSON) or "
           "`pkg.Msg:<base64 FileDescriptorSet>`: reads decode topics with no schema in "
           "the broker; writes encode a struct `value` and register it"),
    Option("decodeErrorMode", (), READ, sch.decode_error_mode, "decode_error_mode", "fail",
           "`fail`: a value that does not decode fails the task, naming the message id, "
           "schema version and field; `deadLetter`: its `value` is null and a `decodeError` "
           "column holds the error (null for the rows that decoded)"),
    Option("rowLayout", (), ALL, row_layout, "row_layout", "pulsar-spark",
           "`pulsar-spark`: the columns of [the row schema](rows.md); `streamnative`: "
           "StreamNative's (a record's fields, or `value`, then `__key`, `__topic`, "
           "`__messageId`, `__publishTime`, `__eventTime`, `__messageProperties`), see "
           "[migrating](../guides/migrating.md). Writes: `streamnative` packs the columns of "
           "a DataFrame without `value` into a record, as StreamNative's sink does; without "
           "it such a DataFrame is written only to a topic whose record schema its columns "
           "fit, and refused otherwise"),
    Option("valueSchemaType", (), WRITE, sch.value_schema_type, "value_schema_type", "avro",
           "the schema a struct `value` is written with: `avro` or `json`"),
    Option("recordName", (), WRITE, v.non_empty, "record_name", "topLevelRecord",
           "the name of the record a struct `value` is written as (Avro readers match "
           "records by name: use the name of the consumer's class, e.g. `Order`); under "
           "`keyValueEncoding`, the value's record (`value` without it; a struct key's "
           "is `key`)"),
    Option("recordNamespace", (), WRITE, v.non_empty, "record_namespace", None,
           "the namespace of that record (e.g. `com.example`)"),
    Option("keyValueEncoding", (), WRITE, sch.key_value_encoding, "key_value_encoding", None,
           "write a typed `key` and `value` under a KEY_VALUE schema: `inline` (both in the "
           "payload) or `separated` (the key in the message key)"),
    Option("receiverQueueSize",
           ("pulsar.reader.receiverQueueSize", "pulsar.consumer.receiverQueueSize"),
           READ, v.positive, "receiver_queue_size", "1000",
           "messages in flight per reading task"),
    Option("readBufferBytes", ("pulsar.reader.readBufferBytes",), READ, v.buffer_bytes,
           "read_buffer_bytes", "268435456",
           "bytes a reading task holds at most (in flight, queued, chunked messages being "
           "put together, rows being built); at least 1 MiB"),
    Option("expireTimeOfIncompleteChunkedMessageMillis",
           tuple(p + "expireTimeOfIncompleteChunkedMessageMillis" for p in _RC), READ,
           _millis_or_none, "chunk_expiry", "60000",
           "how long a chunked message may stay incomplete, from its first chunk's arrival: "
           "beyond, the task fails naming the message and its first chunk (or drops it, see "
           "`autoAckOldestChunkedMessageOnQueueFull`); 0: no limit"),
    Option("maxPendingChunkedMessage", tuple(p + "maxPendingChunkedMessage" for p in _RC),
           READ, v.positive, "max_pending_chunked_messages", "100",
           "chunked messages a reading task puts together at once (the Java consumer's "
           "default is 10; their bytes are bounded by half of `readBufferBytes` as well): "
           "beyond, the task fails naming the oldest (or drops it, see below)"),
    Option("autoAckOldestChunkedMessageOnQueueFull",
           tuple(p + "autoAckOldestChunkedMessageOnQueueFull" for p in _RC), READ, v.boolean,
           "drop_incomplete_chunks", "false",
           "beyond `maxPendingChunkedMessage`, half of `readBufferBytes` or "
           "`expireTimeOfIncompleteChunkedMessageMillis`, drop the oldest incomplete chunked "
           "message with a WARNING naming it instead of failing the task (the Java consumer "
           "always drops an expired one)"),
    Option("pollTimeoutMs", (), READ, v.millis, "poll_timeout", "120000",
           "how long a reading task may go without progress (reconnects included) before "
           "it fails"),
    Option(_C + "connectionTimeoutMs", ("connectionTimeoutMs",), ALL, v.millis,
           "connect_timeout", "10000", "TCP connect and handshake timeout"),
    Option(_C + "operationTimeoutMs", ("operationTimeoutMs",), ALL, v.millis,
           "operation_timeout", "30000", "lookups, subscribe, producer creation"),
    Option(_C + "authPluginClassName", ("authPluginClassName", "pulsarClientAuthPluginClassName"),
           ALL, auth_plugin, None, None,
           "`org.apache.pulsar.client.impl.auth.AuthenticationToken`, "
           "`...AuthenticationBasic`, `...AuthenticationTls`, "
           "`...AuthenticationKeyStoreTls`, `...oauth2.AuthenticationOAuth2`, "
           "`...AuthenticationSasl` (Kerberos), or `token`, `basic`, `tls`, `keystoretls`, "
           "`oauth2`, `sasl`"),
    Option(_C + "authParams", ("authParams", "pulsarClientAuthParams"), ALL, v.text, None, None,
           "the plugin's parameters, as the Java client takes them (`token:...`, "
           "`file:///...`, JSON, `key:value,key:value`)"),
    Option(_C + "tlsTrustCertsFilePath", ("tlsTrustCertsFilePath",), ALL, v.non_empty,
           "tls_trust_certs_file", None, "CA bundle for `pulsar+ssl://`"),
    Option(_C + "tlsAllowInsecureConnection", ("tlsAllowInsecureConnection",), ALL, v.boolean,
           "tls_allow_insecure", "false", "accept any server certificate"),
    Option(_C + "tlsHostnameVerificationEnable", ("tlsHostnameVerificationEnable",), ALL,
           v.boolean, "tls_validate_hostname", "true",
           "check the server certificate's host name (the Java client's default is false)"),
    Option(_P + "batchingEnabled", ("batchingEnabled",), WRITE, v.boolean, "batching", "true",
           "gather messages into batches"),
    Option(_P + "batchingMaxMessages", ("batchingMaxMessages",), WRITE, v.positive,
           "batch_max_messages", "10000", "messages per batch at most"),
    Option(_P + "batchingMaxBytes", ("batchingMaxBytes",), WRITE, v.positive,
           "batch_max_bytes", "1048576", "bytes per batch at most"),
    Option(_P + "batchingMaxPublishDelayMicros", ("batchingMaxPublishDelayMicros",), WRITE,
           v.micros, "batch_max_delay", "10000", "how long a batch may wait to fill"),
    Option(_P + "compressionType", ("compressionType",), WRITE, v.codec, "compression", "NONE",
           "NONE, LZ4, ZLIB, ZSTD or SNAPPY"),
    Option(_P + "maxPendingMessages", ("maxPendingMessages",), WRITE, v.positive,
           "max_pending_messages", "100000",
           "messages sent and not yet acknowledged, per producer"),
    Option(_P + "maxPendingBytes", ("maxPendingBytes",), WRITE, v.positive,
           "max_pending_bytes", "33554432",
           "bytes of batches sent and not yet acknowledged, per producer (one larger batch "
           "may still go alone)"),
    Option(_P + "sendTimeoutMs", ("sendTimeoutMs",), WRITE, _millis_or_none, "send_timeout",
           "30000",
           "how long a message may wait for its receipt (reconnects included) before the "
           "task fails; 0: no limit (Pulsar's advice with broker deduplication)"),
    Option("deliveryGuarantee", ("pulsar.sink.deliveryGuarantee",), WRITE,
           v.delivery_guarantee, "delivery_guarantee", "at-least-once",
           "`exactly-once`: each task writes in a Pulsar transaction that the driver commits "
           "when the job (or micro-batch) commits, and aborts otherwise; needs a broker with "
           "transactions (`transactionCoordinatorEnabled=true`), checked before anything is "
           "written. `at-least-once`: a retried task or job writes its rows again (a stream "
           "sink is effectively once where the broker deduplicates)"),
    Option("transactionTimeout", ("pulsar.sink.transactionTimeout",), WRITE, v.duration_ms,
           "transaction_timeout_ms", "1h",
           "with `deliveryGuarantee=exactly-once`: how long a task's transaction may stay "
           "open before the broker aborts it; it must cover a task's write and the wait for "
           "the job's commit. A transaction left open (a killed worker, a losing speculative "
           "attempt) holds back readers of its partitions until it times out"),
    Option("transactionLogTopic", ("pulsar.sink.transactionLogTopic",), Scope.STREAM_WRITE,
           v.non_empty, "transaction_log_topic", None,
           "with `deliveryGuarantee=exactly-once`, a stream's commit log: the topic where the "
           "driver records each micro-batch's transactions before committing them, so that a "
           "micro-batch replayed after a crash writes nothing twice (`{query}` stands for the "
           "query's id); default `__pulsar_spark_txn_log-{query}` in the `topic` option's "
           "namespace"),
    Option("producerNamePrefix", (_P + "producerName",), WRITE, v.non_empty,
           "producer_name_prefix", None,
           "batch writes name their producers `<prefix>-<stage>-<task>-<attempt>` (the "
           "broker picks names without it); stream writes `<prefix>-<query id>-<partition>` "
           "(prefix `pulsar-spark` without it), the fixed names a deduplicating broker needs; "
           "exactly-once streams name them as batch writes do"),
    Option("privateKey", ("pulsar.reader.privateKey", "privateKeyUrl"), READ,
           crypto.private_key, "private_key", None,
           "decrypts end-to-end encrypted messages: a PEM private key as a URL (`file:///path`, "
           "or `data:application/x-pem-file;base64,...` from a secret), or a JSON map of key "
           "name to URL; without it an encrypted message fails the read. Spark shows a "
           "stream's options in its plan unless their name matches "
           "`spark.sql.redaction.options.regex` (`url` by default): give a `data:` key as "
           "`privateKeyUrl` (a stream given one as `privateKey` logs a WARNING)"),
    Option("cryptoFailureAction", ("pulsar.reader.cryptoFailureAction",), READ,
           crypto.failure_action, "crypto_failure_action", "fail",
           "a message that does not decrypt: `fail` the task (naming it, its key names and "
           "this option), `discard` it (logged at WARNING with its id, then a count per "
           "partition), or `consume` it still encrypted (its `properties` say so: "
           "`pulsar.encryption.keys` and more, so a `.schema(...)` must keep `properties`; "
           "a chunked message cannot be consumed: it fails)"),
    Option("listenerName", (_C + "listenerName",), ALL, v.non_empty, "listener_name", None,
           "the broker's advertised listener to connect through (a cluster with internal "
           "and external addresses): lookups answer with that listener's address"),
    Option(_C + "keepAliveIntervalSeconds", ("keepAliveIntervalSeconds",), ALL, v.positive,
           "keepalive_interval", "30",
           "seconds of silence before a PING; a connection silent for two is dead"),
    Option(_C + "useKeyStoreTls", ("useKeyStoreTls", "pulsarClientUseKeyStoreTls"), ALL,
           v.boolean, "use_key_store_tls", "false",
           "TLS with Java key stores: the CAs from `tlsTrustStorePath`, the client "
           "certificate (mTLS) from `tlsKeyStorePath`; the stores are read into memory in "
           "each process"),
    Option(_C + "tlsTrustStoreType", ("tlsTrustStoreType", "pulsarClientTlsTrustStoreType"),
           ALL, ks.store_type, "trust_store_type", "JKS", "`PKCS12` or `JKS`"),
    Option(_C + "tlsTrustStorePath", ("tlsTrustStorePath", "pulsarClientTlsTrustStorePath"),
           ALL, v.non_empty, "trust_store_path", None,
           "the trust store (the broker's CA certificates), on every machine; without it "
           "the system's CAs"),
    Option(_C + "tlsTrustStorePassword",
           ("tlsTrustStorePassword", "pulsarClientTlsTrustStorePassword"), ALL, ks.secret,
           "trust_store_password", None, "the trust store's password (never shown)"),
    Option(_C + "tlsKeyStoreType", ("tlsKeyStoreType",), ALL, ks.store_type,
           "key_store_type", "JKS", "`PKCS12` or `JKS`"),
    Option(_C + "tlsKeyStorePath", ("tlsKeyStorePath",), ALL, v.non_empty, "key_store_path",
           None, "a key store with the client's private key and certificate chain (mTLS)"),
    Option(_C + "tlsKeyStorePassword", ("tlsKeyStorePassword",), ALL, ks.secret,
           "key_store_password", None,
           "the key store's password, also the key's (never shown)"),
    Option("encryptionKeys", (_P + "encryptionKeys",), WRITE, crypto.key_names,
           "encryption_keys", None,
           "end-to-end encryption: comma-separated key names; every batch (or message, or "
           "chunk) is encrypted (AES-GCM) for each of them; needs `publicKey`"),
    Option("publicKey", (_P + "publicKey", "publicKeyUrl"), WRITE, crypto.public_key,
           "public_key", None,
           "the public key(s) of `encryptionKeys`: a PEM URL (`file:` or `data:`) for every "
           "name, or a JSON map of key name to URL"),
)
# fmt: on

_BY_SPELLING: dict[str, Option] = {
    spelling.lower(): option for option in OPTIONS for spelling in (option.name, *option.aliases)
}


def by_spelling(key: str) -> Option | None:
    """The option ``key`` names (any case, any alias); None for an unknown name."""
    return _BY_SPELLING.get(key.lower())


def spellings() -> list[str]:
    """Every accepted spelling, lower case."""
    return list(_BY_SPELLING)


def markdown_table() -> str:
    """The options reference as a Markdown table, generated from :data:`OPTIONS`
    (``docs/reference/options.md`` carries it between ``<!-- options -->`` markers; a test
    keeps them equal). Its links are relative to that page."""
    lines = ["| option | applies to | default | meaning |", "|---|---|---|---|"]
    for option in OPTIONS:
        name = f"`{option.name}`"
        if option.aliases:
            name += " (also " + ", ".join(f"`{a}`" for a in option.aliases) + ")"
        default = "(required)" if option.required else option.default or ""
        if option.stream_default is not None:
            default += f" (streams: {option.stream_default})"
        lines.append(f"| {name} | {option.scope.label} | {default} | {option.doc} |")
    return "\n".join(lines)
