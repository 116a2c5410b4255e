"""Errors of typed decoding: a schema that has no Arrow type, schemas that do not resolve,
values that do not decode.

::

    PulsarError
    +-- SchemaError                 no   a schema or a value that does not fit it
        +-- UnmappableSchema        a schema (or part of one) without an Arrow type (ValueError)
        +-- SchemaResolutionError   a writer schema whose data cannot be read as the reader schema
        +-- SchemaDecodeError       a value that does not decode with its schema

Each names the topic (when the caller gave one) and the field path (``address.city``;
``tags[]`` for array items, ``attrs{}`` for map values). :class:`SchemaDecodeError` also
names the row (the index of the value in the array handed to the decoder), which the
caller turns into a message id and schema version with :meth:`SchemaDecodeError.at`.
"""

from __future__ import annotations

from pulsar_spark.protocol.errors import PulsarError

__all__ = ["SchemaDecodeError", "SchemaError", "SchemaResolutionError", "UnmappableSchema"]


def _where(topic: str, field: str) -> str:
    parts = []
    if topic:
        parts.append(f"topic {topic}")
    if field:
        parts.append(f"field {field}")
    return ", ".join(parts)


class SchemaError(PulsarError):
    """A schema, or a value, that typed decoding cannot use (not retriable).

    Args:
        reason: what is wrong.
        topic: the topic whose schema or message it is ("" if unknown).
        field: the field path ("" for the whole value).
    """

    def __init__(self, reason: str, *, topic: str = "", field: str = "") -> None:
        self.reason = reason
        self.topic = topic
        self.field = field
        where = _where(topic, field)
        super().__init__(f"{where}: {reason}" if where else reason)

    def __reduce__(self) -> tuple[object, ...]:
        # Rebuilt from its parts: the text alone would be wrapped a second time.
        return (_rebuild, (type(self), self.reason, self.topic, self.field))


class UnmappableSchema(SchemaError, ValueError):
    """A schema, or a part of it, that has no Arrow type (a union of two non-null
    types, a recursive record, an unknown type...), or that is not a valid schema."""


class SchemaResolutionError(SchemaError):
    """Data written with one schema cannot be read as another (Avro resolution rules):
    a reader field without a default that the writer lacks, types that do not promote."""


class SchemaDecodeError(SchemaError):
    """A value that does not decode with its schema: truncated, a bad length, an
    out-of-range union branch or enum index, text that is not UTF-8...

    Args:
        row: index of the value in the array that was decoded.
        message_id: the message's id, when the caller knows it (see :meth:`at`).
        schema_version: the schema version the value was decoded with, if known.
    """

    def __init__(
        self,
        reason: str,
        *,
        row: int,
        topic: str = "",
        field: str = "",
        message_id: str | None = None,
        schema_version: int | None = None,
    ) -> None:
        self.row = row
        self.message_id = message_id
        self.schema_version = schema_version
        who = f"message {message_id}" if message_id is not None else f"row {row}"
        if schema_version is not None:
            who += f" (schema version {schema_version})"
        super().__init__(f"{who}: {reason}", topic=topic, field=field)
        self.reason = reason

    def at(
        self, *, message_id: str | None = None, schema_version: int | None = None
    ) -> SchemaDecodeError:
        """The same error naming the message (and schema version) instead of the row."""
        return SchemaDecodeError(
            self.reason,
            row=self.row,
            topic=self.topic,
            field=self.field,
            message_id=message_id if message_id is not None else self.message_id,
            schema_version=schema_version if schema_version is not None else self.schema_version,
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_decode_error,
            (
                self.reason,
                self.row,
                self.topic,
                self.field,
                self.message_id,
                self.schema_version,
            ),
        )

    def text(self) -> str:
        """The text without the topic: what a dead-letter column holds for the row."""
        return f"field {self.field}: {self.reason}" if self.field else self.reason


def _rebuild(cls: type[SchemaError], reason: str, topic: str, field: str) -> SchemaError:
    return cls(reason, topic=topic, field=field)


def _rebuild_decode_error(
    reason: str,
    row: int,
    topic: str,
    field: str,
    message_id: str | None,
    schema_version: int | None,
) -> SchemaDecodeError:
    return SchemaDecodeError(
        reason,
        row=row,
        topic=topic,
        field=field,
        message_id=message_id,
        schema_version=schema_version,
    )
