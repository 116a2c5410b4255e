"""Errors of end-to-end encryption: messages that do not decrypt, payloads not encrypted, bad keys.

::

    PulsarError
    +-- CryptoError                  no   retriable; names topic, message id, key names
    |   +-- DecryptionError          an encrypted message that was not decrypted (also a
    |   |                            CorruptMessage: a payload not turned into messages)
    |   |   +-- MissingPrivateKey    no private key given for any of its key names
    |   |   +-- DataKeyError         the private keys given do not unwrap its data key
    |   |   +-- CiphertextError      AES-GCM authentication failed (corrupted, altered)
    |   |   +-- EncryptionMetadataError  its encryption fields are unusable
    |   +-- EncryptionError          a payload that could not be encrypted on write
    |   +-- UnwrapFailed             (key_wrap) a wrapped data key this private key does not open
    +-- InvalidArgument
        +-- CryptoKeyError           a key (PEM, URL, type) that cannot be used

No error ever holds key material: neither private or public keys, nor data
keys, wrapped or not. They name keys only by the names the producer gave them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import CorruptMessage, InvalidArgument, PulsarError

__all__ = [
    "CryptoError",
    "DecryptionError",
    "MissingPrivateKey",
    "DataKeyError",
    "CiphertextError",
    "EncryptionMetadataError",
    "EncryptionError",
    "CryptoKeyError",
]


class CryptoError(PulsarError):
    """A message that could not be decrypted or encrypted.

    Args:
        msg: what went wrong (never key material).
        topic: the topic, when known.
        message_id: ``ledger:entry:partition:batch`` of the message, when known.
        key_names: the names of the keys the message is (or was to be) encrypted with.
    """

    def __init__(
        self,
        msg: str,
        *,
        topic: str | None = None,
        message_id: str | None = None,
        key_names: Sequence[str] = (),
        offset: int | None = None,
    ) -> None:
        self.reason = msg
        self.topic = topic
        self.message_id = message_id
        #: The stream offset of the frame at fault, when known (as ProtocolError's).
        self.offset = offset
        self.key_names = tuple(key_names)
        where = []
        if offset is not None:
            where.append(f"frame at byte offset {offset}")
        if topic:
            where.append(f"topic {topic}")
        if message_id is not None:
            where.append(f"message {message_id}")
        if self.key_names:
            where.append("key names " + ", ".join(repr(name) for name in self.key_names))
        Exception.__init__(self, f"{msg} ({'; '.join(where)})" if where else msg)

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle as cls(*args), and args holds the formatted text.
        return (
            _rebuild,
            (type(self), self.reason, self.topic, self.message_id, self.key_names),
            self.__dict__,
        )


def _rebuild(
    cls: type[CryptoError],
    reason: str,
    topic: str | None,
    message_id: str | None,
    key_names: tuple[str, ...],
) -> CryptoError:
    return cls(reason, topic=topic, message_id=message_id, key_names=key_names)


class DecryptionError(CryptoError, CorruptMessage):
    """An encrypted message that was not decrypted (the crypto failure action was ``fail``).

    It is also a :class:`~.errors.CorruptMessage`: whatever bytes arrive,
    decoding them ends in a result or a ProtocolError. It takes
    :class:`CryptoError`'s arguments and text (first in its MRO).
    """


class MissingPrivateKey(DecryptionError):
    """No private key was given for any of the names the message is encrypted with."""


class DataKeyError(DecryptionError):
    """No private key given decrypts the message's data key (a wrong private key)."""


class CiphertextError(DecryptionError):
    """The data key is right but the payload does not authenticate: corrupted or altered."""


class EncryptionMetadataError(DecryptionError):
    """The message's encryption fields cannot be used (no IV, no keys, bad sizes)."""


class EncryptionError(CryptoError):
    """A payload that could not be encrypted on write."""


class CryptoKeyError(InvalidArgument):
    """A key that cannot be used: not PEM, not RSA or EC, a URL that does not open.

    The text names the key (its name, or the option that gave it) and never
    shows the key's content.
    """
