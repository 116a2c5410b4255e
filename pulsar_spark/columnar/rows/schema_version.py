"""The ``schemaVersion`` column: each message's schema version, from its entry's metadata.

A producer with a schema stamps the version the broker gave it on every
message (MessageMetadata field 16, ``schema_version``: 8 bytes, big-endian
int64; the first version is 0). Every message of a batch shares its entry's
metadata, so the version is per entry. Empty bytes (the Java client copies an
empty version from producers without a schema) and bytes too short to hold a
version give null, as a message without one.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from pulsar_spark.protocol import PulsarApi_pb2 as pb

from ..arrays import Ints

__all__ = ["entry_schema_version", "schema_version_column"]


def entry_schema_version(metadata: pb.MessageMetadata) -> int | None:
    """The schema version an entry's messages carry, or None."""
    data = metadata.schema_version
    if len(data) < 8:
        return None
    return int.from_bytes(data[:8], "big", signed=True)


def schema_version_column(versions: list[int | None], row_entry: Ints) -> pa.Array:
    """Per row: the version of its entry (``versions`` per entry, ``row_entry`` each
    row's entry), int64, null where the entry carries none."""
    n = len(row_entry)
    if all(v is None for v in versions):
        return pa.nulls(n, pa.int64())
    known = np.array([v is not None for v in versions], np.bool_)
    numbers = np.array([0 if v is None else v for v in versions], np.int64)
    if known.all():
        return pa.array(numbers[row_entry])
    return pa.array(numbers[row_entry], mask=~known[row_entry])
