"""Producing to a partitioned topic: which partition each message goes to.

Keyed messages go to ``java_string_hash(key) % partitions``, the Java
client's default (``JavaStringHash``: ``String.hashCode()`` over UTF-16 code
units, masked to a non-negative int), so that Java and Spark producers put a
key on the same partition. Keyless messages go round-robin, switching
partition once per batch (every ``batch_max_messages`` keyless messages) so that
batches stay full. ``send_batch`` routes a whole Arrow table at once
(:mod:`.partition_hash`) and hands each partition its rows as one table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pulsar_spark.columnar.rows.encode import InvalidRows, partition_key_text
from pulsar_spark.columnar.rows.send_items import check_items, columnar_rows

from ..errors import InvalidArgument
from .partition_hash import java_string_hash, row_partitions
from .producer import Producer, encoded_rows, explicit_ids

__all__ = [
    "PartitionedProducer",
]


class PartitionedProducer:
    """One :class:`Producer` per partition, behind the producer interface."""

    def __init__(self, producers: list[Producer], *, switch_every: int | None = None) -> None:
        self.producers = producers
        self._n = len(producers)
        #: Keyless messages per partition before the next one: the producers' batch
        #: size by default (1 without batching), so that a switch ends a batch.
        most = producers[0].batch_max_messages if switch_every is None else switch_every
        self._switch_every = max(most, 1)
        self._sent_keyless = 0

    def partition_for(self, key: str | bytes | None) -> int:
        """The partition a message with ``key`` goes to (keyless: the current one)."""
        if key is None:
            number = self._sent_keyless
            self._sent_keyless += 1
            return (number // self._switch_every) % self._n
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
        self,
        table: pa.Table | pa.RecordBatch,
        first_sequence_id: int | None = None,
        *,
        sequence_ids: Sequence[int] | np.ndarray | None = None,
    ) -> int:
        """As :meth:`Producer.send_batch`, each row to its partition as :meth:`send`
        would route it (sequence ids must increase per partition).

        The rows' partitions are computed at once (:func:`.partition_hash.row_partitions`)
        and each partition's rows go to its producer as one table, in their order.
        Tables the columnar path does not take go row by row.

        Raises:
            InvalidArgument: rows that cannot be encoded (naming the table's row and the
                partition), ids not one per row or not increasing; nothing is sent then.
        """
        ids = explicit_ids(table, first_sequence_id, sequence_ids)
        if not columnar_rows(table):
            return self._send_rows(table, ids)
        if not table.num_rows:
            return 0
        parts, keyless = row_partitions(table, self._n, self._sent_keyless, self._switch_every)
        self._check(table, parts)  # before any row is sent: a bad row fails the table
        self._sent_keyless += keyless
        sent = 0
        order = np.argsort(parts, kind="stable")  # each partition's rows, in order
        counts = np.bincount(parts, minlength=self._n)
        ends = np.cumsum(counts)
        for p in np.flatnonzero(counts).tolist():
            rows = order[ends[p] - counts[p] : ends[p]]
            sub = table if len(rows) == table.num_rows else table.take(pa.array(rows))
            seqs = None if ids is None else ids[rows]
            sent += self.producers[p].send_batch(sub, sequence_ids=seqs)
        return sent

    def _check(self, table: pa.Table | pa.RecordBatch, parts: np.ndarray) -> None:
        """Raise for what the columnar encoding refuses (a negative event time, a
        property with a null value), naming the table's row, its partition and topic."""
        try:
            check_items(table)
        except InvalidRows as exc:
            where = ""
            if exc.row is not None:
                partition = int(parts[exc.row])
                where = f" (partition {partition}: {self.producers[partition].topic})"
            msg = f"{exc}{where}"
            raise InvalidArgument(msg) from exc

    def _send_rows(self, table: pa.Table | pa.RecordBatch, ids: np.ndarray | None) -> int:
        """:meth:`send_batch` row by row (tables :func:`columnar_rows` does not take)."""
        rows = encoded_rows(table)
        keys = rows.keys
        producers = self.producers
        partitions: dict[str | bytes, int] = {}  # a key's partition, once per key
        seqs: list[int] | list[None] = [None] * rows.n if ids is None else ids.tolist()
        sent = 0
        for i in range(rows.n):
            key = keys[i] if keys else None
            if key is None:
                partition = self.partition_for(None)
            else:
                partition = partitions.get(key, -1)
                if partition < 0:
                    partition = partitions[key] = self.partition_for(key)
            sent += producers[partition].send_encoded(
                seqs[i], rows.pres[i], rows.nulls[i], rows.values[i], rows.sizes[i]
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
