"""Shared Hypothesis strategies (and their plain builders) for the protocol tests.

The central model is :class:`Item`: one message as a producer means it. From a
list of items the helpers build what goes on the wire (SingleMessageMetadata,
MessageMetadata, a batch payload, compressed, framed as MESSAGE or SEND) and
what a reader must give back (:meth:`Item.expected`).
"""

from __future__ import annotations

import base64
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from crc32c import crc32c
from hypothesis import strategies as st

from pulsar_spark.protocol import (
    Frame,
    FrameDecoder,
    Message,
    compress,
    encode_batch,
    encode_payload_command,
    pb,
)
from pulsar_spark.protocol.message_id import MessageId, to_unsigned64

__all__ = [
    "CODECS",
    "U64",
    "Item",
    "Built",
    "codecs",
    "texts",
    "properties",
    "items",
    "item_lists",
    "message_ids",
    "ack_sets",
    "ack_set_from_acked",
    "metadata_base",
    "build_entry",
    "built_entries",
    "message_command",
    "send_command",
    "raw_payload_frame",
    "message_frames",
    "send_frames",
    "payload_frames",
    "split_points",
    "pieces",
    "message_dict",
    "decode_stream",
    "random_item",
    "random_built",
    "random_frame",
    "random_cuts",
    "seeded",
]

T = TypeVar("T")

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
        kept = sorted(draw(st.sets(st.integers(0, len(its) + extra - 1), min_size=len(its),
                                   max_size=len(its))))
    return build_entry(its, draw(metadata_base()), draw(codecs), batched=batched,
                       compacted_batch_indexes=kept)


# ---------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------


def message_command(
    ledger: int, entry: int, partition: int = -1, *, ack_set: list[int] | None = None,
    consumer_id: int = 1,
) -> pb.BaseCommand:
    mid = pb.MessageIdData(ledgerId=to_unsigned64(ledger), entryId=to_unsigned64(entry))
    if partition != -1:
        mid.partition = partition
    msg = pb.CommandMessage(consumer_id=consumer_id, message_id=mid)
    if ack_set:
        msg.ack_set.extend(ack_set)
    return pb.BaseCommand(type=pb.BaseCommand.MESSAGE, message=msg)


def send_command(producer_id: int, sequence_id: int, num_messages: int) -> pb.BaseCommand:
    return pb.BaseCommand(
        type=pb.BaseCommand.SEND,
        send=pb.CommandSend(
            producer_id=producer_id, sequence_id=sequence_id, num_messages=num_messages
        ),
    )


def raw_payload_frame(
    command: bytes,
    metadata: bytes,
    payload: bytes,
    *,
    broker_entry_metadata: bytes | None = None,
    checksum: bool = True,
    crc: int | None = None,
) -> bytes:
    """A payload frame assembled from raw parts, with correct sizes.

    Used by the fuzz tests to frame mutated metadata or payload bytes (so the
    CRC still matches and decoding gets past it), or to leave the optional
    checksum out as some brokers do.
    """
    meta_part = struct.pack(">I", len(metadata)) + metadata
    head = b""
    if broker_entry_metadata is not None:
        head = struct.pack(">HI", 0x0E02, len(broker_entry_metadata)) + broker_entry_metadata
    check = b""
    if checksum:
        value = crc32c(payload, crc32c(meta_part)) if crc is None else crc
        check = struct.pack(">HI", 0x0E01, value)
    rest = struct.pack(">I", len(command)) + command + head + check + meta_part + payload
    return struct.pack(">I", len(rest)) + rest


bems = st.one_of(
    st.none(),
    st.builds(
        lambda ts, idx: pb.BrokerEntryMetadata(broker_timestamp=ts, index=idx),
        st.integers(0, 4_102_444_800_000),
        st.integers(0, 1 << 40),
    ),
)


