"""Data-key wrapping as Pulsar's clients do it: RSA-OAEP (SHA-1) and BouncyCastle's ECIES.

Every encrypted message carries its AES data key once per key name, encrypted
("wrapped") with that name's public key, in ``EncryptionKeys.value``:

* **RSA**: OAEP with SHA-1 and MGF1-SHA-1, no label (Java
  ``RSA/NONE/OAEPWithSHA1AndMGF1Padding``, C++ ``RSA_PKCS1_OAEP_PADDING``, Go
  ``EncryptOAEP(sha1)``); the output is as long as the modulus.
* **EC** (the Java client only): BouncyCastle ``ECIES`` with ``macKeySize=128``
  and no derivation or encoding vectors. With ``V`` the ephemeral public point
  (uncompressed SEC1), ``Z`` the ECDH x-coordinate (field size),
  ``K = KDF2-SHA1(V || Z)`` (counter from 1) of ``16 + len(M)`` bytes, the
  MAC key is ``K[:16]`` and the XOR key ``K[16:]``; the value is
  ``V || M xor K[16:] || HMAC-SHA1(K[:16], C || 0x00 * 8)``.

``/work/shared/notes/encryption.md`` section 3 has the sources. Failures
raise :class:`UnwrapFailed`, which says why without any key bytes; callers
turn it into a :class:`~.errors.DecryptionError`.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import TYPE_CHECKING, Any

from .errors import CryptoError

# ``cryptography`` (~45 ms to import) is loaded by the functions that use it: a read or a
# write without encryption never does.
if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey
    PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

__all__ = [
    "PrivateKey",
    "PublicKey",
    "UnwrapFailed",
    "check_private_key",
    "check_public_key",
    "unwrap_data_key",
    "wrap_data_key",
]

_MAC_KEY_SIZE = 16  # IESParameterSpec macKeySize=128 bits
_TAG_SIZE = 20  # HMAC-SHA1, not truncated
_LENGTH_TAG = bytes(8)  # the length of the (absent) encoding vector, as a 64-bit zero


class UnwrapFailed(CryptoError):
    """A wrapped data key that the private key given does not open (the text says why).

    :class:`~.decrypt.Decryptor` turns it into a :class:`~.errors.DataKeyError`
    naming the message.
    """


def _oaep() -> Any:
    """The OAEP padding of Pulsar's RSA key wrapping (SHA-1, MGF1 with SHA-1)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    return padding.OAEP(
        mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None
    )


def check_private_key(key: object) -> PrivateKey:
    """``key`` if it is an RSA or EC private key; else :class:`TypeError`."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        return key
    msg = f"a {type(key).__name__} is not an RSA or EC private key"
    raise TypeError(msg)


def check_public_key(key: object) -> PublicKey:
    """``key`` if it is an RSA or EC public key; else :class:`TypeError`."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
        return key
    msg = f"a {type(key).__name__} is not an RSA or EC public key"
    raise TypeError(msg)


def wrap_data_key(public_key: PublicKey, data_key: bytes) -> bytes:
    """``data_key`` encrypted for ``public_key``, as ``EncryptionKeys.value``."""
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    if isinstance(public_key, rsa.RSAPublicKey):
        return public_key.encrypt(data_key, _oaep())
    ephemeral = ec.generate_private_key(public_key.curve)
    point = ephemeral.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
    shared = ephemeral.exchange(ec.ECDH(), public_key)
    mac_key, xor_key = _derive(point, shared, len(data_key))
    sealed = bytes(a ^ b for a, b in zip(data_key, xor_key, strict=True))
    return point + sealed + _tag(mac_key, sealed)


def unwrap_data_key(private_key: PrivateKey, wrapped: bytes) -> bytes:
    """The data key inside ``wrapped``.

    Raises:
        UnwrapFailed: the value was not made for this key, or is corrupted.
    """
    from cryptography.exceptions import InvalidKey
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(private_key, rsa.RSAPrivateKey):
        if len(wrapped) != (private_key.key_size + 7) // 8:
            msg = f"{len(wrapped)} bytes, not an RSA-{private_key.key_size} OAEP block"
            raise UnwrapFailed(msg)
        try:
            return private_key.decrypt(wrapped, _oaep())
        except ValueError as exc:
            msg = "RSA-OAEP decryption failed (made for another key, or corrupted)"
            raise UnwrapFailed(msg) from exc
    field = (private_key.curve.key_size + 7) // 8
    point_size = 1 + 2 * field
    if len(wrapped) <= point_size + _TAG_SIZE or wrapped[0] != 4:
        msg = f"{len(wrapped)} bytes, not an ECIES value for curve {private_key.curve.name}"
        raise UnwrapFailed(msg)
    point = wrapped[:point_size]
    sealed, tag = wrapped[point_size:-_TAG_SIZE], wrapped[-_TAG_SIZE:]
    try:
        ephemeral = ec.EllipticCurvePublicKey.from_encoded_point(private_key.curve, point)
        shared = private_key.exchange(ec.ECDH(), ephemeral)
    except (ValueError, InvalidKey) as exc:
        msg = f"its ephemeral point is not on curve {private_key.curve.name}"
        raise UnwrapFailed(msg) from exc
    mac_key, xor_key = _derive(point, shared, len(sealed))
    if not hmac.compare_digest(_tag(mac_key, sealed), tag):
        msg = "ECIES MAC check failed (made for another key, or corrupted)"
        raise UnwrapFailed(msg)
    return bytes(a ^ b for a, b in zip(sealed, xor_key, strict=True))


def _derive(point: bytes, shared: bytes, size: int) -> tuple[bytes, bytes]:
    """KDF2 with SHA-1 over ``point || shared``: (MAC key, XOR key of ``size`` bytes)."""
    seed = point + shared
    need = _MAC_KEY_SIZE + size
    out = bytearray()
    counter = 1
    while len(out) < need:
        out += hashlib.sha1(seed + struct.pack(">I", counter)).digest()
        counter += 1
    return bytes(out[:_MAC_KEY_SIZE]), bytes(out[_MAC_KEY_SIZE:need])


def _tag(mac_key: bytes, sealed: bytes) -> bytes:
    return hmac.new(mac_key, sealed + _LENGTH_TAG, hashlib.sha1).digest()
