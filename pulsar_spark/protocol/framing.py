"""Framing: the frame codec's public names, gathered from the modules that hold them.

- :mod:`.frame_format`: size limits, magic numbers, the command type table;
- :mod:`.frame_encode`: commands (and SEND/MESSAGE payloads) to bytes;
- :mod:`.frame_decode`: one frame's bytes to a :class:`Frame`;
- :mod:`.frame_stream`: :class:`FrameDecoder`, a byte stream cut into frames.

The wire grammar stands at the top of the encoder and decoder modules.
"""

from __future__ import annotations

from .frame_decode import Frame, decode_frame_body
from .frame_encode import encode_command, encode_payload_command
from .frame_format import (
    DEFAULT_MAX_FRAME_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    FRAME_PADDING,
    command_name,
    frame_limit_for,
    subcommand,
)
from .frame_stream import FrameDecoder

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
