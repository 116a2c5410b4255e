"""Frame streams: :class:`FrameDecoder` cuts received bytes into frames, checking each size first.

Wire grammar of the stream (integers big-endian)::

    stream   = frame*
    frame    = total_size:u32  rest[total_size]

``total_size`` counts everything after itself. It is checked against the
frame limit (which counts the four size bytes too) as soon as those four
bytes arrive, before the frame is buffered; ``rest`` is decoded by
:func:`~.decode.decode_frame_body`. Nothing here does I/O: the decoder
takes bytes with :meth:`~FrameDecoder.feed` and hands back complete frames.
"""

from __future__ import annotations

from typing import NoReturn

from ..errors import FrameTooLarge, ProtocolError, TruncatedFrame
from .decode import Frame, decode_frame_body
from .format import DEFAULT_MAX_FRAME_SIZE, SIZE_PREFIX, U32, frame_limit_for

__all__ = ["FrameDecoder"]


class FrameDecoder:
    """Incremental, sans-IO frame decoder.

    Feed it whatever bytes arrive with :meth:`feed`; take complete frames
    with :meth:`next_frame` (``None`` means "need more bytes") or by iterating.
    At end of input, :meth:`close` raises :class:`TruncatedFrame` if a partial
    frame is left. After any error the stream cannot be resynchronised, and
    every later call raises the same error.

    Each frame's size is checked against the limit before its body is
    buffered; take the frames that are ready after each :meth:`feed` and the
    buffer never holds more than one frame plus one received piece.

    Args:
        max_frame_size: largest ``total_size + 4`` accepted. Follow the broker's
            ``max_message_size`` with :meth:`set_max_message_size`.
    """

    __slots__ = ("_base", "_buf", "_error", "_pos", "max_frame_size")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self._buf = bytearray()
        self._pos = 0  # start of the next frame in _buf
        self._base = 0  # stream offset of _buf[0]
        self._error: Exception | None = None
        self.max_frame_size = max_frame_size

    def set_max_message_size(self, max_message_size: int) -> None:
        """Follow ``CommandConnected.max_message_size``."""
        self.max_frame_size = frame_limit_for(max_message_size)

    @property
    def offset(self) -> int:
        """Stream offset of the next frame."""
        return self._base + self._pos

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add received bytes. Only buffers; frames come from :meth:`next_frame`.

        Raises:
            FrameTooLarge: the next frame to be taken declares a size above the
                limit; raised as soon as its 4-byte size is here, before its
                body is buffered. (An oversized frame queued behind frames not
                yet taken is reported by :meth:`next_frame` once they are.)
        """
        if self._error is not None:
            raise self._error
        if self._pos and self._pos >= len(self._buf) // 2:
            # Drop consumed bytes once they are at least half the buffer, so
            # each byte is moved O(1) times overall.
            del self._buf[: self._pos]
            self._base += self._pos
            self._pos = 0
        self._buf += data
        self._check_next_size()

    def close(self) -> None:
        """Declare end of input.

        Raises:
            TruncatedFrame: a partial frame is buffered.
        """
        if self._error is not None:
            raise self._error
        # Complete frames not taken yet are fine; only a partial one at the end is not.
        buf, pos, end = self._buf, self._pos, len(self._buf)
        while end - pos >= SIZE_PREFIX:
            (total,) = U32.unpack_from(buf, pos)
            if pos + SIZE_PREFIX + total > end:
                break
            pos += SIZE_PREFIX + total
        left = end - pos
        if left:
            need = "its 4-byte size"
            if left >= SIZE_PREFIX:
                (total,) = U32.unpack_from(buf, pos)
                need = f"{total + SIZE_PREFIX} bytes"
            msg = f"input ends inside a frame: {left} bytes present of {need}"
            self._fail(TruncatedFrame(msg, offset=self._base + pos))

    def __iter__(self) -> FrameDecoder:
        return self

    def __next__(self) -> Frame:
        frame = self.next_frame()
        if frame is None:
            raise StopIteration
        return frame

    def next_frame(self) -> Frame | None:
        """The next complete frame, or ``None`` if more bytes are needed.

        Raises:
            ProtocolError: (a subclass of) the frame is oversized or does not decode.
        """
        if self._error is not None:
            raise self._error
        buf, pos = self._buf, self._pos
        if len(buf) - pos < SIZE_PREFIX:
            return None
        # Checked here (against the limit in force now) as well as in feed():
        # a frame taken before this one may have changed the limit.
        self._check_next_size()
        (total,) = U32.unpack_from(buf, pos)
        end = pos + SIZE_PREFIX + total
        if end > len(buf):
            return None
        data = bytes(buf[pos + SIZE_PREFIX : end])
        offset = self._base + pos
        self._pos = end
        try:
            return decode_frame_body(data, offset)
        except Exception as exc:
            self._error = exc
            raise

    # -- internals -----------------------------------------------------------

    def _check_next_size(self) -> None:
        """Reject an oversized frame as soon as its size prefix is visible."""
        buf, pos = self._buf, self._pos
        if len(buf) - pos >= SIZE_PREFIX:
            (total,) = U32.unpack_from(buf, pos)
            if total + SIZE_PREFIX > self.max_frame_size:
                msg = (
                    f"frame declares {total + SIZE_PREFIX} bytes, above the frame limit "
                    f"of {self.max_frame_size} bytes"
                )
                self._fail(FrameTooLarge(msg, offset=self._base + pos))

    def _fail(self, exc: ProtocolError) -> NoReturn:
        self._error = exc
        self._buf = bytearray()
        self._pos = 0
        raise exc
