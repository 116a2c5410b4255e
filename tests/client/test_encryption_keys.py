"""Encryption keys from file: and data: URLs and JSON maps; errors name the option, not the key."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID

from pulsar_spark.client.crypto_keys import (
    load_private_keys,
    load_public_keys,
    make_decryptor,
    make_encryptor,
    parse_key_names,
    producer_encryptor,
)
from pulsar_spark.protocol import messages, open_entry, pb
from pulsar_spark.protocol.crypto.errors import CryptoKeyError
from pulsar_spark.protocol.errors import InvalidArgument

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
NONE = serialization.NoEncryption()
PEM = serialization.Encoding.PEM
EC_PARAMETERS = b"-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"


def _private_pem(key, fmt=serialization.PrivateFormat.PKCS8) -> bytes:
    return key.private_bytes(PEM, fmt, NONE)


def _public_pem(key, fmt=serialization.PublicFormat.SubjectPublicKeyInfo) -> bytes:
    return key.public_key().public_bytes(PEM, fmt)


def _data_url(pem: bytes) -> str:
    return "data:application/x-pem-file;base64," + base64.b64encode(pem).decode()


def _same(a, b) -> bool:
    return a.public_numbers() == b.public_numbers()


def test_pem_forms_the_java_client_accepts(tmp_path: Path) -> None:
    forms = {
        "pkcs8": _private_pem(RSA_KEY),
        "pkcs1": _private_pem(RSA_KEY, serialization.PrivateFormat.TraditionalOpenSSL),
        "sec1": _private_pem(EC_KEY, serialization.PrivateFormat.TraditionalOpenSSL),
        # an EC PARAMETERS block (the named curve's OID) before the key, as openssl writes
        "params+sec1": EC_PARAMETERS
        + _private_pem(EC_KEY, serialization.PrivateFormat.TraditionalOpenSSL),
    }
    for name, pem in forms.items():
        (tmp_path / f"{name}.pem").write_bytes(pem)
    spec = {name: (tmp_path / f"{name}.pem").as_uri() for name in forms}
    keys, default = load_private_keys(json.dumps(spec))
    assert default is None and set(keys) == set(forms)
    assert _same(keys["pkcs1"].public_key(), RSA_KEY.public_key())
    assert _same(keys["params+sec1"].public_key(), EC_KEY.public_key())

    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k")]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "k")]))
        .public_key(RSA_KEY.public_key())
        .serial_number(1)
        .not_valid_before(dt.datetime(2020, 1, 1))
        .not_valid_after(dt.datetime(2040, 1, 1))
        .sign(RSA_KEY, hashes.SHA256())
    )
    publics = {
        "spki": _public_pem(RSA_KEY),
        "pkcs1": _public_pem(RSA_KEY, serialization.PublicFormat.PKCS1),
        "cert": cert.public_bytes(PEM),
        "ec": _public_pem(EC_KEY),
    }
    loaded = load_public_keys({n: _data_url(p) for n, p in publics.items()}, list(publics))
    assert all(_same(loaded[n], RSA_KEY.public_key()) for n in ("spki", "pkcs1", "cert"))
    assert _same(loaded["ec"], EC_KEY.public_key())


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_the_documented_openssl_commands_make_keys_that_load(tmp_path: Path) -> None:
    # https://pulsar.apache.org/docs/security-encryption: explicit-parameter secp521r1
    priv, pub = tmp_path / "priv.pem", tmp_path / "pub.pem"
    run = ["openssl", "ecparam", "-name", "secp521r1", "-genkey", "-param_enc", "explicit"]
    subprocess.run([*run, "-out", str(priv)], check=True, capture_output=True)
    subprocess.run(
        ["openssl", "ec", "-in", str(priv), "-pubout", "-outform", "pem", "-out", str(pub)],
        check=True,
        capture_output=True,
    )
    _, private = load_private_keys(priv.as_uri())
    public = load_public_keys(pub.as_uri(), ["x"])["x"]
    assert private is not None and _same(private.public_key(), public)


def test_one_url_serves_every_name_and_a_map_must_name_each_key() -> None:
    url = _data_url(_public_pem(RSA_KEY))
    assert set(load_public_keys(url, ["a", "b"])) == {"a", "b"}
    with pytest.raises(CryptoKeyError, match="no public key for the encryption key name 'b'"):
        load_public_keys(json.dumps({"a": url}), ["a", "b"], option="publicKey")
    assert parse_key_names(" a, b ") == ["a", "b"]
    for bad in ("", "a,,b", "a,a"):
        with pytest.raises(CryptoKeyError, match="encryptionKeys"):
            parse_key_names(bad, option="encryptionKeys")


def test_bad_key_urls_are_named_without_showing_the_key(tmp_path: Path) -> None:
    pem = _private_pem(RSA_KEY)
    b64 = base64.b64encode(pem).decode()
    secret_line = pem.decode().splitlines()[3]
    encrypted = RSA_KEY.private_bytes(
        PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"pw")
    )
    cases = {
        pem.decode(): "holds PEM text",
        "data:text/plain;base64," + b64: "media type application/x-pem-file",
        "data:application/x-pem-file;base64," + b64[:-3] + "!!!": "base64 does not decode",
        "https://example.com/k.pem": "not a URL with scheme 'https'",
        "/etc/key.pem": "no scheme",
        (tmp_path / "missing.pem").as_uri(): "cannot read",
        _data_url(_public_pem(RSA_KEY)): "no PEM private key",
        _data_url(encrypted): "encrypted PEM key",
        _data_url(pem.replace(secret_line.encode(), b"A" * len(secret_line))): "does not load",
        "{not json": "not a JSON object",
        "{}": "empty map",
    }
    for value, expected in cases.items():
        with pytest.raises(CryptoKeyError) as info:
            load_private_keys(value, option="privateKey")
        text = str(info.value)
        assert expected in text and "privateKey" in text
        assert b64[:40] not in text and secret_line not in text
        assert isinstance(info.value, InvalidArgument) and isinstance(info.value, ValueError)


def test_a_decryptor_and_an_encryptor_from_urls(caplog: pytest.LogCaptureFixture) -> None:
    encryptor = make_encryptor("t", "a,b", _data_url(_public_pem(RSA_KEY)))
    meta = pb.MessageMetadata(producer_name="p", sequence_id=1, publish_time=2)
    ciphertext = encryptor.encrypt(meta, b"hello", now=0)
    decryptor = make_decryptor("t", json.dumps({"b": _data_url(_private_pem(RSA_KEY))}))
    assert messages(open_entry(1, 2, -1, meta, ciphertext, decrypt=decryptor))[0].value == b"hello"
    with caplog.at_level(logging.WARNING):
        discarding = make_decryptor("persistent://public/default/t", None, "DISCARD")
        assert messages(open_entry(1, 2, -1, meta, ciphertext, decrypt=discarding)) == []
    (record,) = caplog.records
    assert record.levelno == logging.WARNING
    assert "1:2:-1:-1" in record.getMessage() and "'a'" not in record.getMessage()
    assert "a, b" in record.getMessage() and "persistent://public/default/t" in record.getMessage()
    with pytest.raises(InvalidArgument, match="cryptoFailureAction must be one of"):
        make_decryptor("t", None, "skip", action_option="cryptoFailureAction")
    with pytest.raises(CryptoKeyError, match="encryptionKeys is set but publicKey is not"):
        make_encryptor("t", "a", None, names_option="encryptionKeys", key_option="publicKey")
    assert producer_encryptor("t", None, None) is None and producer_encryptor("t", "", None) is None
    with pytest.raises(CryptoKeyError, match="public_key is set but encryption_keys is not"):
        producer_encryptor("t", None, _data_url(_public_pem(RSA_KEY)))
    assert producer_encryptor("t", ["a"], _data_url(_public_pem(RSA_KEY))).key_names == ("a",)
