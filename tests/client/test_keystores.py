"""Java key stores (PKCS12 made with ``cryptography``, JKS made with ``keytool``) read into
PEM, and key-store TLS against the secure Apache Pulsar broker (``apache_pulsar_secure``):
a trust store with a token, and the client certificate from a key store
(``AuthenticationKeyStoreTls``, Databricks' example)."""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from pulsar_spark.client.net.keystores import KeyStoreError, TlsFiles, load_store
from pulsar_spark.spark.connect import KeyStoreClient, open_client
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from tests.support.apache_tls import SecureSettings, generate_secure_settings

TRUST_PASSWORD, KEY_PASSWORD = "trust-pw-1", "key-pw-2"
JAVA_AUTH = "org.apache.pulsar.client.impl.auth."


@dataclass(frozen=True)
class Stores:
    trust_p12: str
    trust_jks: str
    client_p12: str
    client_jks: str
    other_trust_p12: str


def _keytool(*args: str) -> None:
    subprocess.run(["keytool", "-noprompt", *args], check=True, capture_output=True, timeout=120)


def make_stores(sec: SecureSettings, directory: Path) -> Stores:
    """Trust stores with the CA (and one with an unrelated CA), key stores with the client
    certificate, its key and the CA, as PKCS12 (cryptography) and JKS (keytool)."""
    directory.mkdir(parents=True, exist_ok=True)

    def cert(path: str) -> x509.Certificate:
        return x509.load_pem_x509_certificate(Path(path).read_bytes())

    def truststore(ca: str, name: str) -> str:
        out = directory / name
        entry = pkcs12.PKCS12Certificate(cert(ca), b"ca")
        out.write_bytes(
            pkcs12.serialize_java_truststore(
                [entry], serialization.BestAvailableEncryption(TRUST_PASSWORD.encode())
            )
        )
        return str(out)

    key = serialization.load_pem_private_key(Path(sec.client_key).read_bytes(), None)
    client_p12 = directory / "client.p12"
    client_p12.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"client",
            key,  # type: ignore[arg-type]
            cert(sec.client_cert),
            [cert(sec.ca_cert)],
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        )
    )
    trust_jks, client_jks = directory / "trust.jks", directory / "client.jks"
    _keytool("-importcert", "-alias", "ca", "-file", sec.ca_cert, "-keystore", str(trust_jks),
             "-storetype", "JKS", "-storepass", TRUST_PASSWORD)  # fmt: skip
    _keytool("-importkeystore", "-srckeystore", str(client_p12), "-srcstoretype", "PKCS12",
             "-srcstorepass", KEY_PASSWORD, "-destkeystore", str(client_jks),
             "-deststoretype", "JKS", "-deststorepass", KEY_PASSWORD)  # fmt: skip
    return Stores(
        truststore(sec.ca_cert, "trust.p12"),
        str(trust_jks),
        str(client_p12),
        str(client_jks),
        truststore(sec.other_ca_cert, "other-trust.p12"),
    )


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> tuple[SecureSettings, Stores]:
    root = tmp_path_factory.mktemp("keystores")
    sec = generate_secure_settings(root / "tls")
    return sec, make_stores(sec, root / "stores")


def _pem_set(text: str) -> set[bytes]:
    return {
        c.public_bytes(serialization.Encoding.DER)
        for c in x509.load_pem_x509_certificates(text.encode())
    }


@pytest.mark.parametrize("kind", ["PKCS12", "JKS"])
def test_trust_and_key_stores_read_into_pem(local, kind: str) -> None:
    sec, stores = local
    trust_path = stores.trust_p12 if kind == "PKCS12" else stores.trust_jks
    trust = load_store(trust_path, kind.lower(), TRUST_PASSWORD)
    assert _pem_set(trust.trusted_pem) == _pem_set(Path(sec.ca_cert).read_text())
    assert trust.key_pem == "" and trust.chain_pem == ""
    client = load_store(
        stores.client_p12 if kind == "PKCS12" else stores.client_jks, kind, KEY_PASSWORD
    )
    chain = x509.load_pem_x509_certificates(client.chain_pem.encode())
    assert chain[0] == x509.load_pem_x509_certificate(Path(sec.client_cert).read_bytes())
    key = serialization.load_pem_private_key(client.key_pem.encode(), None)
    original = serialization.load_pem_private_key(Path(sec.client_key).read_bytes(), None)
    assert key.public_key().public_numbers() == original.public_key().public_numbers()  # type: ignore[union-attr]
    assert KEY_PASSWORD not in repr(client) and "PRIVATE" not in repr(client)


def test_bad_stores_fail_clearly_without_showing_passwords(local, tmp_path) -> None:
    _, stores = local
    cases = [
        (stores.trust_jks, "JKS", "wrong-pw-x", "password is wrong"),
        (stores.client_jks, "JKS", "wrong-pw-x", "password is wrong"),
        (stores.trust_p12, "PKCS12", "wrong-pw-x", "password is wrong"),
        (stores.client_jks, "PKCS12", KEY_PASSWORD, "is a JKS store"),
        (stores.client_p12, "JKS", KEY_PASSWORD, "not a JKS store"),
        (str(tmp_path / "missing.p12"), "PKCS12", KEY_PASSWORD, "cannot be read"),
        (stores.client_p12, "JCEKS", KEY_PASSWORD, "use PKCS12 or JKS"),
    ]
    corrupt = tmp_path / "corrupt.jks"
    corrupt.write_bytes(Path(stores.client_jks).read_bytes()[:200])
    cases.append((str(corrupt), "JKS", KEY_PASSWORD, "corrupt"))
    for path, kind, password, words in cases:
        with pytest.raises(KeyStoreError, match=words) as info:
            load_store(path, kind, password)
        assert password not in str(info.value) and not info.value.retriable


