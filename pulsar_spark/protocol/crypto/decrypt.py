"""Decryption of end-to-end encrypted messages and chunks: :class:`Decryptor`, failure actions.

A producer with encryption keys encrypts each payload it sends (a batch, a
single message, or one chunk) with AES-256-GCM under a random *data key*,
stores the 12-byte IV in ``MessageMetadata.encryption_param``, appends the
16-byte tag to the ciphertext, and adds one ``EncryptionKeys`` entry per key
name holding the data key wrapped with that name's public key
(:mod:`.key_wrap`). Compression comes before encryption, so a consumer
decrypts first, then decompresses and splits a batch.

:class:`Decryptor` does the consumer's side for one topic. It holds the
private keys by name (and optionally one for any name, like the Java
client's default key reader), unwraps each distinct wrapped data key once
(an LRU cache keyed by the wrapped bytes, and one for those that do not
unwrap, so a wrong key costs one RSA operation, not one per message), and
applies the *crypto failure action* when a message does not decrypt:

``fail``     (default) raise a :class:`~.errors.DecryptionError` naming the
             topic, the message id, the key names and the option that gives a key;
``discard``  skip the message, count it and report it to ``on_discard``;
``consume``  hand the payload on as it is (still encrypted, still compressed, a
             batch not split), marked with :data:`ENCRYPTED_PROPERTIES` so that
             nothing takes it for plaintext.

:func:`open_chunk` decrypts one chunk of a large message, before the chunks
are put together (each chunk is encrypted on its own).

Nothing here holds key material in a repr or an error text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from .. import PulsarApi_pb2 as pb
from ..wire import text
from .errors import (
    CiphertextError,
    CryptoKeyError,
    DataKeyError,
    DecryptionError,
    EncryptionMetadataError,
    MissingPrivateKey,
)
from .fields import (
    DEFAULT_KEY_HINT,
    TAG_SIZE,
    CryptoFailureAction,
    EncryptionInfo,
    crypto_failure_action,
    encryption_info,
    key_names,
    still_encrypted,
)
from .key_wrap import UnwrapFailed, check_private_key, unwrap_data_key

if TYPE_CHECKING:  # cryptography is loaded where a message is decrypted
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    from .key_wrap import PrivateKey

__all__ = [
    "Decrypted",
    "Decryptor",
    "open_chunk",
]

_V = TypeVar("_V")


@dataclass(slots=True)
class Decrypted:
    """What :meth:`Decryptor.open` made of one payload."""

    #: ``"decrypted"``, ``"discarded"`` or ``"encrypted"`` (action consume).
    outcome: Literal["decrypted", "discarded", "encrypted"]
    #: The metadata to open the payload with: the original when decrypted; for
    #: ``encrypted``, a copy that says it is one opaque message (no codec, no
    #: batch) and carries :data:`ENCRYPTED_PROPERTIES`.
    metadata: pb.MessageMetadata
    payload: bytes | bytearray | memoryview
    key_names: tuple[str, ...]


class Decryptor:
    """Decrypts the messages of one topic with the private keys given by name.

    Args:
        private_keys: key name -> RSA or EC private key.
        default_key: the key for any name not in ``private_keys``.
        action: the crypto failure action: ``fail``, ``discard`` or ``consume``.
        topic: named in errors.
        key_hint: how the user gives a private key (the option names), for errors.
        on_discard: called with the error of each message discarded.
        cache_size: most wrapped data keys remembered (and as many that failed).
    """

    def __init__(
        self,
        private_keys: Mapping[str, PrivateKey] | None = None,
        *,
        default_key: PrivateKey | None = None,
        action: CryptoFailureAction = "fail",
        topic: str | None = None,
        key_hint: str = "",
        on_discard: Callable[[DecryptionError], None] | None = None,
        cache_size: int = 256,
    ) -> None:
        self._keys: dict[str, PrivateKey] = {}
        for name, key in (private_keys or {}).items():
            self._keys[name] = _checked(key, f"the private key named {name!r}")
        self._default = None if default_key is None else _checked(default_key, "the private key")
        self.action = crypto_failure_action(action)
        self.topic = topic
        self.key_hint = key_hint or DEFAULT_KEY_HINT
        self.on_discard = on_discard
        self._cache_size = max(1, cache_size)
        self._data_keys: OrderedDict[bytes, AESGCM] = OrderedDict()
        self._failed: OrderedDict[bytes, str] = OrderedDict()
        #: Messages discarded (a batch counts its messages).
        self.discarded = 0
        #: Wrapped data keys unwrapped so far (each distinct one once while cached).
        self.unwrapped = 0

    def __repr__(self) -> str:
        names = sorted(self._keys) + (["<any name>"] if self._default is not None else [])
        return f"Decryptor(topic={self.topic!r}, key_names={names}, action={self.action!r})"

    @property
    def has_keys(self) -> bool:
        return bool(self._keys) or self._default is not None

    def with_topic(self, topic: str) -> Decryptor:
        """A decryptor for another topic (a partition) sharing these keys, not the caches."""
        return Decryptor(
            self._keys,
            default_key=self._default,
            action=self.action,
            topic=topic,
            key_hint=self.key_hint,
            on_discard=self.on_discard,
            cache_size=self._cache_size,
        )

    def decrypt(
        self,
        metadata: pb.MessageMetadata,
        payload: bytes | bytearray | memoryview,
        *,
        message_id: str,
    ) -> bytes:
        """The plaintext of an encrypted payload (still compressed, a batch unsplit).

        Raises:
            DecryptionError: a subclass saying why, naming topic, id and key names.
        """
        info = encryption_info(metadata)
        if info is None:
            msg = "the message carries no encryption keys"
            raise EncryptionMetadataError(msg, topic=self.topic, message_id=message_id)
        from cryptography.exceptions import InvalidTag

        aes = self._data_key(info, message_id)
        try:
            return aes.decrypt(info.param, bytes(payload), None)
        except InvalidTag as exc:
            msg = (
                f"the payload of {len(payload)} bytes does not decrypt: AES-GCM authentication "
                "failed, so it was corrupted or altered after it was encrypted"
            )
            raise CiphertextError(
                msg, topic=self.topic, message_id=message_id, key_names=info.names
            ) from exc
        except ValueError as exc:  # an IV of a length AES-GCM does not take
            msg = f"encryption_param of {len(info.param)} bytes is not a usable AES-GCM IV"
            raise EncryptionMetadataError(
                msg, topic=self.topic, message_id=message_id, key_names=info.names
            ) from exc

    def open(
        self,
        metadata: pb.MessageMetadata,
        payload: bytes | bytearray | memoryview,
        *,
        message_id: str,
    ) -> Decrypted:
        """Decrypt, or apply the failure action (see the module text)."""
        try:
            plain = self.decrypt(metadata, payload, message_id=message_id)
        except DecryptionError as exc:
            if self.action == "fail":
                raise
            names = exc.key_names or tuple(text(k.key) for k in metadata.encryption_keys)
            if self.action == "discard":
                # A chunked message counts (and is reported) once, at its first chunk.
                if metadata.num_chunks_from_msg <= 1 or metadata.chunk_id == 0:
                    batched = metadata.HasField("num_messages_in_batch")
                    self.discarded += metadata.num_messages_in_batch if batched else 1
                    if self.on_discard is not None:
                        self.on_discard(exc)
                return Decrypted("discarded", metadata, b"", names)
            return Decrypted("encrypted", still_encrypted(metadata, names), payload, names)
        return Decrypted("decrypted", metadata, plain, key_names(metadata))

    def _data_key(self, info: EncryptionInfo, message_id: str) -> AESGCM:
        cache = self._data_keys
        for wrapped in info.keys:
            aes = cache.get(wrapped.value)
            if aes is not None:
                cache.move_to_end(wrapped.value)
                return aes
        if not info.param:
            msg = "the message has no encryption_param (its AES-GCM IV)"
            raise EncryptionMetadataError(
                msg, topic=self.topic, message_id=message_id, key_names=info.names
            )
        tried = []
        for wrapped in info.keys:
            key = self._keys.get(wrapped.name, self._default)
            if key is None:
                continue
            reason = self._failed.get(wrapped.value)
            if reason is None:
                from cryptography.hazmat.primitives.ciphers.aead import AESGCM

                try:
                    aes = AESGCM(unwrap_data_key(key, wrapped.value))
                except (UnwrapFailed, ValueError) as exc:
                    # ValueError: a data key of a size AES does not have.
                    reason = str(exc) if isinstance(exc, UnwrapFailed) else "not an AES key"
                    _remember(self._failed, wrapped.value, reason, self._cache_size)
                else:
                    self.unwrapped += 1
                    _remember(cache, wrapped.value, aes, self._cache_size)
                    return aes
            tried.append(f"{wrapped.name!r}: {reason}")
        if not tried:
            msg = (
                "the message is encrypted and no private key was given for its key names: "
                + self.key_hint
            )
            raise MissingPrivateKey(
                msg, topic=self.topic, message_id=message_id, key_names=info.names
            )
        msg = (
            "no private key given decrypts the message's data key (a wrong private key?): "
            + "; ".join(tried)
        )
        raise DataKeyError(msg, topic=self.topic, message_id=message_id, key_names=info.names)


def _remember(cache: OrderedDict[bytes, _V], key: bytes, value: _V, size: int) -> None:
    cache[key] = value
    if len(cache) > size:
        cache.popitem(last=False)


def _checked(key: object, what: str) -> PrivateKey:
    try:
        return check_private_key(key)
    except TypeError as exc:
        msg = f"{what} cannot decrypt: {exc}"
        raise CryptoKeyError(msg) from None


def open_chunk(
    decrypt: Decryptor | None,
    metadata: pb.MessageMetadata,
    payload: bytes | memoryview,
    *,
    message_id: str,
) -> tuple[pb.MessageMetadata, bytes | memoryview] | None:
    """One chunk of a large message, decrypted before the chunks are put together.

    Each chunk is encrypted on its own (its own IV), so it is decrypted on
    its own. Returns the chunk unchanged when it is not encrypted; decrypted,
    with a copy of its metadata without encryption fields (so the message put
    together is plain); None when the failure action discarded it (each chunk
    of the message counts once in :attr:`Decryptor.discarded`). With no
    decryptor (an id-level scan needs no key), the chunk stays encrypted, its
    tag cut so that the chunks add up to the declared size: the message put
    together still carries ``encryption_keys``, so that opening it without a
    key fails (:func:`~.entry.open_entry`).

    Raises:
        DecryptionError: it does not decrypt and the action is ``fail``, or
            ``consume``: chunks handed on encrypted would not go back together
            (each has its own IV); the text says to use ``discard``.
    """
    if not metadata.encryption_keys:
        return metadata, payload
    if decrypt is None:
        return metadata, payload[: max(0, len(payload) - TAG_SIZE)]
    opened = decrypt.open(metadata, payload, message_id=message_id)
    if opened.outcome == "discarded":
        return None
    if opened.outcome == "encrypted":
        msg = (
            f"chunk {metadata.chunk_id} of chunked message {text(metadata.uuid)!r} does not "
            "decrypt, and a chunked message cannot be handed on encrypted (each chunk has its "
            "own IV): give its private key, or use the crypto failure action discard"
        )
        raise DecryptionError(
            msg, topic=decrypt.topic, message_id=message_id, key_names=opened.key_names
        )
    plain = pb.MessageMetadata()
    plain.CopyFrom(metadata)
    for name in ("encryption_keys", "encryption_param", "encryption_algo"):
        plain.ClearField(name)
    return plain, bytes(opened.payload)  # bytes already: no copy
