"""End-to-end encryption in Spark: encrypted topics never read as data; errors reach the user."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.official import produce

NONE = serialization.NoEncryption()


@pytest.fixture(scope="module")
def rsa_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(public, private) PEM files of one RSA-2048 key."""
    directory = tmp_path_factory.mktemp("spark-keys")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pub, priv = directory / "pub.pem", directory / "priv.pem"
    priv.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, NONE)
    )
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pub, priv


def _produce_encrypted(url: str, topic: str, values: list[bytes], files, **options) -> None:
    import pulsar

    pub, priv = files
    reader = pulsar.CryptoKeyReader(str(pub), str(priv))
    produce(url, topic, values, encryption_key="app.key", crypto_key_reader=reader, **options)


def test_an_encrypted_topic_read_without_a_key_fails_naming_message_keys_and_option(
    read_pulsar, pulsar_lite, topic_name, rsa_files
) -> None:
    url = pulsar_lite.service_url
    _produce_encrypted(url, topic_name, [b"secret-1", b"secret-2"], rsa_files, compression="LZ4")
    with pytest.raises(Exception) as info:  # Spark wraps the worker's error
        read_pulsar(url, topic=topic_name).collect()
    text = str(info.value)
    assert "MissingPrivateKey" in text and "'app.key'" in text
    assert "privateKey" in text and "no private key" in text
    assert "secret-" not in text and "DecompressionError" not in text