def test_tls_files_are_private_and_removed_at_close() -> None:
    files = TlsFiles()
    path = files.write("client.key.pem", "secret\n")
    assert stat.S_IMODE(os.stat(files.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    files.close()
    assert not os.path.exists(files.directory)


def test_key_store_options_are_checked_and_passwords_hidden(local) -> None:
    _, stores = local
    base = {"service.url": "pulsar+ssl://localhost:6651", "topic": "t"}
    with pytest.raises(PulsarOptionError, match="useKeyStoreTls=true") as info:
        parse_options({**base, "pulsar.client.tlsTrustStorePath": stores.trust_jks})
    assert info.value.option == "pulsar.client.tlsTrustStorePath"
    both = {"useKeyStoreTls": "true", "tlsTrustStorePath": stores.trust_jks}
    with pytest.raises(PulsarOptionError, match="give one of the two"):
        parse_options({**base, **both, "tlsTrustCertsFilePath": "/tmp/ca.pem"})
    with pytest.raises(PulsarOptionError, match="PKCS12 or JKS"):
        parse_options({**base, **both, "tlsTrustStoreType": "JCEKS"})
    parsed = parse_options({**base, **both, "tlsTrustStorePassword": TRUST_PASSWORD})
    assert parsed.trust_store_type == "JKS" and TRUST_PASSWORD not in repr(parsed)
    wrong = parse_options({**base, **both, "tlsTrustStorePassword": "wrong-pw-x"})
    with pytest.raises(PulsarOptionError, match="password is wrong") as info:
        open_client(wrong)
    assert info.value.option == "pulsar.client.tlsTrustStorePath"
    assert "wrong-pw-x" not in str(info.value)


# -- against the secure broker -------------------------------------------------------------


@pytest.fixture(scope="module")
def broker_stores(apache_pulsar_secure, tmp_path_factory) -> Stores:
    return make_stores(apache_pulsar_secure.secure, tmp_path_factory.mktemp("broker-stores"))


def _roundtrip(options: dict[str, str], topic: str, n: int = 5) -> list[bytes]:
    with open_client(parse_options(options)) as client:
        assert isinstance(client, KeyStoreClient)
        directory = client.tls_files.directory
        with client.create_producer(topic) as producer:
            for i in range(n):
                producer.send(f"v{i}".encode())
        values = [row["value"] for b in client.read_batches(topic) for row in b.to_pylist()]
    assert not os.path.exists(directory), "the PEM files outlived the client"
    return values


@pytest.mark.parametrize("kind", ["PKCS12", "JKS"])
def test_a_trust_store_and_a_token(apache_pulsar_secure, broker_stores, topic_name, kind) -> None:
    """Databricks' documented spelling: pulsar.client.useKeyStoreTls + tlsTrustStore*."""
    broker = apache_pulsar_secure
    options = {
        "service.url": broker.service_url,
        "pulsar.client.authPluginClassName": JAVA_AUTH + "AuthenticationToken",
        "pulsar.client.authParams": f"token:{broker.secure.token}",
        "pulsar.client.useKeyStoreTls": "true",
        "pulsar.client.tlsTrustStoreType": kind,
        "pulsar.client.tlsTrustStorePath": broker_stores.trust_p12
        if kind == "PKCS12"
        else broker_stores.trust_jks,
        "pulsar.client.tlsTrustStorePassword": TRUST_PASSWORD,
        "pulsar.client.tlsHostnameVerificationEnable": "true",
    }
    assert _roundtrip(options, topic_name) == [f"v{i}".encode() for i in range(5)]
    untrusted = {
        **options,
        "pulsar.client.tlsTrustStoreType": "PKCS12",
        "pulsar.client.tlsTrustStorePath": broker_stores.other_trust_p12,
        "pulsar.client.operationTimeoutMs": "5000",
        "pulsar.client.connectionTimeoutMs": "3000",
    }
    with (
        open_client(parse_options(untrusted)) as client,
        pytest.raises(Exception, match=r"(?i)certificate|verify|ssl"),
    ):
        client.get_partitions(topic_name)


@pytest.mark.parametrize("kind", ["PKCS12", "JKS"])
def test_the_client_certificate_from_a_key_store(
    apache_pulsar_secure, broker_stores, topic_name, kind
) -> None:
    """``AuthenticationKeyStoreTls`` as in Databricks' example: mTLS, the certificate's
    subject (``client-tls``) is the role."""
    broker = apache_pulsar_secure
    store = broker_stores.client_p12 if kind == "PKCS12" else broker_stores.client_jks
    options = {
        "service.url": broker.service_url,
        "pulsar.client.authPluginClassName": JAVA_AUTH + "AuthenticationKeyStoreTls",
        "pulsar.client.authParams": (
            f"keyStoreType:{kind},keyStorePath:{store},keyStorePassword:{KEY_PASSWORD}"
        ),
        "pulsar.client.useKeyStoreTls": "true",
        "pulsar.client.tlsTrustStoreType": "JKS",
        "pulsar.client.tlsTrustStorePath": broker_stores.trust_jks,
        "pulsar.client.tlsTrustStorePassword": TRUST_PASSWORD,
    }
    assert _roundtrip(options, topic_name, n=3) == [b"v0", b"v1", b"v2"]
    assert broker.admin.stats(topic_name)["msgInCounter"] == 3
