"""The Java client's configuration keys under the ``pulsar.client/reader/producer.*`` prefixes.

StreamNative's connector hands every key under these prefixes to the Java
client's ``loadConf`` (field names of ``ClientConfigurationData``,
``ReaderConfigurationData`` and ``ProducerConfigurationData``, any case). Here
a key that maps to something this client does is a spelling of its row in
:data:`~.table.OPTIONS` (``pulsar.client.operationTimeoutMs``,
``pulsar.producer.batchingMaxMessages``, ``pulsar.reader.receiverQueueSize``
...). The other Java fields are rows of :data:`JAVA_FIELDS`: accepted with one
WARNING when they tune something this client has no counterpart of (thread
pools, statistics), an error saying what to do instead when ignoring them
would change what the job does. Any other key under these prefixes is an
error listing the valid ones (:func:`unknown_key`). Nothing here imports
pyspark.
"""

from __future__ import annotations

from ..errors import PulsarOptionError
from .migration import Foreign, Treatment

__all__ = ["JAVA_FIELDS", "PREFIXES", "lookup", "unknown_key"]

PREFIXES = ("pulsar.client.", "pulsar.reader.", "pulsar.consumer.", "pulsar.producer.")
_C, _R, _P = "pulsar.client.", "pulsar.reader.", "pulsar.producer."
J = "Java client"

_THREADS = (
    "has no effect here: this client has no thread pools to size (one I/O thread per connection)"
)
_STATS = "has no effect here: this client keeps no periodic statistics"
_POOL = "has no effect here: one connection per broker, reused by the process's clients"
_LOOKUP = (
    "has no effect here: lookups are bounded by pulsar.client.operationTimeoutMs (set that instead)"
)
_BACKOFF = "has no effect here: reconnects back off from 0.1 s, doubling up to 60 s (fixed)"
_PRODUCER_QUEUE = (
    "has no effect here: a writing task always waits for room (maxPendingMessages per producer)"
)


def _ignored(name: str, note: str) -> Foreign:
    return Foreign(name, J, Treatment.IGNORED, note, example="1")


def _refused(name: str, note: str) -> Foreign:
    return Foreign(name, J, Treatment.REFUSED, note, example="x")


