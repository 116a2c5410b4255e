"""TLS, token, basic and mutual TLS authentication and credential refresh against Apache
Pulsar 4.0 (the ``apache_pulsar_secure`` fixture of tests/support/apache.py).

The broker's certificate names ``localhost`` only, so ``localhost`` is the right host name
and ``127.0.0.1`` (the same socket) the wrong one. Tokens are HS256 JWTs signed with the
broker's secret key: role ``client`` may produce and consume in ``public/default``, role
``admin`` is a superuser, any other role is authenticated but not authorized. Basic
authentication's one user, ``spark-jobs``, is a role with the ``client`` role's permissions.
"""

from __future__ import annotations

import threading
import time

import pytest

from pulsar_spark.client import (
    BasicAuthentication,
    CertificateRefused,
    ConnectError,
    PulsarClient,
    TlsAuthentication,
    TokenAuthentication,
)
from pulsar_spark.columnar import ROW_SCHEMA
from pulsar_spark.protocol.errors import PulsarError
from tests.support.official import official_client, produce, read_all


def _rows(client: PulsarClient, topic: str) -> list[dict]:
    rows = []
    for batch in client.read_batches(topic):
        assert batch.schema == ROW_SCHEMA
        rows.extend(batch.to_pylist())
    return rows


def _official_options(broker, token: str | None = None) -> dict:
    import pulsar

    sec = broker.secure
    return {
        "tls_trust_certs_file_path": sec.ca_cert,
        "tls_validate_hostname": True,
        "authentication": pulsar.AuthenticationToken(token or sec.token),
    }


def _values(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}-{i:04d}".encode() for i in range(n)]


# -- TLS ---------------------------------------------------------------------------


def test_tls_with_hostname_verification_and_a_token_works_both_ways(
    apache_pulsar_secure, topic_name
) -> None:
    broker = apache_pulsar_secure
    sec = broker.secure
    assert broker.service_url.startswith("pulsar+ssl://localhost:")
    with PulsarClient(
        broker.service_url,
        auth=TokenAuthentication(sec.token),
        tls_trust_certs_file=sec.ca_cert,
        tls_validate_hostname=True,
    ) as client:
        with client.create_producer(topic_name) as producer:
            for value in _values(20):
                producer.send(value, key="k")
        produce(
            broker.service_url,
            topic_name,
            _values(5, "official"),
            client_options=_official_options(broker),
        )
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == _values(20) + _values(5, "official")
    got = read_all(
        broker.service_url, topic_name, at_least=25, client_options=_official_options(broker)
    )
    assert [g["value"] for g in got] == _values(20) + _values(5, "official")


def test_large_chunked_messages_over_tls(apache_pulsar_secure, topic_name) -> None:
    import random

    big = random.Random(7).randbytes(6 * 1024 * 1024 + 3)
    auth = TokenAuthentication(apache_pulsar_secure.secure.token)
    with _secure_client(apache_pulsar_secure, auth, operation_timeout=30) as client:
        with client.create_producer(topic_name, batching=False) as producer:
            producer.send(big)
            producer.send(b"after")
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == [big, b"after"]


def test_a_certificate_from_another_ca_is_refused(apache_pulsar_secure, topic_name) -> None:
    broker = apache_pulsar_secure
    sec = broker.secure
    t0 = time.monotonic()
    with (
        PulsarClient(
            broker.service_url,
            auth=TokenAuthentication(sec.token),
            tls_trust_certs_file=sec.other_ca_cert,
            connect_timeout=5,
            operation_timeout=5,
        ) as client,
        pytest.raises(
            ConnectError,
            match=r"TLS handshake with localhost:\d+ failed"
            r".*(?i:certificate verify failed)",
        ),
    ):
        client.get_partitions(topic_name)
    assert time.monotonic() - t0 < 5


def test_the_wrong_host_name_is_refused(apache_pulsar_secure, topic_name) -> None:
    broker = apache_pulsar_secure
    sec = broker.secure
    wrong = broker.service_url.replace("localhost", "127.0.0.1")
    with (
        PulsarClient(
            wrong,
            auth=TokenAuthentication(sec.token),
            tls_trust_certs_file=sec.ca_cert,
            connect_timeout=5,
            operation_timeout=5,
        ) as client,
        pytest.raises(
            ConnectError,
            match=r"(?i)TLS handshake with 127\.0\.0\.1:\d+ "
            r"failed.*(IP address mismatch|hostname mismatch)",
        ),
    ):
        client.get_partitions(topic_name)
    # Without hostname verification the same address is accepted (the CA still counts).
    with PulsarClient(
        wrong,
        auth=TokenAuthentication(sec.token),
        tls_trust_certs_file=sec.ca_cert,
        tls_validate_hostname=False,
    ) as client:
        assert client.get_partitions(topic_name) == [topic_name]


