"""Encryption fields of MessageMetadata, crypto failure actions, marks of a still-encrypted message.

:func:`encryption_info` reads ``encryption_keys`` (key name, wrapped data key,
key metadata), ``encryption_algo`` and ``encryption_param`` (the AES-GCM IV).
:func:`still_encrypted` is the metadata of a payload handed on undecrypted
(action ``consume``): one opaque message, no codec, no batch, and the
:data:`ENCRYPTED_PROPERTIES` that say it is ciphertext and with which keys.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Literal

from .. import PulsarApi_pb2 as pb
from ..errors import InvalidArgument
from ..wire import text
from .errors import MissingPrivateKey

#: Bytes the AES-GCM tag adds to each encrypted payload.
TAG_SIZE = 16

__all__ = [
    "CRYPTO_FAILURE_ACTIONS",
    "DEFAULT_KEY_HINT",
    "ENCRYPTED_PROPERTIES",
    "CryptoFailureAction",
    "EncryptionInfo",
    "TAG_SIZE",
    "WrappedKey",
    "crypto_failure_action",
    "encryption_info",
    "is_encrypted",
    "key_names",
    "missing_key_error",
    "still_encrypted",
]

CryptoFailureAction = Literal["fail", "discard", "consume"]
CRYPTO_FAILURE_ACTIONS: tuple[CryptoFailureAction, ...] = ("fail", "discard", "consume")

#: Properties added to a message handed on still encrypted (action ``consume``):
#: the key names (comma-separated), the codec its plaintext is compressed with,
#: the IV (base64), and, for a batch, how many messages it holds.
ENCRYPTED_PROPERTIES = (
    "pulsar.encryption.keys",
    "pulsar.encryption.compression",
    "pulsar.encryption.param",
    "pulsar.encryption.batchSize",
)

#: What to tell the user who gave no usable private key (the client's words;
#: the Spark layer passes its option names instead).
DEFAULT_KEY_HINT = (
    "give its private key (a PEM URL, file:... or data:application/x-pem-file;base64,..., or "
    "a JSON map of key name to URL) with the read option privateKey "
    "(pulsar.reader.privateKey), or read_batches(private_key=...) in the client; or skip such "
    "messages with cryptoFailureAction=discard, or read them still encrypted with consume"
)


def crypto_failure_action(
    value: str, *, option: str = "crypto_failure_action"
) -> CryptoFailureAction:
    """``value`` checked (case-insensitive) as a crypto failure action."""
    lowered = value.strip().lower()
    for action in CRYPTO_FAILURE_ACTIONS:
        if lowered == action:
            return action
    msg = f"{option} must be one of {', '.join(CRYPTO_FAILURE_ACTIONS)}, not {value!r}"
    raise InvalidArgument(msg)


@dataclass(frozen=True, slots=True)
class WrappedKey:
    """One ``EncryptionKeys`` entry: a key name and the data key wrapped for it."""

    name: str
    value: bytes = field(repr=False)
    metadata: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class EncryptionInfo:
    """The encryption fields of one MessageMetadata."""

    keys: tuple[WrappedKey, ...]
    #: ``encryption_algo`` (official producers never set it), or None.
    algorithm: str | None
    #: ``encryption_param``: the AES-GCM IV.
    param: bytes

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(key.name for key in self.keys)


def is_encrypted(metadata: pb.MessageMetadata) -> bool:
    """Whether a message's payload is encrypted (it carries ``encryption_keys``)."""
    return len(metadata.encryption_keys) > 0


def encryption_info(metadata: pb.MessageMetadata) -> EncryptionInfo | None:
    """The encryption fields of ``metadata``; None when it is not encrypted."""
    if not metadata.encryption_keys:
        return None
    keys = tuple(
        WrappedKey(
            text(k.key),
            bytes(k.value),
            tuple((text(kv.key), text(kv.value)) for kv in k.metadata),
        )
        for k in metadata.encryption_keys
    )
    algo = text(metadata.encryption_algo) if metadata.HasField("encryption_algo") else None
    return EncryptionInfo(keys, algo or None, bytes(metadata.encryption_param))


def missing_key_error(
    metadata: pb.MessageMetadata, *, message_id: str, topic: str | None = None, hint: str = ""
) -> MissingPrivateKey:
    """The error for an encrypted message met where no decryptor was given."""
    names = [text(k.key) for k in metadata.encryption_keys]
    msg = f"the message is encrypted and no private key was given: {hint or DEFAULT_KEY_HINT}"
    return MissingPrivateKey(msg, topic=topic, message_id=message_id, key_names=names)


def still_encrypted(metadata: pb.MessageMetadata, names: tuple[str, ...]) -> pb.MessageMetadata:
    """A copy of ``metadata`` for a payload handed on encrypted: one opaque message."""
    out = pb.MessageMetadata()
    out.CopyFrom(metadata)
    batched = metadata.HasField("num_messages_in_batch")
    for name in ("num_messages_in_batch", "compression", "uncompressed_size"):
        out.ClearField(name)
    out.ClearField("compacted_batch_indexes")
    out.null_value = False
    keys, codec, param, size = ENCRYPTED_PROPERTIES
    codec_name = (
        pb.CompressionType.Name(metadata.compression)
        if metadata.compression in pb.CompressionType.values()
        else str(metadata.compression)
    )
    added = [
        (keys, ",".join(names)),
        (codec, codec_name),
        (param, base64.b64encode(metadata.encryption_param).decode()),
    ]
    if batched:
        added.append((size, str(metadata.num_messages_in_batch)))
    for key, value in added:
        out.properties.add(key=key, value=value)
    return out


def key_names(metadata: pb.MessageMetadata) -> tuple[str, ...]:
    return tuple(text(k.key) for k in metadata.encryption_keys)
