"""Items and entries: :class:`Item`, one message as a producer means it, and what is built from it.

From a list of items these strategies build what goes into a frame's payload
(SingleMessageMetadata, MessageMetadata, a batch payload, compressed: :class:`Built`)
and what a reader must give back (:meth:`Item.expected`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from hypothesis import strategies as st

from pulsar_spark.protocol import compress, encode_batch, pb
from pulsar_spark.protocol.ids.message_id import MessageId

U64 = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1
CODECS = (pb.NONE, pb.LZ4, pb.ZLIB, pb.ZSTD, pb.SNAPPY)

#: Any codec, as its ``CompressionType`` wire value.
codecs = st.sampled_from(CODECS)

#: Text protobuf can carry: any code point but the surrogates, non-ASCII included.
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)

properties = st.dictionaries(texts, texts, max_size=4)

#: Plausible epoch milliseconds (up to year ~2100), 0 meaning "unset" for event time.
millis = st.one_of(st.just(0), st.integers(1, 4_102_444_800_000))


@dataclass
class Item:
    """One message of an entry, as the producer meant it."""

    payload: bytes = b""
    null_value: bool = False
    #: Key bytes the reader must return; None for no key.
    key: bytes | None = None
    #: How the key travels: "text" (UTF-8 string), "b64" (base64 of bytes),
    #: "null" (null_partition_key), or None (no key at all).
    key_mode: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    event_time: int = 0
    sequence_id: int | None = None
    ordering_key: bytes | None = None
    compacted_out: bool = False

    # -- wire -----------------------------------------------------------------

    @property
    def partition_key(self) -> str | None:
        if self.key_mode == "text":
            assert self.key is not None
            return self.key.decode()
        if self.key_mode == "b64":
            assert self.key is not None
            return base64.b64encode(self.key).decode()
        return None

    def _fill(self, target: pb.SingleMessageMetadata | pb.MessageMetadata) -> None:
        for k, v in self.properties.items():
            target.properties.add(key=k, value=v)
        pkey = self.partition_key
        if pkey is not None:
            target.partition_key = pkey
        if self.key_mode == "b64":
            target.partition_key_b64_encoded = True
        if self.key_mode == "null":
            target.null_partition_key = True
        if self.event_time:
            target.event_time = self.event_time
        if self.ordering_key is not None:
            target.ordering_key = self.ordering_key
        if self.null_value:
            target.null_value = True

    def smm(self) -> pb.SingleMessageMetadata:
        smm = pb.SingleMessageMetadata()
        self._fill(smm)
        if self.sequence_id is not None:
            smm.sequence_id = self.sequence_id
        if self.compacted_out:
            smm.compacted_out = True
        return smm

    # -- what a reader gives back --------------------------------------------

    def expected(self, batch_index: int, base_sequence: int, batched: bool) -> dict:
        if not batched:
            seq = base_sequence
        elif self.sequence_id is not None:
            seq = self.sequence_id
        else:
            seq = base_sequence + batch_index
        return {
            "value": None if self.null_value else self.payload,
            "key": self.key,
            "partition_key": self.partition_key,
            "ordering_key": self.ordering_key,
            "properties": dict(self.properties),
            "event_time": self.event_time or None,
            "sequence_id": seq,
            "batch_index": batch_index,
        }


@st.composite
def keys(draw: st.DrawFn) -> tuple[bytes | None, str | None]:
    mode = draw(st.sampled_from([None, "text", "text", "b64", "null"]))
    if mode == "text":
        return draw(texts).encode(), mode
    if mode == "b64":
        return draw(st.binary(max_size=12)), mode
    return None, mode


@st.composite
def items(
    draw: st.DrawFn,
    *,
    with_sequence: bool = True,
    allow_compacted_out: bool = True,
    max_payload: int = 48,
) -> Item:
    null_value = draw(st.integers(0, 5)) == 0
    payload = b"" if null_value else draw(st.binary(max_size=max_payload))
    key, mode = draw(keys())
    return Item(
        payload=payload,
        null_value=null_value,
        key=key,
        key_mode=mode,
        properties=draw(properties),
        event_time=draw(millis),
        sequence_id=(
            draw(st.one_of(st.none(), st.integers(0, INT64_MAX))) if with_sequence else None
        ),
        ordering_key=draw(st.one_of(st.none(), st.binary(max_size=8))),
        compacted_out=allow_compacted_out and draw(st.integers(0, 7)) == 0,
    )


def item_lists(min_size: int = 1, max_size: int = 8, **kw: object) -> st.SearchStrategy[list[Item]]:
    return st.lists(items(**kw), min_size=min_size, max_size=max_size)  # type: ignore[arg-type]


def ledger_entry_numbers() -> st.SearchStrategy[int]:
    """Ledger or entry ids as clients hold them: signed, -1 for "earliest"."""
    return st.one_of(
        st.integers(0, 20), st.integers(0, INT64_MAX), st.sampled_from([-1, INT64_MAX])
    )


@st.composite
def message_ids(draw: st.DrawFn, *, max_batch_index: int = 70) -> MessageId:
    return MessageId(
        draw(ledger_entry_numbers()),
        draw(ledger_entry_numbers()),
        draw(st.integers(-1, 16)),
        draw(st.integers(-1, max_batch_index)),
    )


def to_int64(word: int) -> int:
    word &= U64
    return word - (1 << 64) if word >> 63 else word


def ack_set_from_acked(count: int, acked: set[int]) -> list[int]:
    """``CommandMessage.ack_set`` words (signed int64, as protobuf keeps them)
    for a batch of ``count`` items where ``acked`` are acknowledged: bit set =
    still to deliver."""
    words = []
    for w in range((count + 63) // 64):
        word = 0
        for bit in range(64):
            i = 64 * w + bit
            if i < count and i not in acked:
                word |= 1 << bit
        words.append(to_int64(word))
    return words


#: Raw ack_set words: empty (deliver all), arbitrary int64 words, incl. negatives.
ack_sets = st.lists(
    st.one_of(
        st.integers(-(1 << 63), INT64_MAX),
        st.sampled_from([0, -1, 1, -(1 << 63), INT64_MAX]),
    ),
    max_size=3,
)


@st.composite
def metadata_base(
    draw: st.DrawFn, *, max_sequence: int = INT64_MAX - (1 << 20)
) -> pb.MessageMetadata:
    meta = pb.MessageMetadata(
        producer_name=draw(texts),
        sequence_id=draw(st.integers(0, max_sequence)),
        publish_time=draw(st.integers(0, 4_102_444_800_000)),
    )
    return meta


@dataclass
class Built:
    """An entry built from items: its metadata and (compressed) payload."""

    items: list[Item]
    metadata: pb.MessageMetadata
    payload: bytes
    batched: bool
    #: Real batch index of each item ([-1] when not batched).
    batch_indexes: list[int]
    #: The payload before compression, and the codec.
    raw: bytes = b""
    codec: int = pb.NONE

    def expected(self) -> list[dict]:
        base = self.metadata.sequence_id
        return [
            item.expected(bi, base, self.batched)
            for item, bi in zip(self.items, self.batch_indexes, strict=True)
        ]


def build_entry(
    items_: list[Item],
    metadata: pb.MessageMetadata,
    codec: int,
    *,
    batched: bool = True,
    compacted_batch_indexes: list[int] | None = None,
) -> Built:
    """Metadata and payload of one entry holding ``items_``.

    ``batched=False`` takes exactly one item and makes a plain message: its
    fields go into the MessageMetadata itself.
    """
    meta = pb.MessageMetadata()
    meta.CopyFrom(metadata)
    for name in ("compression", "uncompressed_size", "num_messages_in_batch"):
        meta.ClearField(name)
    del meta.compacted_batch_indexes[:]
    if batched:
        raw = encode_batch((item.smm(), item.payload) for item in items_)
        meta.num_messages_in_batch = len(items_)
        if compacted_batch_indexes is not None:
            meta.compacted_batch_indexes.extend(compacted_batch_indexes)
            indexes = list(compacted_batch_indexes)
        else:
            indexes = list(range(len(items_)))
    else:
        (item,) = items_
        item._fill(meta)
        raw = item.payload
        indexes = [-1]
    if codec != pb.NONE:
        meta.compression = codec
        meta.uncompressed_size = len(raw)
    return Built(list(items_), meta, compress(codec, raw), batched, indexes, raw, codec)


@st.composite
def built_entries(
    draw: st.DrawFn,
    *,
    batched: bool | None = None,
    min_items: int = 1,
    max_items: int = 8,
    compacted: bool = False,
) -> Built:
    """A random entry: a batch (of one or more) or a plain message, any codec."""
    if batched is None:
        batched = draw(st.booleans())
    if batched:
        its = draw(item_lists(min_items, max_items))
    else:
        its = [draw(items(with_sequence=False, allow_compacted_out=False))]
    kept = None
    if batched and compacted and draw(st.booleans()):
        extra = draw(st.integers(0, 4))
        kept = sorted(
            draw(
                st.sets(st.integers(0, len(its) + extra - 1), min_size=len(its), max_size=len(its))
            )
        )
    return build_entry(
        its, draw(metadata_base()), draw(codecs), batched=batched, compacted_batch_indexes=kept
    )
