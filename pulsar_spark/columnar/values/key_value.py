"""KEY_VALUE payloads from the encoded halves, columnar: INLINE (both halves in the payload)
and SEPARATED (the key in the message key as Base64, the value as the payload).

::

    INLINE      int32 BE len(key) + key + int32 BE len(value) + value   (-1 and no bytes
                for a null half; a row is never null as a whole)
    SEPARATED   payload = the value (null: null_value); partition_key = Base64 of the
                key, with partition_key_b64_encoded (null key: no partition key)

The halves are binary arrays of payloads (null where the half is null), as
the other ``encode_*`` modules make them, each with its own schema.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..arrays import Mask
from ..pieces import Piece, base64_piece, binary_piece, expand, fixed, join, to_arrow
from .avro.encode_nodes import valid_mask

__all__ = ["inline_payloads", "separated_keys"]


def _half(array: pa.Array) -> tuple[Piece, Piece]:
    """The length prefix (-1 where null) and the bytes of one half."""
    valid = valid_mask(array)
    kept = array.filter(pa.array(valid)) if array.null_count else array
    body = expand(binary_piece(kept), valid) if array.null_count else binary_piece(kept)
    lens = np.where(valid, body.lens, -1).astype(">i4")
    return fixed(lens.view(np.uint8).reshape(-1, 4)), body


def inline_payloads(keys: pa.Array, values: pa.Array) -> pa.Array:
    """INLINE KEY_VALUE payloads of encoded keys and values (binary arrays of equal length).

    Raises:
        ValueError: arrays of different lengths.
    """
    if len(keys) != len(values):
        msg = f"{len(keys)} keys but {len(values)} values"
        raise ValueError(msg)
    key_len, key = _half(keys)
    value_len, value = _half(values)
    return to_arrow(join([key_len, key, value_len, value], len(keys)))


def separated_keys(keys: pa.Array) -> pa.Array:
    """The partition keys of SEPARATED KEY_VALUE messages: the encoded keys as standard
    Base64 text (a string array, null where the key is null). The messages also need
    ``partition_key_b64_encoded``; the producer's rows set it for a binary ``key`` column,
    so passing the encoded keys as that column does both."""
    valid: Mask = valid_mask(keys)
    kept = keys.filter(pa.array(valid)) if keys.null_count else keys
    text = base64_piece(binary_piece(kept))
    if keys.null_count:
        text = expand(text, valid)
    out = to_arrow(text, valid if keys.null_count else None)
    return out.view(pa.large_string() if pa.types.is_large_binary(out.type) else pa.string())