def test_the_system_trust_store_does_not_know_the_test_ca(apache_pulsar_secure) -> None:
    broker = apache_pulsar_secure
    started = time.monotonic()
    with (
        PulsarClient(
            broker.service_url, auth=TokenAuthentication(broker.secure.token), connect_timeout=5
        ) as client,
        pytest.raises(CertificateRefused, match=r"(?i)certificate verify failed") as refused,
    ):
        client.get_partitions("persistent://public/default/anything")
    # A configuration error: not retried until the operation timeout (30 s here).
    assert not refused.value.retriable and isinstance(refused.value, ConnectError)
    assert time.monotonic() - started < 5


# -- tokens --------------------------------------------------------------------------


def _secure_client(broker, auth, **options) -> PulsarClient:
    options.setdefault("connect_timeout", 5)
    options.setdefault("operation_timeout", 5)
    return PulsarClient(
        broker.service_url, auth=auth, tls_trust_certs_file=broker.secure.ca_cert, **options
    )


@pytest.mark.parametrize(
    "case",
    ["signed-by-another-key", "expired", "garbage", "none"],
)
def test_a_bad_token_is_rejected_quickly_with_a_clear_error(
    apache_pulsar_secure, topic_name, case: str
) -> None:
    from tests.support.apache_tls import make_token

    sec = apache_pulsar_secure.secure
    auth = {
        "signed-by-another-key": TokenAuthentication(make_token(b"k" * 32, "client")),
        "expired": TokenAuthentication(sec.make_token(expires_in=-60)),
        "garbage": TokenAuthentication("not-a-jwt"),
        "none": None,
    }[case]
    t0 = time.monotonic()
    with (
        _secure_client(apache_pulsar_secure, auth) as client,
        pytest.raises(PulsarError, match=r"(?i)authenticat") as info,
    ):
        client.get_partitions(topic_name)
    assert time.monotonic() - t0 < 5
    err = info.value
    assert not err.retriable, f"{type(err).__name__} is retriable: a client would loop"
    assert "CONNECT to localhost" in str(err)


def test_an_unauthorized_role_is_refused_by_name(apache_pulsar_secure, topic_name) -> None:
    sec = apache_pulsar_secure.secure
    auth = TokenAuthentication(sec.make_token("stranger"))
    with _secure_client(apache_pulsar_secure, auth) as client:
        with pytest.raises(PulsarError, match=r"(?i)authoriz|permission|not allowed") as info:
            list(client.read_batches(topic_name))
        assert not info.value.retriable
        with pytest.raises(PulsarError, match=r"(?i)authoriz|permission|not allowed"):
            client.create_producer(topic_name)


def test_a_token_file_is_read_again_on_each_connect(
    apache_pulsar_secure, topic_name, tmp_path
) -> None:
    sec = apache_pulsar_secure.secure
    token_file = tmp_path / "token"
    token_file.write_text(sec.token + "\n")
    with (
        _secure_client(
            apache_pulsar_secure, TokenAuthentication(token_file=str(token_file))
        ) as client,
        client.create_producer(topic_name) as producer,
    ):
        producer.send(b"from a token file")
    with _secure_client(apache_pulsar_secure, TokenAuthentication(sec.token)) as client:
        assert [r["value"] for r in _rows(client, topic_name)] == [b"from a token file"]


# -- basic authentication ----------------------------------------------------------------


def test_basic_authentication_the_user_is_the_role(apache_pulsar_secure, topic_name) -> None:
    # AuthenticationProviderBasic checks the password against the broker's htpasswd file;
    # the user id is the role the namespace's permissions name. The official client reads
    # what was written with the same credentials.
    import pulsar

    sec = apache_pulsar_secure.secure
    auth = BasicAuthentication(sec.basic_user, sec.basic_password)
    with _secure_client(apache_pulsar_secure, auth) as client:
        with client.create_producer(topic_name) as producer:
            producer.send(b"as spark-jobs")
        assert [r["value"] for r in _rows(client, topic_name)] == [b"as spark-jobs"]
    official = {
        "tls_trust_certs_file_path": sec.ca_cert,
        "tls_validate_hostname": True,
        "authentication": pulsar.AuthenticationBasic(sec.basic_user, sec.basic_password),
    }
    got = read_all(apache_pulsar_secure.service_url, topic_name, client_options=official)
    assert [r["value"] for r in got] == [b"as spark-jobs"]


@pytest.mark.parametrize("case", ["wrong password", "unknown user"])
def test_bad_basic_credentials_are_refused_without_showing_the_password(
    apache_pulsar_secure, topic_name, case: str
) -> None:
    sec = apache_pulsar_secure.secure
    wrong = sec.basic_password[::-1] + "-x"
    auth = {
        "wrong password": BasicAuthentication(sec.basic_user, wrong),
        "unknown user": BasicAuthentication("nobody", sec.basic_password),
    }[case]
    t0 = time.monotonic()
    with (
        _secure_client(apache_pulsar_secure, auth) as client,
        pytest.raises(PulsarError, match=r"(?i)authenticat") as info,
    ):
        client.get_partitions(topic_name)
    assert time.monotonic() - t0 < 5
    assert not info.value.retriable
    text = f"{info.value!r} {info.value}"
    assert "CONNECT to localhost" in text
    assert sec.basic_password not in text
    assert wrong not in text


