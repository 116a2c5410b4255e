"""Producing to a partitioned topic: which partition each message goes to.

Keyed messages go to ``java_string_hash(key) % partitions``, the Java
client's default (``JavaStringHash``: ``String.hashCode()`` over UTF-16 code
units, masked to a non-negative int), so that Java and Spark producers put a
key on the same partition. Keyless messages go round-robin, switching
partition once per batch so that batches stay full.
"""

from __future__ import annotations

import itertools

import pyarrow as pa

from ..columnar.rows import partition_key_text
from .producer import Producer, encoded_rows

__all__ = ["PartitionedProducer", "java_string_hash"]

_INT_MASK = 0x7FFF_FFFF


def java_string_hash(key: str) -> int:
    """``key.hashCode() & Integer.MAX_VALUE`` as the JVM computes it."""
    data = key.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFF_FFFF
    return h & _INT_MASK


class PartitionedProducer:
    """One :class:`Producer` per partition, behind the producer interface."""

    def __init__(self, producers: list[Producer], *, switch_every: int = 1000) -> None:
        self.producers = producers
        self._n = len(producers)
        self._switch_every = max(switch_every, 1)
        self._sent_keyless = 0
        self._partition = itertools.cycle(range(self._n))
        self._current = next(self._partition)

    def partition_for(self, key: str | bytes | None) -> int:
        """The partition a message with ``key`` goes to (keyless: the current one)."""
        if key is None:
            if self._sent_keyless and self._sent_keyless % self._switch_every == 0:
                self._current = next(self._partition)
            self._sent_keyless += 1
            return self._current
        return java_string_hash(partition_key_text(key)) % self._n

    def send(
        self,
        value: bytes | None,
        key: str | bytes | None = None,
        properties: dict[str, str] | None = None,
        event_time: int | None = None,
        sequence_id: int | None = None,
    ) -> bool:
        """As :meth:`Producer.send`; sequence ids must increase per partition."""
        return self.producers[self.partition_for(key)].send(
            value, key, properties, event_time, sequence_id
        )

    def send_batch(
        self, table: pa.Table | pa.RecordBatch, first_sequence_id: int | None = None
    ) -> int:
        """As :meth:`Producer.send_batch`, each row to its partition as :meth:`send`
        would route it."""
        rows = encoded_rows(table)
        keys = rows.keys
        producers = self.producers
        partitions: dict[str | bytes, int] = {}  # a key's partition, once per key
        sent = 0
        for i in range(rows.n):
            key = keys[i] if keys else None
            if key is None:
                partition = self.partition_for(None)
            else:
                partition = partitions.get(key, -1)
                if partition < 0:
                    partition = partitions[key] = self.partition_for(key)
            seq = None if first_sequence_id is None else first_sequence_id + i
            sent += producers[partition].send_encoded(
                seq, rows.pres[i], rows.nulls[i], rows.values[i], rows.sizes[i]
            )
        return sent

    @property
    def schema_version(self) -> int | None:
        """The version of the producers' schema (one registry serves every partition)."""
        return self.producers[0].schema_version

    def flush(self, timeout: float | None = None) -> None:
        for producer in self.producers:
            producer.flush(timeout)

    def close(self) -> None:
        errors = []
        for producer in self.producers:
            try:
                producer.close()
            except Exception as exc:  # close them all, then report  # noqa: PERF203
                errors.append(exc)
        if errors:
            raise errors[0]

    def __enter__(self) -> PartitionedProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
