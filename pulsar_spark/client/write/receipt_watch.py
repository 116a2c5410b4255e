"""A producer's oldest receipt overdue: the last batch's receipt lost, which no later one reveals.

Receipts come in order, so a lost receipt is found when the next one comes
(:meth:`~.producer.Producer._receipt`). The last batch's has no
next: with a send timeout it fails the producer in the end, but with none
(``send_timeout=0``, as Pulsar's deduplication guide recommends) ``flush()``
would wait for ever. So when the oldest pending batch (or its next chunk) has
had no receipt for the operation timeout with nothing moving on the connection
(no frame being written, none still arriving that the receipt could be queued
behind: :meth:`~pulsar_spark.client.net.connection.Connection.moving_at`), its receipt is taken for
lost: the producer is re-created and what is pending sent again, as for a lost
receipt found by the next one.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .outgoing import PendingBatch

if TYPE_CHECKING:
    from ..net.connection import Connection

__all__ = ["ReceiptWatch", "warn_overdue"]

log = logging.getLogger(__name__)


class ReceiptWatch:
    """Watches the oldest pending batch of one producer (see the module)."""

    __slots__ = ("_key", "_since")

    def __init__(self) -> None:
        #: (first sequence id, chunks confirmed, connection) of the batch watched.
        self._key: tuple[int, int, Connection] | None = None
        #: Monotonic time it became the oldest (or was sent again, or a chunk confirmed).
        self._since = 0.0

    def overdue(self, oldest: PendingBatch, conn: Connection | None, now: float) -> float | None:
        """Seconds ``oldest`` waited when its receipt is overdue (and the watch starts
        over), else None. ``conn``: the producer's connection; None while it is being
        re-created (the watch starts over once it is back)."""
        if conn is None:
            self._key = None
            return None
        key = (oldest.first, oldest.chunks_confirmed, conn)
        if key != self._key:
            self._key, self._since = key, now
            return None
        if now - max(self._since, conn.moving_at()) < conn.operation_timeout:
            return None
        self._key = None
        return now - self._since


def warn_overdue(producer: str, topic: str, batches: list[PendingBatch], waited: float) -> str:
    """Log that the receipts of ``batches`` (all pending, oldest first) are taken for
    lost; the reason for the re-creation."""
    ids = f"{batches[0].first} to {batches[-1].last}"
    log.warning(
        "producer %s on %s: no receipt for sequence ids %s in %.0f s, with nothing moving "
        "on the connection: re-creating the producer and sending them again (the broker "
        "drops them if it deduplicates; otherwise they may be stored twice)",
        producer,
        topic,
        ids,
        waited,
    )
    return f"receipts overdue for {ids}"
