"""Guessed item places checked against the items' metadata (an entry guessed wrong is split
exactly)."""

from __future__ import annotations

import numpy as np

from pulsar_spark.protocol.errors import ProtocolError

from ..arrays import Bytes, Ints, Mask
from .smm.columns import decode_smm_columns
from .smm.schema import SmmColumns

__all__ = ["place", "wrong_guess"]


def place(
    fit: Ints,
    item_first: Ints,
    counts: Ints,
    payload_starts: Ints,
    item_sizes: Ints,
    starts: Ints,
    sizes: Ints,
    guessed: Mask,
) -> None:
    """Put the guessed items of entries ``fit`` (in order) at their item numbers."""
    if not len(fit):
        return
    first = np.repeat(item_first[fit], counts[fit])
    rank = np.arange(len(first)) - np.repeat(np.cumsum(counts[fit]) - counts[fit], counts[fit])
    where = first + rank
    starts[where] = payload_starts
    sizes[where] = item_sizes
    guessed[where] = True


def wrong_guess(
    cols: SmmColumns,
    data: Bytes,
    smm_starts: Ints,
    starts: Ints,
    sizes: Ints,
    guessed: Mask,
    picked: Ints,
    item_entry: Ints,
) -> int | None:
    """An entry whose guessed item places do not agree with its items'
    ``payload_size`` (to be split exactly); None when every guess holds.

    Every item of a guessed entry is checked, picked or not: item ``k + 1``
    is where the guess put it only if item ``k``'s size was right.
    """
    wrong = guessed[picked] & (~cols.has_payload_size | (cols.payload_size != sizes[picked]))
    if wrong.any():
        return int(item_entry[picked[int(np.flatnonzero(wrong)[0])]])
    unpicked = np.ones(len(starts), np.bool_)
    unpicked[picked] = False
    unpicked &= guessed
    if not unpicked.any():
        return None
    others = np.flatnonzero(unpicked)
    try:
        more = decode_smm_columns(data, smm_starts[others], starts[others])
    except ProtocolError as exc:
        row = getattr(exc, "item", None)
        return int(item_entry[others[row or 0]])
    wrong = ~more.has_payload_size | (more.payload_size != sizes[others])
    if wrong.any():
        return int(item_entry[others[int(np.flatnonzero(wrong)[0])]])
    return None
