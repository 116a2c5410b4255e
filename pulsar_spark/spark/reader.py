"""The batch reader: one Spark input partition per partition range.

:meth:`PulsarBatchReader.partitions` runs once per query, in a Python worker
on the driver: it lists the topics and partitions, fixes each one's end at a
message id (``latest`` and end times resolved now: a retried task reads the
same messages) and, for ``minPartitions``, probes and splits them. :meth:`PulsarBatchReader.read`
runs in each task: it opens its own client, reads its range through a
non-durable subscription (nothing stays behind on the broker) and yields
Arrow record batches with the row schema, values decoded as the read's
:class:`~.read_schema.ReadSchema` says (:func:`typed_batches`).
:class:`PulsarFilteringReader` also takes the query's filters on topic, partition and
publish time (:mod:`.pushdown`), and reads only what they leave.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

# What unpickling a reader and its partitions loads anyway; the rest loads where it is used:
# planning on the driver, reading in a task (a raw read loads no decoder and no pushdown).
from pulsar_spark.protocol.ids.position import Position

from .options.parse import PulsarOptions
from .read_schema import ReadSchema

if TYPE_CHECKING:
    from pulsar_spark.client import PulsarClient

    from .pushdown import Narrowing
    from .ranges import PartitionRange

__all__ = [
    "PulsarBatchReader",
    "PulsarFilteringReader",
    "PulsarInputPartition",
    "typed_batches",
]

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
        from .ranges import PartitionRange

        return PartitionRange(self.topic, self.start, self.end)


class PulsarBatchReader(DataSourceReader):
    """``spark.read.format("pulsar")``: reads a bounded range of each partition."""

    def __init__(self, options: PulsarOptions, read: ReadSchema, schema: StructType) -> None:
        from .spark_types import arrow_for

        self.options = options
        self.read_schema = read
        #: The Arrow schema Spark expects of the batches.
        self.target = arrow_for(schema)
        #: What the query's pushed filters leave to read (:class:`PulsarFilteringReader`).
        self.narrowing: Narrowing | None = None

    def partitions(self) -> list[InputPartition]:
        from .connect import open_client
        from .pushdown import narrow_times
        from .ranges import fix_ends, plan_ranges
        from .read_schema import check_unplanned
        from .splits import split_ranges

        options = self.options
        narrow = self.narrowing
        with open_client(options) as client:
            check_unplanned(client, options, self.read_schema)
            ranges = plan_ranges(client, options)
            if narrow is not None:
                ranges = [r for r in ranges if narrow.keeps(r.topic)]
            ranges = fix_ends(client, ranges)
            if narrow is not None:
                ranges = narrow_times(client, ranges, narrow)
            if options.min_partitions is not None:
                ranges = split_ranges(client, ranges, options.min_partitions)
        return [PulsarInputPartition(r.topic, r.start, r.end) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, PulsarInputPartition):  # no topic had a partition
            return iter(())
        return self._read(partition)

    def _read(self, partition: PulsarInputPartition) -> Iterator[pa.RecordBatch]:
        from .connect import open_client
        from .ranges import read_range

        options = self.options
        with open_client(options, operation_timeout=options.poll_timeout) as client:
            batches = read_range(client, partition.range, options, batch_rows=BATCH_ROWS)
            yield from typed_batches(
                client, partition.topic, batches, self.read_schema, self.target, stream=False
            )


class PulsarFilteringReader(PulsarBatchReader):
    """A batch reader that takes filters (Spark 4.1+ with
    ``spark.sql.python.filterPushdown.enabled``; see :mod:`.pushdown`)."""

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        from .pushdown import narrowing

        self.narrowing, rest = narrowing(filters, self.read_schema.layout)
        return rest


def typed_batches(
    client: PulsarClient,
    topic: str,
    batches: Iterable[pa.RecordBatch],
    read: ReadSchema,
    target: pa.Schema,
    *,
    stream: bool,
) -> Iterator[pa.RecordBatch]:
    """``batches`` of ``topic`` with values decoded as ``read`` says, laid out as its
    ``rowLayout`` says (StreamNative's columns made of each decoded batch and the ids
    the read batch carries, :func:`.streamnative_rows.streamnative_batch`), cast to
    ``target`` (the Arrow schema Spark expects: all the read's columns, or those the
    user's ``.schema(...)`` named). Each schema version is fetched once."""
    from pulsar_spark.columnar import ROW_SCHEMA

    from .streamnative_rows import STREAMNATIVE, streamnative_batch

    names = target.names
    streamnative = read.layout == STREAMNATIVE
    if read.passes_through and not streamnative and names == ROW_SCHEMA.names:
        yield from batches  # raw: the row schema as it is
        return
    from .spark_types import to_spark_arrow  # (with pyarrow.compute) not for the above

    if read.passes_through and not streamnative:
        for batch in batches:
            yield to_spark_arrow(batch.select(names), target)
        return
    decode: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None
    if not read.passes_through:
        from .value_decode import ValueDecoder  # the decoders: a typed read's

        fetch = partial(client.get_schema, topic)
        latest = partial(client.get_schema, topic, None)
        decode = ValueDecoder(read, topic, fetch, stream=stream, latest=latest)
    for batch in batches:
        decoded = batch if decode is None else decode(batch)
        if streamnative:
            decoded = streamnative_batch(decoded, batch.schema, names)
        elif decoded.schema.names != names:
            decoded = decoded.select(names)
        yield to_spark_arrow(decoded, target)
