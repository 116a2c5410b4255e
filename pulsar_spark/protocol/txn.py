"""Transaction ids: :class:`TxnId`, the two numbers a transaction coordinator hands out.

``most`` is the coordinator's id (the partition of the coordinator assign topic that
owns the transaction) and ``least`` the coordinator's sequence; every command about a
transaction carries both (``txnid_least_bits`` before ``txnid_most_bits`` on the
wire), as do the SEND command and the MessageMetadata of a transactional message.
The text form, ``<most>:<least>``, is what commit messages and logs carry.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import InvalidArgument

__all__ = ["TxnId"]

_U64 = (1 << 64) - 1


class TxnId(NamedTuple):
    """A transaction's id: its coordinator (``most``) and sequence there (``least``)."""

    most: int
    least: int

    def __str__(self) -> str:
        return f"{self.most}:{self.least}"

    @classmethod
    def parse(cls, text: str) -> TxnId:
        """``<most>:<least>``, as :meth:`__str__` writes it.

        Raises:
            InvalidArgument: text that is not two unsigned 64-bit numbers.
        """
        most, sep, least = text.strip().partition(":")
        try:
            found = cls(int(most), int(least)) if sep else None
        except ValueError:
            found = None
        if found is None or not (0 <= found.most <= _U64 and 0 <= found.least <= _U64):
            msg = f"{text!r} is not a transaction id (<coordinator>:<sequence>)"
            raise InvalidArgument(msg)
        return found
