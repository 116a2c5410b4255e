"""Message ids: :class:`MessageId` (``ledger:entry:partition:batch_index``), order and wire form.

On the wire ledger and entry are uint64 varints, and clients use -1 (sent as
2^64-1) for "earliest" and INT64_MAX for "latest"; here they are signed Python
ints. Ids order by position, ``(ledger, entry, batch_index)``; the partition
names the topic and does not take part in the order.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import PulsarApi_pb2 as pb
from ..errors import InvalidMessageId

__all__ = ["MessageId", "EARLIEST", "LATEST", "to_signed64", "to_unsigned64"]

_U64 = 0xFFFF_FFFF_FFFF_FFFF
INT64_MAX = (1 << 63) - 1


def to_signed64(value: int) -> int:
    """A uint64 from the wire as the signed value clients mean (2^64-1 -> -1)."""
    return value - (1 << 64) if value >= (1 << 63) else value


def to_unsigned64(value: int) -> int:
    """A signed id component as the uint64 the wire carries (-1 -> 2^64-1)."""
    return value & _U64


@dataclass(frozen=True, slots=True, order=False)
class MessageId:
    """The position of one message.

    ``batch_index`` is -1 for a message that is not part of a batch (or for
    "the whole entry" when used as a bound), ``partition`` is -1 for a
    non-partitioned topic.
    """

    ledger: int
    entry: int
    partition: int = -1
    batch_index: int = -1

    # -- conversions ---------------------------------------------------------

    def __str__(self) -> str:
        return f"{self.ledger}:{self.entry}:{self.partition}:{self.batch_index}"

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """Parse ``ledger:entry[:partition[:batch_index]]``.

        Ledger and entry may be given signed or as the uint64 the wire carries
        (``18446744073709551615`` is -1); they are stored signed.

        Raises:
            InvalidMessageId: (a ``ValueError``) the text is not such an id; the
                message quotes it and says which part is wrong.
        """
        parts = text.strip().split(":")
        if not 2 <= len(parts) <= 4:
            msg = f"message id {text!r} is not ledger:entry[:partition[:batch_index]]"
            raise InvalidMessageId(msg)
        try:
            numbers = [int(p) for p in parts]
        except ValueError:
            msg = f"message id {text!r} has a part that is not an integer"
            raise InvalidMessageId(msg) from None
        # Ledger and entry may be written as the wire's uint64 (2^64-1 for -1).
        for i in (0, 1):
            if not -(1 << 63) <= numbers[i] < (1 << 64):
                msg = f"message id {text!r} has a ledger or entry outside 64 bits"
                raise InvalidMessageId(msg)
            numbers[i] = to_signed64(numbers[i])
        for i in range(2, len(numbers)):
            if not -(1 << 31) <= numbers[i] < (1 << 31):
                msg = f"message id {text!r} has a partition or batch index outside 32 bits"
                raise InvalidMessageId(msg)
        return cls(*numbers)

    @classmethod
    def from_pb(cls, data: pb.MessageIdData, partition: int | None = None) -> MessageId:
        """From a wire ``MessageIdData``; ``partition`` overrides the wire's value."""
        return cls(
            to_signed64(data.ledgerId),
            to_signed64(data.entryId),
            data.partition if partition is None else partition,
            data.batch_index,
        )

    def to_pb(self, *, with_batch_index: bool = True) -> pb.MessageIdData:
        data = pb.MessageIdData(
            ledgerId=to_unsigned64(self.ledger), entryId=to_unsigned64(self.entry)
        )
        if self.partition != -1:
            data.partition = self.partition
        if with_batch_index and self.batch_index != -1:
            data.batch_index = self.batch_index
        return data

    # -- order ---------------------------------------------------------------

    @property
    def position(self) -> tuple[int, int, int]:
        """``(ledger, entry, batch_index)``, the key ids order by."""
        return (self.ledger, self.entry, self.batch_index)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.position < other.position

    def __le__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.position <= other.position

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.position > other.position

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, MessageId):
            return NotImplemented
        return self.position >= other.position

    def with_batch_index(self, batch_index: int) -> MessageId:
        return MessageId(self.ledger, self.entry, self.partition, batch_index)

    @property
    def is_earliest(self) -> bool:
        return self.ledger == -1 and self.entry == -1

    @property
    def is_latest(self) -> bool:
        return self.ledger == INT64_MAX and self.entry == INT64_MAX


EARLIEST = MessageId(-1, -1, -1, -1)
LATEST = MessageId(INT64_MAX, INT64_MAX, -1, -1)
