"""How long and how many incomplete chunked messages a read keeps: :class:`ChunkLimits`.

The bounds of :class:`~.chunk_bounds.ChunkBounds` besides its bytes (half the read's
budget), as the Java consumer names them:

``max_pending``
    messages being put together at once (``maxPendingChunkedMessage``; the Java
    consumer's default is 10, ours 100: the byte bound keeps their memory in check);
``expiry``
    seconds an incomplete message may be kept, from its first chunk's arrival
    (``expireTimeOfIncompleteChunkedMessageMillis``, 60 s; 0: no age bound);
``drop_incomplete``
    beyond any bound, drop the oldest incomplete message with a WARNING naming it
    (``autoAckOldestChunkedMessageOnQueueFull``) instead of failing the read naming it.

The Java consumer always drops an expired message; here a read fails by default,
since a message whose chunks come slowly (a throttled producer, a reader held back by
its budget) would otherwise be lost from the read, and a retried task reads it again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidArgument

__all__ = ["ChunkLimits"]


@dataclass(frozen=True, slots=True)
class ChunkLimits:
    """Bounds of the chunked messages a read puts together (see the module).

    Raises:
        InvalidArgument: ``max_pending`` below 1 or a negative ``expiry``.
    """

    max_pending: int = 100
    expiry: float = 60.0
    drop_incomplete: bool = False

    def __post_init__(self) -> None:
        if self.max_pending < 1:
            msg = f"max_pending (chunked messages) must be at least 1, not {self.max_pending}"
            raise InvalidArgument(msg)
        if not self.expiry >= 0:
            msg = (
                "expiry (of incomplete chunked messages) must be 0 or more seconds, "
                f"not {self.expiry!r}"
            )
            raise InvalidArgument(msg)
