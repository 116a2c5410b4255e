"""The errors of the Spark layer, each a :class:`~pulsar_spark.protocol.errors.PulsarError`.

::

    PulsarError                     retriable?
    +-- PulsarOptionError           no   a bad, missing, unknown or conflicting option
    +-- PulsarSchemaError           no   a read given a schema of its own
    +-- TopicSchemaError            no   topics' schemas a typed read cannot use (different
                                         across topics, unmappable, not the user's kind)
    +-- SchemaChangedError          no   a message whose schema version does not resolve
                                         into the query's schema (a stream: restart it)
    +-- PulsarWriteError            no   a DataFrame the sink cannot write as it is
    +-- CheckpointOffsetError       no   a stream offset in the checkpoint that does not parse
    +-- DataLossError               no   messages of a read's range lost: its start gone,
                                         entries removed under it, a chunked message
                                         begun in it never completed (failOnDataLoss)
    +-- SparkVersionError           no   a feature that needs a newer Spark
    +-- StreamWriteError            no   the stream writer outside a streaming task, or
                                         past what sequence ids can encode

Each also derives from the builtin its callers caught before (``ValueError`` or
``RuntimeError``). Errors of the client (a lost connection, a timeout) pass
through the Spark layer with their own classes, retriable when they are.
Nothing here imports pyspark.
"""

from __future__ import annotations

from pulsar_spark.protocol.errors import PulsarError

__all__ = [
    "CheckpointOffsetError",
    "DataLossError",
    "PulsarOptionError",
    "PulsarSchemaError",
    "PulsarWriteError",
    "SparkVersionError",
    "SchemaChangedError",
    "StreamWriteError",
    "TopicSchemaError",
]


class PulsarOptionError(PulsarError, ValueError):
    """A bad, missing, unknown or conflicting option; ``option`` names it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"pulsar option {option!r}: {message}")
        self.option = option
        self.reason = message

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle as cls(*args); args holds the formatted text only.
        return (type(self), (self.option, self.reason))


class PulsarSchemaError(PulsarError, ValueError):
    """``spark.read.schema(...)`` on the pulsar source, whose schema is fixed."""


class TopicSchemaError(PulsarError, ValueError):
    """The topics' schemas do not allow a typed read (different schemas across topics, a
    type with no Spark type, a user schema of another kind than a topic's)."""


class SchemaChangedError(PulsarError, RuntimeError):
    """Messages written with a schema version that cannot be read as the query's schema
    (the topic's schema changed incompatibly since planning); the text says what changed."""


class PulsarWriteError(PulsarError, ValueError):
    """The DataFrame cannot be written as it is (columns, types, save mode)."""


class CheckpointOffsetError(PulsarError, ValueError):
    """A stream offset (from Spark's checkpoint) that is not a position the stream writes."""


class DataLossError(PulsarError, RuntimeError):
    """Messages of a read's range are lost: it could not start where it was asked to,
    entries were removed under it, or a chunked message begun in it never completed
    (with ``failOnDataLoss=true``)."""


class SparkVersionError(PulsarError, RuntimeError):
    """A feature needs a newer Spark than the one installed."""


class StreamWriteError(PulsarError, RuntimeError):
    """The stream writer cannot give a task's rows their deterministic sequence ids."""
