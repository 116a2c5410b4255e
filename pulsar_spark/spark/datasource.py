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
see :mod:`pulsar_spark.spark.options.parse`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .compat import MINIMUM_SPARK, require_spark

require_spark("pulsar_spark.PulsarDataSource (the Python Data Source API)", MINIMUM_SPARK)

from pyspark.sql.datasource import DataSource  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from pulsar_spark.columnar import ROW_SCHEMA  # noqa: E402

from .errors import PulsarOptionError, PulsarSchemaError, PulsarWriteError  # noqa: E402
from .options.parse import PulsarOptions, parse_options  # noqa: E402
from .options.redaction import warn_unredacted_keys  # noqa: E402
from .options.table import Scope  # noqa: E402
from .pushdown import pushdown_asked  # noqa: E402
from .read_schema import ReadSchema  # noqa: E402
from .reader import PulsarBatchReader, PulsarFilteringReader  # noqa: E402
from .spark_types import arrow_for, spark_schema  # noqa: E402
from .streamnative_rows import STREAMNATIVE, SinkColumns, sink_columns  # noqa: E402
from .write_schema import WritePlan  # noqa: E402
from .writer import PulsarArrowWriter, check_columns, check_transactions, plan_topic_writes  # noqa: E402

if TYPE_CHECKING:  # loaded on first use: they need pyspark features a read does not
    from .stream.reader import PulsarStreamReader
    from .stream.writer import PulsarStreamWriter

__all__ = ["SPARK_SCHEMA", "PulsarDataSource"]


def _spark_schema() -> StructType:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(ROW_SCHEMA)


#: The row schema (:data:`pulsar_spark.protocol.ROW_SCHEMA`) as Spark types.
SPARK_SCHEMA = _spark_schema()


def _check_projection(schema: StructType, expected: StructType) -> None:
    """A ``.schema(...)`` given to a read: some of the row schema's columns, each with its
    own type (they are all the read yields: Spark moves fewer columns, a copy of ``value``
    only is about twice as fast). Anything else is refused, naming the column at fault."""
    types = {field.name: field.dataType for field in expected.fields}
    names = schema.names
    wrong = [
        f"{field.name} {field.dataType.simpleString()}"
        + (
            f" (here {types[field.name].simpleString()})"
            if field.name in types
            else " (no such column)"
        )
        for field in schema.fields
        if types.get(field.name) != field.dataType
    ]
    if wrong or not names or len(set(names)) != len(names):
        fault = ", ".join(wrong) if wrong else "no column, or one named twice"
        msg = (
            f"the schema given to the pulsar source does not fit: {fault}. Give some of the "
            "row schema's columns with their types ("
            + ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in expected.fields)
            + "), `value` typed by the topic's schema or by avroSchema/jsonSchema; or leave "
            ".schema(...) out and select or cast columns after load()"
        )
        raise PulsarSchemaError(msg)


def _check_consume_marked(schema: StructType, parsed: PulsarOptions) -> None:
    """``cryptoFailureAction=consume`` hands on a message that does not decrypt as it
    is, ciphertext in ``value``, marked only by its ``properties``
    (``pulsar.encryption.keys``...): a projection must keep that column."""
    column = "__messageProperties" if parsed.row_layout == STREAMNATIVE else "properties"
    if parsed.crypto_failure_action != "consume" or column in schema.names:
        return
    msg = (
        "is consume, which hands on a message that does not decrypt as it is (its `value` "
        f"is ciphertext), marked as such only by its `{column}` column "
        "(pulsar.encryption.keys and more). The schema given to the read ("
        + ", ".join(schema.names)
        + f") leaves out the column `{column}`, so its ciphertext could not be told from "
        f"data: add `{column} map<string,string>` to .schema(...), or use "
        "cryptoFailureAction fail (the default) or discard"
    )
    raise PulsarOptionError(option="cryptoFailureAction", message=msg)


def _check_consume_raw(read: ReadSchema, parsed: PulsarOptions) -> None:
    """``cryptoFailureAction=consume`` hands on ciphertext, which no schema decodes: a read
    that decodes ``value`` (the topic's schema or the user's) would fail on it, or with
    ``decodeErrorMode=deadLetter`` take it for a bad value. Such reads are refused."""
    if parsed.crypto_failure_action != "consume" or read.reader is None:
        return
    msg = (
        "is consume, which hands on a message that does not decrypt as it is (its `value` "
        f"is ciphertext), but this read decodes `value` with {read.origin} "
        f"({read.reader.type.name}), which ciphertext cannot be decoded with. Use "
        "schemaMode=raw with consume (values stay bytes, and `properties` marks the "
        "ciphertext), or cryptoFailureAction fail (the default) or discard"
    )
    raise PulsarOptionError(option="cryptoFailureAction", message=msg)