@dataclass
class FrameCase:
    """One encoded payload frame and what it was built from."""

    data: bytes
    built: Built
    command: pb.BaseCommand
    ledger: int
    entry: int
    partition: int
    broker_entry_metadata: pb.BrokerEntryMetadata | None


@st.composite
def message_frames(
    draw: st.DrawFn, *, batched: bool | None = None, max_items: int = 8
) -> FrameCase:
    """A MESSAGE frame, built with ``encode_payload_command``, with or without
    broker entry metadata."""
    built = draw(built_entries(batched=batched, max_items=max_items))
    ledger, entry = draw(ledger_entry_numbers()), draw(ledger_entry_numbers())
    partition = draw(st.integers(-1, 8))
    command = message_command(ledger, entry, partition)
    bem = draw(bems)
    data = encode_payload_command(command, built.metadata, built.payload, broker_entry_metadata=bem)
    return FrameCase(data, built, command, ledger, entry, partition, bem)


@st.composite
def send_frames(draw: st.DrawFn, *, batched: bool | None = None, max_items: int = 8) -> FrameCase:
    """A SEND frame (client to broker), built with ``encode_payload_command``."""
    built = draw(built_entries(batched=batched, max_items=max_items))
    command = send_command(
        draw(st.integers(0, 1 << 32)), built.metadata.sequence_id, len(built.items)
    )
    data = encode_payload_command(command, built.metadata, built.payload)
    return FrameCase(data, built, command, -1, -1, -1, None)


def payload_frames(**kw: object) -> st.SearchStrategy[FrameCase]:
    return st.one_of(message_frames(**kw), send_frames(**kw))  # type: ignore[arg-type]