# fmt: off
#: Java configuration fields with no row of ours, and why.
JAVA_FIELDS: tuple[Foreign, ...] = (
    _ignored(_C + "numIoThreads", _THREADS),
    _ignored(_C + "numListenerThreads", _THREADS),
    _ignored(_C + "enableBusyWait", _THREADS),
    _ignored(_C + "connectionsPerBroker", _POOL),
    _ignored(_C + "connectionMaxIdleSeconds", _POOL),
    _ignored(_C + "useTcpNoDelay", "has no effect here: TCP_NODELAY is always set"),
    _ignored(_C + "statsIntervalSeconds", _STATS),
    _ignored(_C + "concurrentLookupRequest", _LOOKUP),
    _ignored(_C + "maxConcurrentLookupRequest", _LOOKUP),
    _ignored(_C + "maxLookupRequest", _LOOKUP),
    _ignored(_C + "maxLookupRedirects", _LOOKUP),
    _ignored(_C + "lookupTimeoutMs", _LOOKUP),
    _ignored(_C + "requestTimeoutMs", _LOOKUP),
    _ignored(_C + "maxNumberOfRejectedRequestPerConnection", _POOL),
    _ignored(_C + "initialBackoffIntervalNanos", _BACKOFF),
    _ignored(_C + "maxBackoffIntervalNanos", _BACKOFF),
    _ignored(_C + "memoryLimitBytes",
             "has no effect here: reads are bounded by readBufferBytes, writes by "
             "maxPendingMessages"),
    _ignored(_C + "enableTransaction",
             "has no effect here: deliveryGuarantee=exactly-once writes in transactions "
             "whatever it says, other reads and writes use none"),
    _ignored(_C + "sslProvider", "has no effect here: Python's ssl (OpenSSL) is used"),
    _ignored(_C + "description", "has no effect here: not sent to the broker"),
    _refused(_C + "authParamMap", "is not taken: give pulsar.client.authParams (JSON)"),
    _refused(_C + "serviceUrlProvider", "is not taken: give service.url"),
    _refused(_C + "proxyServiceUrl",
             "is not offered: this client does not connect through an SNI proxy; give "
             "the proxy's pulsar:// or pulsar+ssl:// address as service.url"),
    _refused(_C + "proxyProtocol", "is not offered: see pulsar.client.proxyServiceUrl"),
    _refused(_C + "socks5ProxyAddress", "is not offered: no SOCKS5 proxy support"),
    _refused(_C + "tlsCiphers",
             "is not offered: Python's ssl defaults are used (restricting ciphers is "
             "not possible here, so the option is refused rather than ignored)"),
    _refused(_C + "tlsProtocols",
             "is not offered: Python's ssl defaults are used (TLS 1.2 and 1.3)"),
    _refused(_C + "tlsCertificateFilePath",
             "is not taken: present a client certificate with authPluginClassName=tls "
             "and authParams tlsCertFile:<path>,tlsKeyFile:<path>, or with "
             "pulsar.client.tlsKeyStorePath"),
    _refused(_C + "tlsKeyFilePath", "is not taken: see pulsar.client.tlsCertificateFilePath"),
    _refused(_R + "topicName", "is not taken: give topic"),
    _refused(_R + "topicNames", "is not taken: give topics"),
    _refused(_R + "startMessageId", "is not taken: give startingOffsets"),
    _refused(_R + "startMessageFromRollbackDurationInSec", "is not taken: give startingTime"),
    _refused(_R + "resetIncludeHead",
             "is not taken: startingOffsets positions are inclusive"),
    _refused(_R + "subscriptionName",
             "is not taken: the connector names its readers; a stream's durable "
             "subscription is named by the subscriptionName option"),
    _refused(_R + "keyHashRanges", "is not offered: every task reads whole partitions"),
    _refused(_R + "cryptoKeyReader", "is not taken: give privateKey"),
    _ignored(_R + "readerName", "has no effect here: readers are named by the connector"),
    _ignored(_R + "poolMessages", "has no effect here: messages go straight into Arrow"),
    _ignored(_R + "autoUpdatePartitions",
             "has no effect here: partitions are listed when a batch or a micro-batch is "
             "planned"),
    _ignored(_R + "autoUpdatePartitionsIntervalSeconds",
             "has no effect here: see pulsar.reader.autoUpdatePartitions"),
    _refused(_P + "topicName", "is not taken: give topic (or a topic column)"),
    _ignored(_P + "blockIfQueueFull", _PRODUCER_QUEUE),
    _ignored(_P + "maxPendingMessagesAcrossPartitions", _PRODUCER_QUEUE),
    _ignored(_P + "batchingPartitionSwitchFrequencyByPublishDelay",
             "has no effect here: each partition's producer batches on its own"),
    _ignored(_P + "lazyStartPartitionedProducers",
             "has no effect here: partition producers start when a row goes to them"),
    _ignored(_P + "autoUpdatePartitions",
             "has no effect here: a write lists the partitions when its task starts"),
    _ignored(_P + "autoUpdatePartitionsIntervalSeconds",
             "has no effect here: see pulsar.producer.autoUpdatePartitions"),
    _ignored(_P + "multiSchema", "has no effect here: a write has one schema"),
    _refused(_P + "messageRoutingMode",
             "is not offered: keyed rows go to java_string_hash(key) % partitions, "
             "others round-robin (the Java client's default)"),
    _refused(_P + "hashingScheme",
             "is not offered: keys are hashed as the Java client's JavaStringHash"),
    _refused(_P + "initialSequenceId",
             "is not offered: sequence ids continue from the broker's last one for the "
             "producer name"),
    _refused(_P + "accessMode", "is not offered: producers are Shared"),
    _refused(_P + "properties", "is not offered: message properties come from the "
             "`properties` column"),
    _refused(_P + "batcherBuilder", "is not offered: batches are the default kind"),
    _refused(_P + "chunkingEnabled",
             "is not offered as an option: a message larger than the broker's maximum "
             "message size is always sent alone, in chunks"),
)
# fmt: on

_BY_NAME = {row.name.lower(): row for row in JAVA_FIELDS}


def lookup(key: str) -> Foreign | None:
    """The Java field ``key`` names (any case), or None."""
    return _BY_NAME.get(key.lower())


def prefix_of(key: str) -> str | None:
    """The passthrough prefix ``key`` starts with (any case), or None."""
    found = key.lower()
    return next((p for p in PREFIXES if found.startswith(p)), None)


def unknown_key(key: str, spellings: list[str]) -> PulsarOptionError:
    """The error for a key under a passthrough prefix that is neither one of our options
    (``spellings``: every accepted spelling, as written in the table) nor a known Java
    field; it lists the keys accepted under that prefix (those refused are not)."""
    prefix = prefix_of(key)
    assert prefix is not None
    accepted = [s for s in spellings if s.lower().startswith(prefix)]
    accepted += [r.name for r in JAVA_FIELDS if r.kind is Treatment.IGNORED]
    names = sorted({s[len(prefix) :] for s in accepted if s.lower().startswith(prefix)})
    msg = (
        f"is not a {prefix}* key this connector knows; valid keys (any case): "
        f"{', '.join(sorted(names, key=str.lower))}"
    )
    return PulsarOptionError(key, msg)
