"""The partition of every row of an Arrow table at once, as a partitioned producer routes.

Keyed rows go to ``java_string_hash(key) % partitions``: the Java client's default
``JavaStringHash``, ``String.hashCode()`` over the UTF-16 code units of the key as
the wire carries it (bytes keys as Base64 text), masked to a non-negative int. The
hash is computed once per distinct key (Arrow's ``dictionary_encode``), for all
distinct keys at once with NumPy: ``h = sum(c[i] * 31 ** (len - 1 - i))`` modulo
2**32 is a cumulative sum of each code unit times a power of 31, per key. ASCII
keys (Base64 ones always) are their own code units; other keys are encoded to
UTF-16 one by one (once per distinct key). Keyless rows go round-robin: keyless
message ``m`` (counted over the producer's life) goes to partition
``(m // switch_every) % partitions``, so that each partition gets whole batches.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pulsar_spark.columnar.arrays import Int64s
from pulsar_spark.columnar.pieces import base64_piece, binary_piece

__all__ = ["java_string_hash", "java_string_hashes", "keyless_partitions", "row_partitions"]

_INT_MASK = 0x7FFF_FFFF


def java_string_hash(key: str) -> int:
    """``key.hashCode() & Integer.MAX_VALUE`` as the JVM computes it."""
    data = key.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFF_FFFF
    return h & _INT_MASK


def _hash_units(units: np.ndarray, offsets: Int64s) -> Int64s:
    """The masked hash of each key whose code units are ``units[offsets[k]:offsets[k+1]]``."""
    lens = np.diff(offsets)
    total = int(offsets[-1])
    if not total:
        return np.zeros(len(lens), np.int64)
    powers = np.ones(int(lens.max()), np.uint32)
    if len(powers) > 1:
        powers[1:] = np.cumprod(np.full(len(powers) - 1, 31, np.uint32), dtype=np.uint32)
    # Unit j of a key ending at e (exclusive) is multiplied by 31 ** (e - 1 - j).
    exponents = np.repeat(offsets[1:], lens) - 1 - np.arange(total, dtype=np.int64)
    terms = units.astype(np.uint32) * powers[exponents]
    sums = np.zeros(total + 1, np.uint32)
    np.cumsum(terms, dtype=np.uint32, out=sums[1:])
    hashes = sums[offsets[1:]] - sums[offsets[:-1]]  # modulo 2**32, as Java's int
    return (hashes & _INT_MASK).astype(np.int64)


def java_string_hashes(keys: pa.Array) -> Int64s:
    """:func:`java_string_hash` of each key of a string or binary array without nulls
    (binary keys hashed as their Base64 text, as the wire carries them)."""
    piece = binary_piece(keys)
    if not (pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type)):
        piece = base64_piece(piece)
    data = np.asarray(piece.data, np.uint8)
    offsets = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(piece.lens, out=offsets[1:])
    if not len(data) or int(data.max()) < 0x80:  # ASCII: a byte is a code unit
        return _hash_units(data, offsets)
    # Other text: each key's UTF-16 code units (surrogate pairs for the astral planes).
    encoded = [k.encode("utf-16-be") for k in keys.to_pylist()]
    units = np.frombuffer(b"".join(encoded), ">u2")
    np.cumsum([len(e) // 2 for e in encoded], out=offsets[1:])
    return _hash_units(units, offsets)


def keyless_partitions(first: int, count: int, switch_every: int, partitions: int) -> Int64s:
    """The partitions of keyless messages ``first`` to ``first + count - 1``."""
    numbers = np.arange(first, first + count, dtype=np.int64)
    return (numbers // max(switch_every, 1)) % partitions


def _combined(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return pa.concat_arrays(column.chunks) if column.num_chunks != 1 else column.chunk(0)
    return column


def row_partitions(
    table: pa.Table | pa.RecordBatch, partitions: int, first_keyless: int, switch_every: int
) -> tuple[Int64s, int]:
    """Each row's partition, and how many keyless rows the table has.

    ``table`` has an optional ``key`` column of strings or binaries (null: keyless);
    ``first_keyless`` is the number of keyless messages the producer sent before.
    """
    n = int(table.num_rows)
    if "key" not in table.schema.names:
        return keyless_partitions(first_keyless, n, switch_every, partitions), n
    keys = _combined(table.column("key"))
    encoded = pc.dictionary_encode(keys)
    indices = encoded.indices
    hashes = java_string_hashes(encoded.dictionary)
    keyed = hashes % partitions
    result = np.empty(n, np.int64)
    if not indices.null_count:
        result[:] = keyed[np.asarray(indices.to_numpy(zero_copy_only=False), np.int64)]
        return result, 0
    valid = np.asarray(indices.is_valid().to_numpy(zero_copy_only=False), np.bool_)
    picks = np.asarray(indices.fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    result[valid] = keyed[picks[valid]]
    keyless = n - int(valid.sum())
    result[~valid] = keyless_partitions(first_keyless, keyless, switch_every, partitions)
    return result, keyless
