"""Data loss in a stream: reported (``failOnDataLoss``) and checked where a micro-batch starts."""

from __future__ import annotations

import logging

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol.ids.message_id import MessageId
from pulsar_spark.protocol.ids.position import Position

from ..errors import DataLossError
from ..options.parse import PulsarOptions

__all__ = ["check_start", "lost"]

log = logging.getLogger("pulsar_spark.spark.stream.reader")


def check_start(
    client: PulsarClient,
    topic: str,
    start: Position,
    successor: Position | None,
    options: PulsarOptions,
) -> tuple[Position, bool]:
    """Where a micro-batch's read of ``topic`` from ``start`` begins, and whether a loss
    was reported: when the entry it starts from is gone, ``successor`` (the entry
    planning saw after it, in a later ledger) if that is still
    there (retention removed the start's ledger, nothing after it), else a loss
    (``failOnDataLoss``: :class:`DataLossError`; else a warning, and the read goes on
    from the first message still available)."""
    mid = start.message_id
    if mid is None:
        return start, False
    if client.entry_exists(topic, MessageId(mid.ledger, mid.entry, mid.partition, -1)):
        return start, False
    after = successor
    if after and after.message_id and client.entry_exists(topic, after.message_id):
        log.info(
            "%s: the ledger of the stream's position %s was removed, not the entry after "
            "it, %s: nothing lost, reading from it",
            *(topic, start, after),
        )
        return after, False
    lost(
        options,
        f"{topic}: the stream's position {start} is no longer available and "
        "nothing held what followed it (a subscription expired, deleted or moved by a "
        "message TTL, a truncation, the topic deleted): messages that followed it may be "
        "lost",
        "reading on from the first message still available",
    )
    return start, True


def lost(options: PulsarOptions, what: str, instead: str) -> None:
    """Data loss: :class:`DataLossError` with ``failOnDataLoss``, else a warning."""
    if options.fail_on_data_loss:
        msg = f"{what}. Set failOnDataLoss=false to go on ({instead})."
        raise DataLossError(msg)
    log.warning("%s; %s (failOnDataLoss=false)", what, instead)
