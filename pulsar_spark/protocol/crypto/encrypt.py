"""Encryption of outgoing payloads as Pulsar's producers do it: :class:`Encryptor`.

Each payload (a batch, a single message, or one chunk of a large message)
is encrypted on its own, last, after compression (and after splitting into
chunks): AES-256-GCM under the producer's current data key with a fresh
random 12-byte IV, stored in ``encryption_param``; the 16-byte tag follows
the ciphertext. The data key is wrapped once per key name with that name's
public key (RSA-OAEP or ECIES, :mod:`.key_wrap`) and the wrapped keys travel
in every payload's ``encryption_keys``. Like the Java and C++ producers, the
data key is renewed every 4 hours (the caller passes the time: nothing here
reads a clock), and wrapped again for every key name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .. import PulsarApi_pb2 as pb
from .errors import CryptoKeyError
from .key_wrap import check_public_key, wrap_data_key

if TYPE_CHECKING:
    from .key_wrap import PublicKey

__all__ = ["DATA_KEY_RENEWAL_SECONDS", "IV_SIZE", "TAG_SIZE", "Encryptor"]

#: How long one data key is used (the Java and C++ producers: 4 hours).
DATA_KEY_RENEWAL_SECONDS = 4 * 3600.0
#: Bytes of the AES-GCM IV in ``encryption_param``.
IV_SIZE = 12
#: Bytes the AES-GCM tag adds to each payload.
TAG_SIZE = 16


class Encryptor:
    """Encrypts the payloads of one producer for the public keys given by name.

    Args:
        public_keys: key name -> RSA or EC public key, in the order the names
            are to appear in ``encryption_keys``.
        topic: named in errors.
        renew_after: seconds one data key is used.

    Raises:
        CryptoKeyError: no key names, or a key that cannot wrap a data key
            (not RSA or EC, or an RSA key too small for OAEP), naming it.
    """

    def __init__(
        self,
        public_keys: Mapping[str, PublicKey],
        *,
        topic: str | None = None,
        renew_after: float = DATA_KEY_RENEWAL_SECONDS,
    ) -> None:
        if not public_keys:
            msg = "encryption needs at least one key name with its public key"
            raise CryptoKeyError(msg)
        self._keys: dict[str, PublicKey] = {}
        for name, key in public_keys.items():
            if not name:
                msg = "an encryption key name is empty"
                raise CryptoKeyError(msg)
            try:
                self._keys[name] = check_public_key(key)
            except TypeError as exc:
                msg = f"the public key named {name!r} cannot encrypt: {exc}"
                raise CryptoKeyError(msg) from None
        self.topic = topic
        self.renew_after = renew_after
        #: How many data keys were made (the first one included).
        self.data_keys_made = 0
        self._born: float | None = None
        self._renew()

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(self._keys)

    @property
    def overhead(self) -> int:
        """Bytes encryption adds to a message at most: its ``encryption_keys`` and
        ``encryption_param`` in the metadata, and the tag after the payload."""
        keys: int = sum(k.ByteSize() + 4 for k in self._wrapped)  # tag and length of each
        return keys + 2 + IV_SIZE + TAG_SIZE

    def __repr__(self) -> str:
        return f"Encryptor(topic={self.topic!r}, key_names={list(self._keys)})"

    def encrypt(
        self, metadata: pb.MessageMetadata, payload: bytes | bytearray | memoryview, *, now: float
    ) -> bytes:
        """Encrypt ``payload``; set ``encryption_keys`` and ``encryption_param`` on ``metadata``.

        Args:
            now: the current time in seconds (any monotonic clock): the data
                key is renewed once it is ``renew_after`` old.
        """
        if self._born is None:
            self._born = now
        elif not 0 <= now - self._born < self.renew_after:
            self._renew()
            self._born = now
        iv = os.urandom(IV_SIZE)
        del metadata.encryption_keys[:]
        metadata.encryption_keys.extend(self._wrapped)
        metadata.encryption_param = iv
        return self._aes.encrypt(iv, bytes(payload), None)

    def _renew(self) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # loaded to encrypt

        data_key = AESGCM.generate_key(bit_length=256)
        wrapped: list[pb.EncryptionKeys] = []
        for name, key in self._keys.items():
            try:
                value = wrap_data_key(key, data_key)
            except ValueError as exc:  # e.g. an RSA modulus too small for OAEP of 32 bytes
                msg = f"the public key named {name!r} cannot wrap a 256-bit data key: {exc}"
                raise CryptoKeyError(msg) from None
            wrapped.append(pb.EncryptionKeys(key=name, value=value))
        self._wrapped = wrapped
        self._aes = AESGCM(data_key)
        self.data_keys_made += 1
