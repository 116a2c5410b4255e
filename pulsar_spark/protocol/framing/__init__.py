"""Framing: the frame codec's public names, gathered from the modules that hold them.

- :mod:`.format`: size limits, magic numbers, the command type table;
- :mod:`.encode`: commands (and SEND/MESSAGE payloads) to bytes;
- :mod:`.decode`: one frame's bytes to a :class:`Frame`;
- :mod:`.stream`: :class:`FrameDecoder`, a byte stream cut into frames.

The wire grammar stands at the top of the encoder and decoder modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pulsar_spark.lazy import lazy_exports

if TYPE_CHECKING:
    from .decode import Frame, decode_frame_body
    from .encode import encode_command, encode_payload_command
    from .format import (
        DEFAULT_MAX_FRAME_SIZE,
        DEFAULT_MAX_MESSAGE_SIZE,
        FRAME_PADDING,
        command_name,
        frame_limit_for,
        subcommand,
    )
    from .stream import FrameDecoder

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Frame": "decode",
        "decode_frame_body": "decode",
        "encode_command": "encode",
        "encode_payload_command": "encode",
        "DEFAULT_MAX_FRAME_SIZE": "format",
        "DEFAULT_MAX_MESSAGE_SIZE": "format",
        "FRAME_PADDING": "format",
        "command_name": "format",
        "frame_limit_for": "format",
        "subcommand": "format",
        "FrameDecoder": "stream",
    },
)

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "FRAME_PADDING",
    "DEFAULT_MAX_FRAME_SIZE",
    "Frame",
    "FrameDecoder",
    "encode_command",
    "encode_payload_command",
    "command_name",
    "subcommand",
    "frame_limit_for",
    "decode_frame_body",
]