def split_points(size: int) -> st.SearchStrategy[list[int]]:
    """Sorted cut positions in ``[0, size]``, for feeding bytes in pieces."""
    return st.lists(st.integers(0, size), max_size=8).map(sorted)


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (empty pieces included)."""
    out, prev = [], 0
    for cut in [*cuts, len(data)]:
        out.append(data[prev:cut])
        prev = cut
    return out


# ---------------------------------------------------------------------------
# Reading back
# ---------------------------------------------------------------------------


def message_dict(message: Message) -> dict:
    """The fields of a decoded :class:`Message` that :meth:`Item.expected` predicts."""
    return {
        "value": message.value,
        "key": message.key,
        "partition_key": message.partition_key,
        "ordering_key": message.ordering_key,
        "properties": message.properties,
        "event_time": message.event_time,
        "sequence_id": message.sequence_id,
        "batch_index": message.message_id.batch_index,
    }


def decode_stream(data: bytes, cuts: list[int], **kw: object) -> list[Frame]:
    """Every frame of ``data``, fed to a :class:`FrameDecoder` in pieces."""
    decoder = FrameDecoder(**kw)  # type: ignore[arg-type]
    frames: list[Frame] = []
    for piece in pieces(data, cuts):
        decoder.feed(piece)
        frames.extend(decoder)
    decoder.close()
    return frames


# ---------------------------------------------------------------------------
# Seeded generators: the same shapes from one random seed (for the fuzz tests)
# ---------------------------------------------------------------------------
#
# Hypothesis spends a few milliseconds per example on strategies with dozens of
# draws; the fuzz tests run tens of thousands of examples, so they draw one
# seed and build frames and mutations from it with ``random.Random``. The
# failing input is still reported as bytes.

_SAMPLE_TEXTS = ["", "k", "key-1", "ü", "ñ€", "日本語", "😀", "a b", "\x00", "idx", "x" * 40]


def _random_text(rnd: random.Random) -> str:
    if rnd.random() < 0.7:
        return rnd.choice(_SAMPLE_TEXTS)
    return "".join(chr(rnd.choice([rnd.randrange(32, 127), rnd.randrange(0xA0, 0xD7FF),
                                   rnd.randrange(0x10000, 0x10FFFF)]))
                   for _ in range(rnd.randrange(0, 8)))


def _random_bytes(rnd: random.Random, max_size: int) -> bytes:
    n = rnd.randrange(0, max_size + 1)
    if rnd.random() < 0.3:
        return bytes([rnd.randrange(256)]) * n  # compressible
    return rnd.randbytes(n)


def random_item(rnd: random.Random, *, batched: bool = True) -> Item:
    null_value = rnd.random() < 0.15
    mode = rnd.choice([None, "text", "text", "b64", "null"])
    key = None
    if mode == "text":
        key = _random_text(rnd).encode()
    elif mode == "b64":
        key = _random_bytes(rnd, 12)
    return Item(
        payload=b"" if null_value else _random_bytes(rnd, 64),
        null_value=null_value,
        key=key,
        key_mode=mode,
        properties={_random_text(rnd): _random_text(rnd) for _ in range(rnd.randrange(0, 3))},
        event_time=rnd.choice([0, rnd.randrange(1, 4_102_444_800_000)]),
        sequence_id=(
            rnd.choice([None, rnd.randrange(0, 1 << 20), rnd.randrange(0, INT64_MAX)])
            if batched else None
        ),
        ordering_key=rnd.choice([None, _random_bytes(rnd, 6)]),
        compacted_out=batched and rnd.random() < 0.1,
    )


def random_built(rnd: random.Random, *, max_items: int = 5) -> Built:
    batched = rnd.random() < 0.6
    meta = pb.MessageMetadata(
        producer_name=_random_text(rnd),
        sequence_id=rnd.choice([0, rnd.randrange(0, 1 << 20), rnd.randrange(0, INT64_MAX >> 1)]),
        publish_time=rnd.randrange(0, 4_102_444_800_000),
    )
    codec = rnd.choice(CODECS)
    if not batched:
        return build_entry([random_item(rnd, batched=False)], meta, codec, batched=False)
    its = [random_item(rnd) for _ in range(rnd.randrange(1, max_items + 1))]
    kept = None
    if rnd.random() < 0.15:
        kept = sorted(rnd.sample(range(len(its) + 3), len(its)))
    return build_entry(its, meta, codec, compacted_batch_indexes=kept)


def random_frame(rnd: random.Random, *, max_items: int = 5) -> FrameCase:
    """A MESSAGE (with or without broker entry metadata and ack set) or SEND frame."""
    built = random_built(rnd, max_items=max_items)
    if rnd.random() < 0.25:
        command = send_command(rnd.randrange(0, 10), built.metadata.sequence_id, len(built.items))
        data = encode_payload_command(command, built.metadata, built.payload)
        return FrameCase(data, built, command, -1, -1, -1, None)
    ledger = rnd.choice([rnd.randrange(0, 50), rnd.randrange(0, INT64_MAX)])
    entry = rnd.randrange(0, 50)
    partition = rnd.randrange(-1, 4)
    ack_set = None
    if built.batched and rnd.random() < 0.3:
        ack_set = [to_int64(rnd.getrandbits(64)) for _ in range(rnd.randrange(1, 3))]
    command = message_command(ledger, entry, partition, ack_set=ack_set)
    bem = None
    if rnd.random() < 0.3:
        bem = pb.BrokerEntryMetadata(broker_timestamp=rnd.randrange(0, 1 << 42),
                                     index=rnd.randrange(0, 1 << 40))
    data = encode_payload_command(command, built.metadata, built.payload, broker_entry_metadata=bem)
    return FrameCase(data, built, command, ledger, entry, partition, bem)


def random_cuts(rnd: random.Random, size: int) -> list[int]:
    """Sorted cut positions in ``[0, size]``."""
    return sorted(rnd.randrange(0, size + 1) for _ in range(rnd.randrange(0, 6)))


def seeded(build: Callable[[random.Random], T]) -> st.SearchStrategy[T]:
    """A strategy for ``build(random.Random(seed))`` with one drawn seed."""
    return st.integers(0, (1 << 64) - 1).map(lambda seed: build(random.Random(seed)))
