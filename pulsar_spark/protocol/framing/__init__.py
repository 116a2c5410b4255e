"""Framing: the frame codec's public names, gathered from the modules that hold them.

- :mod:`.format`: size limits, magic numbers, the command type table;
- :mod:`.encode`: commands (and SEND/MESSAGE payloads) to bytes;
- :mod:`.decode`: one frame's bytes to a :class:`Frame`;
- :mod:`.stream`: :class:`FrameDecoder`, a byte stream cut into frames.

The wire grammar stands at the top of the encoder and decoder modules.
"""

from __future__ import annotations

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
