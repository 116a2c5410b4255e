"""``PulsarDataSource``: the ``"pulsar"`` format for ``spark.read`` and ``df.write``.

::

    from pulsar_spark import PulsarDataSource

    spark.dataSource.register(PulsarDataSource)
    df = (spark.read.format("pulsar")
          .option("service.url", "pulsar://localhost:6650")
          .option("topic", "orders")
          .load())
    (df.select("key", "value").write.format("pulsar")
       .option("service.url", "pulsar://localhost:6650")
       .option("topic", "orders-copy")
       .mode("append").save())

Options are parsed once, when Spark creates the source (``load()``/``save()``),
see :mod:`pulsar_spark.spark.options`.
"""

from __future__ import annotations

import dataclasses

from .compat import MINIMUM_SPARK, require_spark

require_spark("pulsar_spark.PulsarDataSource (the Python Data Source API)", MINIMUM_SPARK)

from pyspark.sql.datasource import DataSource  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from ..columnar import ROW_SCHEMA  # noqa: E402
from .options import (  # noqa: E402
    OffsetSpec,
    PulsarOptionError,
    PulsarOptions,
    parse_options,
)
from .reader import PulsarBatchReader  # noqa: E402
from .writer import PulsarArrowWriter, PulsarWriteError, check_columns  # noqa: E402

__all__ = ["SPARK_SCHEMA", "PulsarDataSource"]

#: Options that only make sense for spark.readStream.
_STREAM_ONLY = ("maxRecordsPerTrigger", "subscriptionName")


def _spark_schema() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ROW_SCHEMA)


#: The row schema (:data:`pulsar_spark.protocol.ROW_SCHEMA`) as Spark types.
SPARK_SCHEMA = _spark_schema()


class PulsarDataSource(DataSource):
    """Apache Pulsar topics as a Spark batch source and sink (format ``"pulsar"``)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed: PulsarOptions = parse_options(options)

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> StructType:
        return SPARK_SCHEMA

    def _check_read(self, schema: StructType) -> None:
        if schema != SPARK_SCHEMA:
            msg = ("the pulsar source has a fixed schema (" + ", ".join(SPARK_SCHEMA.names) +
                   "); do not pass .schema(...), select or cast columns after load()")
            raise ValueError(msg)
        self.parsed.check_scope("read")
        if (self.parsed.topic, self.parsed.topics, self.parsed.topics_pattern) == (
                None, None, None):
            msg = "reads need one of topic, topics or topicsPattern"
            raise PulsarOptionError(option="topic", message=msg)

    def reader(self, schema: StructType) -> PulsarBatchReader:
        self._check_read(schema)
        for name in _STREAM_ONLY:
            if name in self.parsed.given:
                raise PulsarOptionError(name, "applies to streaming reads only "
                                              "(spark.readStream)")
        return PulsarBatchReader(self.parsed)

    def writer(self, schema: StructType, overwrite: bool) -> PulsarArrowWriter:
        if overwrite:
            msg = ("the pulsar sink only appends: a topic cannot be overwritten. Use "
                   ".mode(\"append\") (messages already in the topic stay).")
            raise PulsarWriteError(msg)
        self.parsed.check_scope("write")
        check_columns(schema, self.parsed)
        return PulsarArrowWriter(self.parsed, tuple(schema.fieldNames()))

    def streamReader(self, schema: StructType):
        from .stream_reader import PulsarStreamReader, check_stream_options

        self._check_read(schema)
        check_stream_options(self.parsed)
        options = self.parsed
        if "startingOffsets" not in options.given and options.starting_time is None:
            # Streams start at the end by default, as Kafka's source does.
            options = dataclasses.replace(options, starting_offsets=OffsetSpec("latest"))
        return PulsarStreamReader(options)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from .stream_writer import PulsarStreamWriter

        if overwrite:
            msg = "the pulsar sink only appends: use outputMode(\"append\")"
            raise PulsarWriteError(msg)
        self.parsed.check_scope("write")
        check_columns(schema, self.parsed)
        return PulsarStreamWriter(self.parsed, tuple(schema.fieldNames()))
