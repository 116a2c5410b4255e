"""``PulsarDataSource``: the ``"pulsar"`` format of ``spark.read(Stream)``, ``df.write(Stream)``.

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

from typing import TYPE_CHECKING

from .compat import MINIMUM_SPARK, require_spark

require_spark("pulsar_spark.PulsarDataSource (the Python Data Source API)", MINIMUM_SPARK)

from pyspark.sql.datasource import DataSource  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from ..columnar import ROW_SCHEMA  # noqa: E402
from .errors import PulsarOptionError, PulsarSchemaError, PulsarWriteError  # noqa: E402
from .options import PulsarOptions, Scope, parse_options  # noqa: E402
from .reader import PulsarBatchReader  # noqa: E402
from .writer import PulsarArrowWriter, check_columns  # noqa: E402

if TYPE_CHECKING:  # loaded on first use: they need pyspark features a read does not
    from .stream_reader import PulsarStreamReader
    from .stream_writer import PulsarStreamWriter

__all__ = ["SPARK_SCHEMA", "PulsarDataSource"]


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

    def _check_read(self, schema: StructType, scope: Scope) -> None:
        if schema != SPARK_SCHEMA:
            msg = (
                "the pulsar source has a fixed schema ("
                + ", ".join(SPARK_SCHEMA.names)
                + "); do not pass .schema(...), select or cast columns after load()"
            )
            raise PulsarSchemaError(msg)
        self.parsed.check_scope(scope)
        if (self.parsed.topic, self.parsed.topics, self.parsed.topics_pattern) == (
            None,
            None,
            None,
        ):
            msg = "reads need one of topic, topics or topicsPattern"
            raise PulsarOptionError(option="topic", message=msg)

    def reader(self, schema: StructType) -> PulsarBatchReader:
        self._check_read(schema, Scope.BATCH_READ)
        return PulsarBatchReader(self.parsed)

    def writer(self, schema: StructType, overwrite: bool) -> PulsarArrowWriter:
        if overwrite:
            msg = (
                "the pulsar sink only appends: a topic cannot be overwritten. Use "
                '.mode("append") (messages already in the topic stay).'
            )
            raise PulsarWriteError(msg)
        self.parsed.check_scope(Scope.BATCH_WRITE)
        check_columns(schema, self.parsed)
        return PulsarArrowWriter(self.parsed, tuple(schema.fieldNames()))

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        from .stream_reader import PulsarStreamReader

        self._check_read(schema, Scope.STREAM_READ)
        # Streams start at the end by default, as Kafka's source does.
        return PulsarStreamReader(self.parsed.for_stream_read())

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        from .stream_writer import PulsarStreamWriter

        if overwrite:
            msg = 'the pulsar sink only appends: use outputMode("append")'
            raise PulsarWriteError(msg)
        self.parsed.check_scope(Scope.STREAM_WRITE)
        check_columns(schema, self.parsed)
        return PulsarStreamWriter(self.parsed, tuple(schema.fieldNames()))
