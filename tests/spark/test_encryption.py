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


def test_key_options_are_checked_for_form_and_never_shown(rsa_files) -> None:
    import base64
    import json
    import pickle

    from pulsar_spark.spark.errors import PulsarOptionError
    from pulsar_spark.spark.option_crypto import failure_action, key_names, private_key, public_key

    pub, priv = rsa_files
    inline = "data:application/x-pem-file;base64," + base64.b64encode(priv.read_bytes()).decode()
    source = private_key("privateKey", inline)
    assert source.spec == inline and "hidden" in repr(source) and inline[40:80] not in repr(source)
    assert pickle.loads(pickle.dumps(source)) == source
    mapped = public_key("publicKey", json.dumps({"b": pub.as_uri(), "a": pub.as_uri()}))
    assert repr(mapped) == "KeySource(map of a, b)"
    assert repr(private_key("privateKey", "/nowhere/x.pem".join(["file://", ""]))).startswith(
        "KeySource(file://"
    )  # files are read in the tasks, not here
    for parse, bad, expected in (
        (private_key, "https://h/k.pem", "file:... or data:..."),
        (
            private_key,
            "data:application/x-pem-file;base64," + base64.b64encode(b"junk").decode(),
            "no PEM",
        ),
        (public_key, inline, "no PEM public key"),  # a private key given as public
        (private_key, "{bad", "JSON"),
        (failure_action, "skip", "must be fail, discard or consume"),
        (key_names, "a,,b", "comma-separated key names"),
    ):
        with pytest.raises(PulsarOptionError, match=expected) as info:
            parse("theOption", bad)
        assert "theOption" in str(info.value) and inline[40:80] not in str(info.value)
    assert failure_action("x", "CONSUME") == "consume" and key_names("x", "a, b") == ("a", "b")
