"""Data loss in a stream: reported (``failOnDataLoss``) and checked where a micro-batch starts."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..client import PulsarClient
from ..protocol.message_id import MessageId
from ..protocol.position import Position
from .errors import DataLossError
from .options import PulsarOptions

if TYPE_CHECKING:
    from .stream_reader import PulsarStreamPartition

__all__ = ["check_start", "lost"]

log = logging.getLogger("pulsar_spark.spark.stream_reader")


def check_start(
    client: PulsarClient, part: PulsarStreamPartition, options: PulsarOptions
) -> tuple[Position, bool]:
    """Where the micro-batch reads from, and whether a loss was reported: when the
    entry it starts from is gone, the entry planning saw after it if that is still
    there (retention removed the start's ledger, nothing after it), else a loss
    (``failOnDataLoss``: :class:`DataLossError`; else a warning, and the read goes on
    from the first message still available)."""
    mid = part.start.message_id
    if mid is None:
        return part.start, False
    if client.entry_exists(part.topic, MessageId(mid.ledger, mid.entry, mid.partition, -1)):
        return part.start, False
    after = part.successor
    if after and after.message_id and client.entry_exists(part.topic, after.message_id):
        log.info(
            "%s: the ledger of the stream's position %s was removed, not the entry after "
            "it, %s: nothing lost, reading from it",
            *(part.topic, part.start, after),
        )
        return after, False
    lost(
        options,
        f"{part.topic}: the stream's position {part.start} is no longer available and "
        "nothing held what followed it (a subscription expired, deleted or moved by a "
        "message TTL, a truncation, the topic deleted): messages that followed it may be "
        "lost",
        "reading on from the first message still available",
    )
    return part.start, True


def lost(options: PulsarOptions, what: str, instead: str) -> None:
    """Data loss: :class:`DataLossError` with ``failOnDataLoss``, else a warning."""
    if options.fail_on_data_loss:
        msg = f"{what}. Set failOnDataLoss=false to go on ({instead})."
        raise DataLossError(msg)
    log.warning("%s; %s (failOnDataLoss=false)", what, instead)