def _sink_columns(schema: StructType) -> tuple[SinkColumns | None, StructType]:
    """How the DataFrame's columns are written (StreamNative's ``__key``... columns, and
    its other columns made into ``value``: :func:`.streamnative_rows.sink_columns`; None:
    as they are), and the sink's columns then."""
    names = schema.fieldNames()
    if "value" in names and not any(name.startswith("__") for name in names):
        return None, schema  # our shape: check_columns says what does not fit
    columns = sink_columns(arrow_for(schema))
    return columns, (spark_schema(columns.schema) if columns.maps else schema)


class PulsarDataSource(DataSource):
    """Apache Pulsar topics as a Spark batch source and sink (format ``"pulsar"``)."""

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.parsed: PulsarOptions = parse_options(options)
        #: The read's schema, planned by schema() (it goes to the reader with the source).
        self.read_schema: ReadSchema | None = None

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> StructType:
        """The row schema; with typed values (the topic's schema or the user's), planned
        now, once (see :mod:`.read_schema`)."""
        if self._selects_nothing():
            return SPARK_SCHEMA  # a write, or a read that _check_read refuses
        return spark_schema(self._planned().columns)

    def _selects_nothing(self) -> bool:
        parsed = self.parsed
        return (parsed.topic, parsed.topics, parsed.topics_pattern) == (None, None, None)

    def _planned(self) -> ReadSchema:
        if self.read_schema is None:
            from .read_schema import plan_for

            self.read_schema = plan_for(self.parsed)
        return self.read_schema

    def _check_read(self, schema: StructType, scope: Scope) -> ReadSchema:
        self.parsed.check_scope(scope)
        if self._selects_nothing():
            msg = "reads need one of topic, topics or topicsPattern"
            raise PulsarOptionError(option="topic", message=msg)
        read = self._planned()
        _check_consume_raw(read, self.parsed)
        expected = spark_schema(read.columns)
        if schema != expected:
            _check_projection(schema, expected)
            _check_consume_marked(schema, self.parsed)
        if scope is Scope.STREAM_READ:  # a stream's plan shows its options (not a batch's)
            warn_unredacted_keys(self.options)
        return read

    def _check_write(
        self, schema: StructType, scope: Scope
    ) -> tuple[tuple[str, ...], dict[str, WritePlan], SinkColumns | None]:
        """A writer's columns, driver-side write plans and sink-column mapping (the
        arguments after the options of :class:`PulsarArrowWriter`), once the options
        and the DataFrame's columns are checked for ``scope``."""
        self.parsed.check_scope(scope)
        columns, schema = _sink_columns(schema)
        check_columns(schema, self.parsed)
        # The DataFrame's plan first: one that cannot be written fails as such, and before
        # anything of the topic's (or its namespace's) is touched.
        plans = plan_topic_writes(self.parsed, schema, () if columns is None else columns.packed)
        check_transactions(self.parsed)
        return tuple(schema.fieldNames()), plans, columns

    def reader(self, schema: StructType) -> PulsarBatchReader:
        read = self._check_read(schema, Scope.BATCH_READ)
        if pushdown_asked(self.parsed.push_filters):  # see .pushdown
            return PulsarFilteringReader(self.parsed, read, schema)
        return PulsarBatchReader(self.parsed, read, schema)

    def writer(self, schema: StructType, overwrite: bool) -> PulsarArrowWriter:
        if overwrite:
            msg = (
                "the pulsar sink only appends: a topic cannot be overwritten. Use "
                '.mode("append") (messages already in the topic stay).'
            )
            raise PulsarWriteError(msg)
        writer = PulsarArrowWriter(self.parsed, *self._check_write(schema, Scope.BATCH_WRITE))
        writer.prepare()
        return writer

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        from .stream.reader import PulsarStreamReader

        read = self._check_read(schema, Scope.STREAM_READ)
        # Streams start at the end by default, as Kafka's source does.
        return PulsarStreamReader(self.parsed.for_stream_read(), read, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        from .stream.writer import PulsarStreamWriter

        if overwrite:
            # Spark asks for overwrite in complete mode: an aggregation's whole result, again
            # every trigger. Update mode never gets here (Spark refuses it for Python sinks).
            msg = (
                'the pulsar sink only appends: outputMode("complete") would send the whole '
                'result again every trigger. Use outputMode("append") (an aggregation needs a '
                "watermark), or foreachBatch(lambda batch, batch_id: batch.write"
                '.format("pulsar")...mode("append").save()) to send each trigger\'s rows '
                "(see the README's 'Spark's output modes and save modes')"
            )
            raise PulsarWriteError(msg)
        writer = PulsarStreamWriter(self.parsed, *self._check_write(schema, Scope.STREAM_WRITE))
        writer.check()
        return writer
