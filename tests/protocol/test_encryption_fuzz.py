"""Fuzz: encrypted frames with flipped bits decode to the plaintext or end in our error, only.

Seeds are MESSAGE frames encrypted by :class:`Encryptor` (batched or not,
every codec, RSA or EC key names). Each example flips bits in the raw frame
(the checksum catches most), or in one part re-framed with a correct
checksum so that decoding gets past it: the ciphertext (AES-GCM must reject
it), the IV, a wrapped data key, or the serialized metadata. The pipeline is
the reader's: FrameDecoder, open_entry with a Decryptor (each failure
action), select, messages and the Arrow builder. Only a PulsarError may come
out (a ProtocolError or a crypto error); when nothing is raised under
``fail``, the messages are exactly those encrypted.
"""

from __future__ import annotations

import random

from cryptography.hazmat.primitives.asymmetric import ec, rsa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import CODECS, Item, build_entry, message_command

from pulsar_spark.columnar import ArrowBatchBuilder
from pulsar_spark.protocol import FrameDecoder, PulsarError, messages, open_entry, pb, select
from pulsar_spark.protocol.crypto.decrypt import Decryptor
from pulsar_spark.protocol.crypto.encrypt import Encryptor
from pulsar_spark.protocol.crypto.errors import DecryptionError
from pulsar_spark.protocol.framing import encode_payload_command

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ENCRYPTOR = Encryptor({"rsa": RSA_KEY.public_key(), "ec": EC_KEY.public_key()})
PARTS = ("raw", "ciphertext", "iv", "wrapped", "metadata")


def _seed(rnd: random.Random) -> tuple[pb.MessageMetadata, bytes, list]:
    batched = rnd.random() < 0.6
    count = rnd.randint(1, 5) if batched else 1
    items = [Item(payload=rnd.randbytes(rnd.randint(0, 60))) for _ in range(count)]
    built = build_entry(
        items,
        pb.MessageMetadata(producer_name="p", sequence_id=3, publish_time=7),
        rnd.choice(CODECS),
        batched=batched,
    )
    meta = pb.MessageMetadata()
    meta.CopyFrom(built.metadata)
    ciphertext = ENCRYPTOR.encrypt(meta, built.payload, now=0.0)
    return (
        meta,
        ciphertext,
        [m.value for m in messages(open_entry(1, 1, 2, built.metadata, built.payload))],
    )


def _flip(rnd: random.Random, data: bytes, flips: int) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(flips):
        i = rnd.randrange(len(out))
        out[i] ^= 1 << rnd.randrange(8)
    return bytes(out)


def _mutated(rnd: random.Random, part: str, flips: int) -> tuple[bytes, list]:
    meta, ciphertext, values = _seed(rnd)
    command = message_command(1, 1)
    if part == "raw":
        return _flip(rnd, encode_payload_command(command, meta, ciphertext), flips), values
    if part == "ciphertext":
        ciphertext = _flip(rnd, ciphertext, flips)
    elif part == "iv":
        meta.encryption_param = _flip(rnd, meta.encryption_param, flips)
    elif part == "wrapped":
        key = meta.encryption_keys[rnd.randrange(len(meta.encryption_keys))]
        key.value = _flip(rnd, key.value, flips)
    else:
        raw = _flip(rnd, meta.SerializeToString(), flips)
        return encode_payload_command(command, raw, ciphertext), values
    return encode_payload_command(command, meta, ciphertext), values


def _decode(data: bytes, decryptor: Decryptor) -> list:
    decoder = FrameDecoder()
    decoder.feed(data)
    decoder.close()
    out: list = []
    for frame in decoder:
        if frame.metadata is None or frame.payload is None:
            continue
        entry = open_entry(1, 1, 2, frame.metadata, frame.payload, decrypt=decryptor)
        chosen = select(entry)
        out += [m.value for m in messages(entry, chosen)]
        lazy = open_entry(1, 1, 2, frame.metadata, frame.payload, decrypt=decryptor, split=False)
        builder = ArrowBatchBuilder("persistent://public/default/t", 2)
        builder.add(lazy, select(lazy))
        assert builder.build().column("value").to_pylist() == out
    return out


@settings(
    max_examples=600,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    part=st.sampled_from(PARTS),
    flips=st.integers(1, 3),
    action=st.sampled_from(("fail", "discard", "consume")),
    key=st.sampled_from(("rsa", "ec")),
)
def test_flipped_bits_in_encrypted_frames_give_our_error_only(
    seed: int, part: str, flips: int, action: str, key: str
) -> None:
    rnd = random.Random(seed)
    data, values = _mutated(rnd, part, flips)
    private = {"rsa": RSA_KEY, "ec": EC_KEY}[key]
    decryptor = Decryptor({key: private}, action=action, topic="t")  # type: ignore[arg-type]
    try:
        got = _decode(data, decryptor)
    except PulsarError as exc:
        # discard and consume take every message that does not decrypt.
        assert action == "fail" or not isinstance(exc, DecryptionError)
        return
    if action == "fail" and part in ("ciphertext", "iv", "wrapped"):
        # AES-GCM authenticates: what decrypts is what was encrypted (a flip
        # in the other key name's wrapped key leaves this one usable).
        assert got == values
