"""The batch reader: one Spark input partition per partition range.

:meth:`PulsarBatchReader.partitions` runs once per query, in a Python worker
on the driver: it lists the topics and partitions (and, for
``minPartitions``, probes and splits them). :meth:`PulsarBatchReader.read`
runs in each task: it opens its own client, reads its range through a
non-durable subscription (nothing stays behind on the broker) and yields
Arrow record batches with the row schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..protocol.position import Position
from .connect import open_client
from .options import PulsarOptions
from .ranges import PartitionRange, plan_ranges, read_range
from .splits import split_ranges

__all__ = ["PulsarBatchReader", "PulsarInputPartition"]

#: Rows per Arrow batch handed to Spark.
BATCH_ROWS = 50_000


@dataclass(frozen=True)
class PulsarInputPartition(InputPartition):
    """What one task reads: a :class:`PartitionRange`'s fields."""

    topic: str
    start: Position
    end: Position

    @property
    def range(self) -> PartitionRange:
        return PartitionRange(self.topic, self.start, self.end)


class PulsarBatchReader(DataSourceReader):
    """``spark.read.format("pulsar")``: reads a bounded range of each partition."""

    def __init__(self, options: PulsarOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        options = self.options
        with open_client(options) as client:
            ranges = plan_ranges(client, options)
            if options.min_partitions is not None:
                ranges = split_ranges(client, ranges, options.min_partitions)
        return [PulsarInputPartition(r.topic, r.start, r.end) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PulsarInputPartition):  # no topic had a partition
            return iter(())
        return self._read(partition)

    def _read(self, partition: PulsarInputPartition) -> Iterator[pa.RecordBatch]:
        options = self.options
        with open_client(options, operation_timeout=options.poll_timeout) as client:
            yield from read_range(client, partition.range, options, batch_rows=BATCH_ROWS)
