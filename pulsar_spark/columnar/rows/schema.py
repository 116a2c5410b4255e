"""The row schema of a read, :data:`ROW_SCHEMA`: what ``spark.read.format("pulsar")`` shows.

============  ======================  =========================================
column        type                    meaning
============  ======================  =========================================
key           binary, nullable        partition key bytes (UTF-8 of the key, or
                                      its base64 decoding when flagged so)
value         binary, nullable        payload; null for ``null_value`` tombstones
topic         string                  topic name without ``-partition-N``
partition     int32                   partition index; -1 when not partitioned
messageId     string                  ``ledger:entry:partition:batchIndex``
publishTime   timestamp[us, UTC]
eventTime     timestamp[us, UTC]      null when unset (0)
properties    map<string, string>     empty map when there are none
producerName  string
sequenceId    int64
brokerPublishTime  timestamp[us, UTC]  when the broker stored the entry; null
                                       unless the broker exposes its entry
                                       metadata (0x0e02) to clients
index         int64, nullable         the broker's message index (its
                                      ``AppendIndexMetadataInterceptor``);
                                      for a batch item: the entry's index -
                                      items + batch index + 1
schemaVersion  int64, nullable        the version of the topic's schema the
                                      producer wrote with (MessageMetadata's
                                      ``schema_version``); null when it
                                      carries none
============  ======================  =========================================
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["ROW_SCHEMA", "TIMESTAMP", "empty_batch"]

#: The type of the time columns: microseconds since the epoch, UTC.
TIMESTAMP = pa.timestamp("us", tz="UTC")

ROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        pa.field("messageId", pa.string(), nullable=False),
        pa.field("publishTime", TIMESTAMP, nullable=False),
        pa.field("eventTime", TIMESTAMP),
        pa.field("properties", pa.map_(pa.string(), pa.string()), nullable=False),
        pa.field("producerName", pa.string(), nullable=False),
        pa.field("sequenceId", pa.int64(), nullable=False),
        pa.field("brokerPublishTime", TIMESTAMP),
        pa.field("index", pa.int64()),
        pa.field("schemaVersion", pa.int64()),
    ]
)


def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], f.type) for f in ROW_SCHEMA], schema=ROW_SCHEMA)
