"""Seeded generators: items, entries and frames from one random seed, for the fuzz tests."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TypeVar

from hypothesis import strategies as st

from pulsar_spark.protocol import encode_payload_command, pb
from tests.protocol.entry_strategies import (
    CODECS,
    INT64_MAX,
    Built,
    Item,
    build_entry,
    to_int64,
)
from tests.protocol.frame_strategies import FrameCase, message_command, send_command

T = TypeVar("T")


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
    return "".join(
        chr(
            rnd.choice(
                [
                    rnd.randrange(32, 127),
                    rnd.randrange(0xA0, 0xD7FF),
                    rnd.randrange(0x10000, 0x10FFFF),
                ]
            )
        )
        for _ in range(rnd.randrange(0, 8))
    )


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
            if batched
            else None
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
        bem = pb.BrokerEntryMetadata(
            broker_timestamp=rnd.randrange(0, 1 << 42), index=rnd.randrange(0, 1 << 40)
        )
    data = encode_payload_command(command, built.metadata, built.payload, broker_entry_metadata=bem)
    return FrameCase(data, built, command, ledger, entry, partition, bem)


def random_cuts(rnd: random.Random, size: int) -> list[int]:
    """Sorted cut positions in ``[0, size]``."""
    return sorted(rnd.randrange(0, size + 1) for _ in range(rnd.randrange(0, 6)))


def seeded(build: Callable[[random.Random], T]) -> st.SearchStrategy[T]:
    """A strategy for ``build(random.Random(seed))`` with one drawn seed."""
    return st.integers(0, (1 << 64) - 1).map(lambda seed: build(random.Random(seed)))
