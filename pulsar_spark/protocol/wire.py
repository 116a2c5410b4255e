"""Reading protobuf wire format by hand, for the few places that need raw fields.

Grammar (``varint`` = 7 bits a byte, low group first, high bit = more)::

    message = field*
    field   = key:varint value        key = field_number << 3 | wire_type
    value   = varint                  wire type 0
            | fixed[8]                wire type 1
            | length:varint bytes     wire type 2
            | fixed[4]                wire type 5

Used to peek at a BaseCommand's ``type`` when protobuf refuses the command,
and to re-tag message metadata fields as batch-item fields without decoding
their strings. :func:`text` reads a string field that protobuf handed back
as bytes (wire bytes that are not UTF-8).
"""

from __future__ import annotations

from collections.abc import Iterator

from .errors import WireError

__all__ = ["encode_varint", "fields", "read_varint", "text"]

_FIXED = {1: 8, 5: 4}


def read_varint(
    data: bytes | bytearray | memoryview, pos: int, end: int | None = None
) -> tuple[int, int]:
    """The varint at ``pos`` (before ``end``, by default the end of ``data``) and the
    position after it. Ten bytes may hold more than 64 bits: callers that need a
    ``uint64`` mask the value.

    Raises:
        WireError: the data ends inside it, or it is longer than 10 bytes.
    """
    if end is None:
        end = len(data)
    result = shift = 0
    while pos < end and shift < 64:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
    msg = f"truncated or over-long varint before byte {pos}"
    raise WireError(msg)


def fields(data: bytes | bytearray | memoryview) -> Iterator[tuple[int, int, int, int]]:
    """Each field as ``(field_number, wire_type, value_start, value_end)``.

    For wire type 2 the value range includes its length prefix, so that
    ``data[value_start:value_end]`` can be written again under another key.

    Raises:
        WireError: at the first field that cannot be read.
    """
    pos, end = 0, len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        wire, start = key & 7, pos
        if wire == 0:
            _, pos = read_varint(data, pos)
        elif wire == 2:
            size, pos = read_varint(data, pos)
            pos += size
        elif wire in _FIXED:
            pos += _FIXED[wire]
        else:
            msg = f"wire type {wire} at byte {start}"
            raise WireError(msg)
        if pos > end:
            msg = f"field {key >> 3} runs past the end ({end} bytes)"
            raise WireError(msg)
        yield key >> 3, wire, start, pos


def encode_varint(value: int) -> bytes:
    """``value`` (non-negative) as a protobuf varint."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def text(value: str | bytes) -> str:
    """A protobuf string field as ``str``.

    protobuf hands back ``bytes`` for a string field whose wire bytes are not
    valid UTF-8; those are decoded with U+FFFD replacements (as Java does).
    """
    return value if isinstance(value, str) else bytes(value).decode("utf-8", "replace")
