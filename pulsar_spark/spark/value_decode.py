"""Decoding in the task: each Arrow batch's ``value`` (and a KEY_VALUE ``key``) into the read's
types, message by message with the schema version it was written with.

:class:`ValueDecoder` takes the batches of one topic partition with the row
schema and gives them with the :class:`~.read_schema.ReadSchema`'s. The rows
of a batch are grouped by their ``schemaVersion``; each version's schema is
fetched once (the client caches it too) and its values decoded into the
reader schema, resolved by Avro's rules (added fields take their defaults,
removed ones are skipped, types promote); protobuf values by protobuf's rule
(by field number with the reader's descriptor: unknown fields skipped, missing
ones default), a field number whose type changed beyond what the wire can
carry being a version that does not resolve. A message without a version is
read as written with the reader schema.

A value that does not decode fails the task with
:class:`~pulsar_spark.columnar.values.errors.SchemaDecodeError` naming the
topic, message id, schema version and field, unless the read is in
dead-letter mode: then the row's typed columns are null and ``decodeError``
holds the text. A version that does not resolve into the reader schema
raises :class:`~.errors.SchemaChangedError` saying what changed (a stream: to
restart the query).

A read planned without a schema (the topics had none, or BYTES) gives the
values as bytes; when its messages carry a version of a typed schema (the
topic gained one after planning, and it still has one), the batch fails with
:class:`~.errors.SchemaChangedError` naming the type: the query reads typed
values once restarted (``schemaMode=raw`` keeps bytes). Nothing here imports
pyspark.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_spark.columnar import (
    Decoded,
    SchemaDecodeError,
    SchemaError,
    SchemaResolutionError,
    decode_values,
    decoded_type,
    split_inline,
)
from pulsar_spark.protocol.schemas.info import KeyValueEncoding, SchemaInfo, split_key_value
from pulsar_spark.protocol.schemas.types import SchemaType

from .errors import SchemaChangedError
from .read_schema import ReadSchema
from .schema_change import describe_change

__all__ = ["ValueDecoder"]

#: Fetches a topic's schema of a version (None: the broker has no such version).
Fetch = Callable[[int], SchemaInfo | None]
#: The topic's latest schema now (None: it has none).
Latest = Callable[[], SchemaInfo | None]


class ValueDecoder:
    """Decodes one topic's batches (see the module docstring).

    Args:
        read: the read's schema, from planning.
        topic: the topic (or partition) read, for errors.
        fetch: the topic's schema of a version.
        stream: whether this is a streaming read (its errors say to restart the query).
        latest: the topic's latest schema, asked when a read planned without a schema
            meets a typed version (a schema deleted since leaves the values bytes);
            None: the version's schema decides alone.
    """

    def __init__(
        self,
        read: ReadSchema,
        topic: str,
        fetch: Fetch,
        *,
        stream: bool = False,
        latest: Latest | None = None,
    ) -> None:
        self.read = read
        self.topic = topic
        self.fetch = fetch
        self.stream = stream
        self.latest = latest
        self._writers: dict[int, SchemaInfo] = {}
        self._types: dict[SchemaInfo, pa.DataType] = {}
        #: Versions seen by a read without a schema whose values stay bytes.
        self._untyped: set[int] = set()

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        read = self.read
        if read.reader is None:
            if not read.raw:
                self._check_still_untyped(batch)
            if not read.dead_letter:
                return batch
            columns = [*batch.columns, pa.nulls(batch.num_rows, pa.string())]
            return pa.RecordBatch.from_arrays(columns, schema=read.arrow)
        value, key, errors = self._decode_batch(batch, read.reader)
        columns = list(batch.columns)
        names = batch.schema.names
        columns[names.index("value")] = value
        if key is not None:
            columns[names.index("key")] = key
        if read.dead_letter:
            columns.append(errors if errors is not None else pa.nulls(batch.num_rows, pa.string()))
        return pa.RecordBatch.from_arrays(columns, schema=read.arrow)

    def _check_still_untyped(self, batch: pa.RecordBatch) -> None:
        """Fail a read planned without a schema on messages of a typed schema version."""
        versions = batch.column("schemaVersion")
        if versions.null_count == len(versions):
            return
        for version in pc.unique(versions.drop_null()).to_pylist():
            if version in self._untyped:
                continue
            written = self.fetch(version)
            if written is None or written.type.is_bytes:
                self._untyped.add(version)  # bytes, or no schema (any more)
                continue
            now = written if self.latest is None else self.latest()
            if now is None or now.type.is_bytes:
                self._untyped.add(version)  # the topic's schema is bytes, or gone, now
                continue
            msg = (
                f"{self.topic}: the query was planned when the topic had no schema "
                f"({self.read.origin}: values read as binary), but messages now carry schema "
                f"version {version} ({written.describe()}); the topic's schema is "
                f"{now.describe()}."
            )
            if self.stream:
                msg += (
                    " Restart the query to read typed values, or set schemaMode=raw to go "
                    "on reading bytes."
                )
            else:
                msg += " load() the DataFrame again to read typed values, or set schemaMode=raw."
            raise SchemaChangedError(msg)

    # -- grouping by version -------------------------------------------------------------

    def _decode_batch(
        self, batch: pa.RecordBatch, reader: SchemaInfo
    ) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
        versions = batch.column("schemaVersion")
        if versions.null_count == len(versions):
            groups: list[tuple[int | None, np.ndarray | None]] = [(None, None)]
        else:
            found = pc.unique(versions).to_pylist()
            if len(found) == 1:
                groups = [(found[0], None)]
            else:
                numbers = versions.fill_null(-(2**63)).to_numpy(zero_copy_only=False)
                valid = versions.is_valid().to_numpy(zero_copy_only=False)
                groups = [
                    (
                        v,
                        np.flatnonzero((numbers == v) & valid)
                        if v is not None
                        else np.flatnonzero(~valid),
                    )
                    for v in found
                ]
        parts = []
        for version, rows in groups:
            sub = batch if rows is None else batch.take(pa.array(rows))
            parts.append(self._decode_group(sub, version, reader))
        if len(parts) == 1:
            return parts[0]
        order = np.concatenate([rows for _, rows in groups if rows is not None])
        back = pa.array(np.argsort(order, kind="stable"))
        pieces = list(zip(*parts, strict=True))
        return tuple(  # type: ignore[return-value]
            None if piece[0] is None else pa.concat_arrays(list(piece)).take(back)
            for piece in pieces
        )

    def _writer(self, version: int | None, reader: SchemaInfo) -> SchemaInfo:
        if version is None:
            return reader
        found = self._writers.get(version)
        if found is None:
            found = self.fetch(version)
            if found is None:
                msg = (
                    f"{self.topic}: messages carry schema version {version}, which the broker "
                    f"does not have (deleted?); the query reads {self.read.origin}"
                )
                raise SchemaChangedError(msg)
            self._writers[version] = found
        return found

    def _decode_group(
        self, batch: pa.RecordBatch, version: int | None, reader: SchemaInfo
    ) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
        writer = self._writer(version, reader)
        collect = self.read.dead_letter
        try:
            if reader.type is SchemaType.KEY_VALUE:
                return self._key_value(batch, writer, reader, collect)
            value, errors = self._decode(writer, reader, batch.column("value"), collect)
        except SchemaDecodeError as exc:
            raise self._located(exc, batch, version) from None
        except SchemaResolutionError as exc:
            raise self._changed(version, writer, reader, exc) from None
        return value, None, errors

    def _key_value(
        self, batch: pa.RecordBatch, writer: SchemaInfo, reader: SchemaInfo, collect: bool
    ) -> tuple[pa.Array, pa.Array | None, pa.Array | None]:
        if writer.type is not SchemaType.KEY_VALUE:
            msg = f"{writer.describe()} values cannot be read as KEY_VALUE"
            raise SchemaResolutionError(msg, topic=self.topic)
        written, wanted = split_key_value(writer), split_key_value(reader)
        payload = batch.column("value")
        if written.encoding is KeyValueEncoding.INLINE:
            keys, values, bad = split_inline(payload)
            if bad.any():
                row = int(np.flatnonzero(bad)[0])
                reason = "the payload is not a KEY_VALUE INLINE pair (int32 length + bytes, twice)"
                error = SchemaDecodeError(reason, row=row, topic=self.topic)
                if not collect:
                    raise error
        else:
            keys, values, bad = batch.column("key"), payload, None
        key, key_errors = self._decode(written.key, wanted.key, keys, collect)
        value, value_errors = self._decode(written.value, wanted.value, values, collect)
        if not collect:
            return value, key, None
        errors = pc.coalesce(value_errors, key_errors) if key_errors is not None else value_errors
        if bad is not None and bad.any():
            text = pa.array([error.text() if b else None for b in bad.tolist()], pa.string())
            errors = pc.coalesce(text, errors) if errors is not None else text
        assert errors is not None
        ok = errors.is_null()
        key = pc.if_else(ok, key, pa.nulls(len(key), key.type))
        value = pc.if_else(ok, value, pa.nulls(len(value), value.type))
        return value, key, errors

    # -- one schema pair -----------------------------------------------------------------

    def _type(self, info: SchemaInfo) -> pa.DataType:
        found = self._types.get(info)
        if found is None:
            found = self._types[info] = decoded_type(info, topic=self.topic)
        return found

    def _decode(
        self, writer: SchemaInfo, reader: SchemaInfo, values: pa.Array, collect: bool
    ) -> Decoded:
        dtype = self._type(reader) if reader.type is SchemaType.JSON else None
        return decode_values(
            writer, reader, values, topic=self.topic, collect=collect, reader_type=dtype
        )

    # -- errors --------------------------------------------------------------------------

    def _located(
        self, exc: SchemaDecodeError, batch: pa.RecordBatch, version: int | None
    ) -> SchemaDecodeError:
        """The error naming the topic, message id and schema version instead of the row."""
        message_id = None
        if 0 <= exc.row < batch.num_rows:
            message_id = batch.column("messageId")[exc.row].as_py()
        return SchemaDecodeError(
            exc.reason,
            row=exc.row,
            topic=exc.topic or self.topic,
            field=exc.field,
            message_id=message_id,
            schema_version=version,
        )

    def _changed(
        self, version: int | None, writer: SchemaInfo, reader: SchemaInfo, exc: Exception
    ) -> SchemaChangedError:
        which = (
            "messages without a schema version"
            if version is None
            else (f"messages written with schema version {version}")
        )
        reason = exc.reason if isinstance(exc, SchemaError) else str(exc)
        field = f" (field {exc.field})" if isinstance(exc, SchemaError) and exc.field else ""
        msg = (
            f"{self.topic}: {which} cannot be read as the query's schema ({self.read.origin}): "
            f"{reason}{field}. What changed: {describe_change(writer, reader)}."
        )
        if self.stream:
            msg += " Restart the query to read with the topic's new schema."
        else:
            msg += " Give a schema both resolve into (avroSchema), or read with schemaMode=raw."
        return SchemaChangedError(msg)
