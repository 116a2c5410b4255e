"""Partition names: ``<topic>-partition-<N>``, parsed and built in this one place."""

from __future__ import annotations

__all__ = ["PARTITION_SUFFIX", "base_topic", "partition_name"]

PARTITION_SUFFIX = "-partition-"


def base_topic(topic: str) -> tuple[str, int]:
    """Split ``…/name-partition-N`` into (``…/name``, N); (topic, -1) otherwise."""
    cut = topic.rfind(PARTITION_SUFFIX)
    if cut > 0:
        digits = topic[cut + len(PARTITION_SUFFIX) :]
        if digits.isdigit() and digits.isascii():
            return topic[:cut], int(digits)
    return topic, -1


def partition_name(topic: str, index: int) -> str:
    """The name of partition ``index`` of the partitioned ``topic``."""
    return f"{topic}{PARTITION_SUFFIX}{index}"