# -- mutual TLS ----------------------------------------------------------------------


def test_mutual_tls_the_client_certificate_is_the_identity(
    apache_pulsar_secure, topic_name
) -> None:
    sec = apache_pulsar_secure.secure
    auth = TlsAuthentication(sec.client_cert, sec.client_key)
    with _secure_client(apache_pulsar_secure, auth) as client:
        with client.create_producer(topic_name) as producer:
            producer.send(b"over mTLS")
        assert [r["value"] for r in _rows(client, topic_name)] == [b"over mTLS"]
    stats = apache_pulsar_secure.admin.stats(topic_name)
    assert stats["msgInCounter"] == 1


# -- credential refresh (AUTH_CHALLENGE) --------------------------------------------------


def test_expiring_tokens_are_refreshed_through_auth_challenge(
    apache_pulsar_secure, topic_name
) -> None:
    """The broker checks every second (``authenticationRefreshCheckSeconds=1``) whether a
    connection's token has expired; when it has, it sends AUTH_CHALLENGE and expects a
    fresh credential in AUTH_RESPONSE, or closes the connection."""
    sec = apache_pulsar_secure.secure
    issued: list[float] = []
    lock = threading.Lock()

    def fresh_token() -> str:
        with lock:
            issued.append(time.monotonic())
        return sec.make_token(expires_in=3)

    log_mark = apache_pulsar_secure.log_size()
    t0 = time.monotonic()
    with _secure_client(
        apache_pulsar_secure, TokenAuthentication(fresh_token), operation_timeout=10
    ) as client:
        with client.create_producer(topic_name, batching=False) as producer:
            for i in range(16):  # 8 s: the token of the CONNECT expires twice at least
                producer.send(f"m-{i}".encode())
                producer.flush()
                time.sleep(0.5)
            epochs = producer._epoch
        rows = _rows(client, topic_name)
    assert [r["value"] for r in rows] == [f"m-{i}".encode() for i in range(16)]
    assert epochs == 0, "the producer had to be re-created: the connection was lost"
    # Tokens asked for after the connections were made: the answers to AUTH_CHALLENGE.
    refreshed = [round(t - t0, 1) for t in issued if t - t0 > 1.0]
    assert len(refreshed) >= 2, f"tokens issued at {refreshed} s: no AUTH_CHALLENGE answered"
    # The broker's side of it: "Refreshed authentication credentials for role client".
    log = apache_pulsar_secure.log_text(log_mark)
    assert f"Refreshed authentication credentials for role {sec.client_role}" in log


def test_tls_connections_survive_many_auth_challenges_while_busy(
    apache_pulsar_secure, topic_name
) -> None:
    """Each AUTH_CHALLENGE is answered from another thread than the connection's reader.
    Over TLS the two once used the one SSL object at the same time, which OpenSSL does
    not allow: the reader saw a false EOF and dropped the connection (about one answer in
    ten). Here: tokens living 2 s, ~10 s of sends, a dozen challenges, no reconnect."""
    sec = apache_pulsar_secure.secure
    with _secure_client(
        apache_pulsar_secure,
        TokenAuthentication(lambda: sec.make_token(expires_in=2)),
        operation_timeout=10,
    ) as client:
        with client.create_producer(topic_name, batching=False) as producer:
            deadline = time.monotonic() + 10
            sent = 0
            while time.monotonic() < deadline:
                producer.send(f"m-{sent}".encode())
                producer.flush()
                sent += 1
            epochs = producer._epoch
        rows = _rows(client, topic_name)
    assert epochs == 0, "the producer had to be re-created: the connection was lost"
    assert [r["value"] for r in rows] == [f"m-{i}".encode() for i in range(sent)]


def test_a_connection_that_cannot_refresh_its_token_is_closed(
    apache_pulsar_secure, topic_name
) -> None:
    sec = apache_pulsar_secure.secure
    token = sec.make_token(expires_in=2)  # the same token every time: it cannot refresh
    with official_client(
        apache_pulsar_secure.service_url, **_official_options(apache_pulsar_secure)
    ) as official:
        official.create_producer(topic_name).send(b"exists")
    with _secure_client(
        apache_pulsar_secure, TokenAuthentication(token), operation_timeout=5
    ) as client:
        assert client.get_partitions(topic_name) == [topic_name]
        conn = client._pool.get(*_host_port(apache_pulsar_secure.service_url))
        deadline = time.monotonic() + 10
        while not conn.closed and time.monotonic() < deadline:
            time.sleep(0.2)
        assert conn.closed, "the broker kept a connection whose token expired"
        # A new connection with the expired token is refused.
        with pytest.raises(PulsarError, match=r"(?i)authenticat|expired"):
            client.get_partitions(topic_name)


def _host_port(url: str) -> tuple[str, int]:
    host, port = url.split("://", 1)[1].split(":")
    return host, int(port)
