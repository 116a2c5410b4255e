"""OAuth2 client credentials end to end: an OpenID Connect issuer (:mod:`tests.support.oidc`)
hands out signed JWTs, and Apache Pulsar's ``AuthenticationProviderOpenID`` checks them
(discovery, the issuer's JWKS, signature, expiry, audience) with authorization on.

The broker is the session's secure one (TLS, tokens), whose OpenID provider sits beside the
token provider (both answer the ``token`` method: the broker tries each) and trusts the
issuer of :mod:`tests.support.identity`; this module adds a client of its own to that issuer,
``spark-oidc-tests``, the role the namespace's permissions name. The options are written as
users of the Java client write them: ``authPluginClassName`` the Java class, ``authParams``
a JSON object with ``issuerUrl``, ``privateKey`` (a key file, or a ``data:`` URL of one),
``audience`` and ``scope``.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from pathlib import Path

import pytest

from pulsar_spark.client import OAuth2ClientCredentials, PulsarClient, TokenAuthentication
from pulsar_spark.protocol.errors import PulsarError
from tests.support.apache import ApachePulsar
from tests.support.figures import figure
from tests.support.identity import AUDIENCE
from tests.support.oidc import OidcIssuer

OAUTH2 = "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2"
#: A client of the secure broker's issuer of this module's own (the broker trusts the issuer
#: for :data:`AUDIENCE`), and its role.
CLIENT = "spark-oidc-tests"
SECRET = "oidc-Secret-never-shown-4711"


@pytest.fixture(scope="module")
def oidc_pulsar(apache_pulsar_secure: ApachePulsar) -> ApachePulsar:
    identity = apache_pulsar_secure.identity
    assert identity is not None
    identity.oidc.clients[CLIENT] = SECRET
    apache_pulsar_secure.admin.grant_permission("public/default", CLIENT, ["produce", "consume"])
    return apache_pulsar_secure


@pytest.fixture(scope="module")
def oidc(oidc_pulsar: ApachePulsar) -> OidcIssuer:
    assert oidc_pulsar.identity is not None
    return oidc_pulsar.identity.oidc


def _key_file(directory: Path, secret: str = SECRET) -> Path:
    path = directory / "credentials.json"
    path.write_text(json.dumps({"client_id": CLIENT, "client_secret": secret}))
    path.chmod(0o600)
    return path


def _data_url(secret: str = SECRET) -> str:
    body = json.dumps({"client_id": CLIENT, "client_secret": secret}).encode()
    return "data:application/json;base64," + base64.b64encode(body).decode("ascii")


def _options(broker: ApachePulsar, topic: str, **params: str) -> dict[str, str]:
    return {
        "service.url": broker.service_url,
        "pulsar.client.tlsTrustCertsFilePath": broker.secure.ca_cert,
        "pulsar.client.authPluginClassName": OAUTH2,
        "pulsar.client.authParams": json.dumps(params),
        "topic": topic,
    }


def _client(
    broker: ApachePulsar, auth: OAuth2ClientCredentials | TokenAuthentication
) -> PulsarClient:
    return PulsarClient(
        broker.service_url,
        auth=auth,
        tls_trust_certs_file=broker.secure.ca_cert,
        connect_timeout=5,
        operation_timeout=10,
    )


def _no_secret(text: str) -> None:
    assert SECRET not in text, f"the client secret is shown: {text[:400]!r}"


def test_spark_writes_reads_and_streams_with_tokens_the_broker_checked(
    spark, oidc_pulsar, oidc, topic_name, tmp_path, record_property
) -> None:
    key = _key_file(tmp_path)
    forms = {
        "key file": {"privateKey": key.as_uri()},
        "data url": {"privateKey": _data_url()},
    }
    fetched: dict[str, int] = {}
    for n, (form, extra) in enumerate(sorted(forms.items())):
        topic = f"{topic_name}-{n}"
        options = _options(
            oidc_pulsar, topic, issuerUrl=oidc.url, audience=AUDIENCE, scope="pulsar", **extra
        )
        before = oidc.issued[CLIENT]
        rows = spark.createDataFrame([(f"v{i}",) for i in range(50)], "value string")
        rows.write.format("pulsar").options(**options).mode("append").save()
        df = spark.read.format("pulsar").options(**options).load()
        got = sorted(r.value for r in df.selectExpr("cast(value as string) value").collect())
        assert got == sorted(f"v{i}" for i in range(50)), form
        stream = (
            spark.readStream.format("pulsar")
            .options(**options, startingOffsets="earliest")
            .load()
            .selectExpr("cast(value as string) value")
        )
        query = (
            stream.writeStream.format("memory")
            .queryName(f"oidc_{n}")
            .option("checkpointLocation", str(tmp_path / f"c{n}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()
        streamed = sorted(r.value for r in spark.table(f"oidc_{n}").collect())
        assert streamed == got, form
        # The driver's and the Python workers' processes each fetch a token of their own
        # (and keep it while it lives): more than one, far fewer than the connections made.
        fetched[form] = oidc.issued[CLIENT] - before
        assert fetched[form] >= 2, form
        _no_secret(json.dumps([p.json for p in query.recentProgress]))
    # A wrong secret, as Spark shows it: the token endpoint and the client named, the
    # secret nowhere.
    wrong = _options(oidc_pulsar, topic_name, issuerUrl=oidc.url, audience=AUDIENCE,
                     privateKey=_data_url(SECRET + "-wrong"))  # fmt: skip
    with pytest.raises(Exception) as info:
        spark.read.format("pulsar").options(**wrong).load().count()
    text = str(info.value)
    assert re.search(
        rf"token endpoint \S+/token refused the credentials of client '{CLIENT}'", text
    ), text[:2000]
    _no_secret(text)
    figure(record_property, "oauth2_oidc", **{f"tokens_fetched_{k.replace(' ', '_')}": v
                                             for k, v in fetched.items()})  # fmt: skip


def test_a_rotated_signing_key_is_followed_through_the_jwks(oidc_pulsar, oidc, topic_name) -> None:
    auth = OAuth2ClientCredentials(
        oidc.url, client_id=CLIENT, client_secret=SECRET, audience=AUDIENCE
    )
    with _client(oidc_pulsar, auth) as client, client.create_producer(topic_name) as producer:
        producer.send(b"first key")
    oidc.rotate()
    auth = OAuth2ClientCredentials(
        oidc.url, client_id=CLIENT, client_secret=SECRET, audience=AUDIENCE
    )
    with _client(oidc_pulsar, auth) as client:
        with client.create_producer(topic_name) as producer:
            producer.send(b"second key")
        values = [v for b in client.read_batches(topic_name) for v in b.column("value").to_pylist()]
    assert values == [b"first key", b"second key"]


@pytest.mark.parametrize(
    "case", ["wrong secret", "wrong audience", "expired token", "unreachable issuer"]
)
def test_bad_oauth2_credentials_fail_clearly_without_the_secret(
    oidc_pulsar, oidc, topic_name, case: str
) -> None:
    params = {"client_id": CLIENT, "client_secret": SECRET, "audience": AUDIENCE}
    issuer_url = oidc.url
    if case == "wrong secret":
        params["client_secret"] = SECRET + "-wrong"
    elif case == "wrong audience":
        params["audience"] = "urn:pulsar:another-cluster"
    elif case == "unreachable issuer":
        issuer_url = "http://127.0.0.1:9"  # discard: nothing listens
    auth: OAuth2ClientCredentials | TokenAuthentication = OAuth2ClientCredentials(
        issuer_url, **params, timeout=5
    )
    if case == "expired token":
        # A token the issuer signed that expired a minute ago, as a client that kept one
        # too long would send it.
        token = oidc.token_for(CLIENT, ttl=-60)
        auth = TokenAuthentication(token)
    logged = oidc_pulsar.log_size()
    with _client(oidc_pulsar, auth) as client, pytest.raises(PulsarError) as info:
        client.get_partitions(topic_name)
    text = f"{info.value!r} {info.value}"
    _no_secret(text)
    expected = {
        "wrong secret": rf"credentials of client .{CLIENT}. \(HTTP 401 .*invalid_client",
        "wrong audience": r"(?i)authenticat",
        "expired token": r"(?i)authenticat",
        "unreachable issuer": r"127\.0\.0\.1:9",
    }[case]
    assert re.search(expected, text), text[:1000]
    # The broker refused for the reason the case is about, not another one.
    why = {"wrong audience": r"Claim 'aud'", "expired token": r"(?i)expired"}.get(case)
    if why is not None:
        deadline = time.monotonic() + 10
        while not re.search(why, oidc_pulsar.log_text(logged)):
            assert time.monotonic() < deadline, oidc_pulsar.log_text(logged)[-3000:]
            time.sleep(0.1)


# -- tokens that expire under running streams ----------------------------------------------

TOKEN_CLASS = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
#: Seconds a token lives in the refresh test: the broker checks every second
#: (``authenticationRefreshCheckSeconds=1`` on the secure variant) and challenges a
#: connection whose token expired.
SHORT_TTL = 30
#: Expiries one connection of each stream must have come through.
EXPIRIES = 3
_REFRESHED = re.compile(r"\[/?([\d.]+:\d+)\] Refreshed authentication credentials for role (\S+)")
#: What the broker logs when it closes a connection over its credentials.
_AUTH_CLOSE = re.compile(
    r"(?i)closing connection|failed to authenticate|unable to authenticate|"
    r"authentication failed|doesn't support auth credentials refresh"
)


def test_streams_outlive_three_token_expiries_answering_each_challenge_in_place(
    spark, oidc_pulsar, oidc, topic_name, tmp_path, record_property
) -> None:
    """Two streams read a topic and write another for as long as it takes one of their
    connections to come through three expiries of 30-second tokens: one with OAuth2
    client credentials (a token fetched again once the cached one is old), one with a
    token file that a thread rewrites with a fresh token every 10 s (read again at each
    challenge). The broker challenges every connection whose token expired; each answer
    must be accepted on that connection: no connection closed over credentials, no
    failed task, every row written once.

    Driven by progress: the streams run until the broker has refreshed one connection of
    each role three times (at most 5 minutes, then the test fails saying so)."""
    sec = oidc_pulsar.secure
    key = _key_file(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text(sec.make_token(expires_in=SHORT_TTL))
    roles = {"oauth2": CLIENT, "file": sec.client_role}
    auth_options = {
        "oauth2": {
            "pulsar.client.authPluginClassName": OAUTH2,
            "pulsar.client.authParams": json.dumps(
                {"issuerUrl": oidc.url, "privateKey": key.as_uri(), "audience": AUDIENCE}
            ),
        },
        "file": {
            "pulsar.client.authPluginClassName": TOKEN_CLASS,
            "pulsar.client.authParams": token_file.as_uri(),
        },
    }
    base = {
        "service.url": oidc_pulsar.service_url,
        "pulsar.client.tlsTrustCertsFilePath": sec.ca_cert,
    }
    # The test's own clients use a token that never expires.
    own = TokenAuthentication(sec.make_token())
    logged = oidc_pulsar.log_size()
    issued_before = oidc.issued[CLIENT]
    stop = threading.Event()
    sent = {kind: 0 for kind in roles}
    queries = []
    old_ttl = oidc.ttl
    oidc.ttl = SHORT_TTL
    t0 = time.monotonic()
    try:
        for kind, options in auth_options.items():
            stream = (
                spark.readStream.format("pulsar")
                .options(**base, **options, topic=f"{topic_name}-{kind}-in")
                .option("startingOffsets", "earliest")
                .load()
                .selectExpr("value")
            )
            queries.append(
                stream.writeStream.format("pulsar")
                .options(**base, **options, topic=f"{topic_name}-{kind}-out")
                .option("checkpointLocation", str(tmp_path / f"checkpoint-{kind}"))
                .trigger(processingTime="1 second")
                .start()
            )

        def feed() -> None:
            with _client(oidc_pulsar, own) as client:
                producers = {
                    kind: client.create_producer(f"{topic_name}-{kind}-in") for kind in roles
                }
                while not stop.is_set():
                    for kind, producer in producers.items():
                        producer.send(f"{kind}-{sent[kind]}".encode())
                        producer.flush()
                        sent[kind] += 1
                    stop.wait(0.2)
                for producer in producers.values():
                    producer.close()

        def rewrite_token_file() -> None:
            while not stop.wait(10):
                fresh = tmp_path / "token.new"
                fresh.write_text(sec.make_token(expires_in=SHORT_TTL))
                fresh.replace(token_file)  # atomically: a reader never sees half a token

        threads = [threading.Thread(target=f, daemon=True) for f in (feed, rewrite_token_file)]
        for thread in threads:
            thread.start()
        deadline = t0 + 300
        while True:
            for query in queries:
                assert query.exception() is None, query.exception()
            per_connection = _refreshes(oidc_pulsar.log_text(logged))
            best = {k: max(per_connection.get(r, {"": 0}).values()) for k, r in roles.items()}
            if min(best.values()) >= EXPIRIES:
                break
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the expiries did not land: after {time.monotonic() - t0:.0f} s the most "
                    f"refreshes of one connection were {best} (wanted {EXPIRIES} each)"
                )
            time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join(30)
        # Every row sent arrives once in the stream's output.
        with _client(oidc_pulsar, own) as client:
            for kind in roles:
                want = sorted(f"{kind}-{i}".encode() for i in range(sent[kind]))
                got: list[bytes] = []
                until = time.monotonic() + 60
                while len(got) < len(want) and time.monotonic() < until:
                    got = sorted(
                        v
                        for b in client.read_batches(f"{topic_name}-{kind}-out")
                        for v in b.column("value").to_pylist()
                    )
                    time.sleep(0.5 if len(got) < len(want) else 0)
                assert got == want, (
                    f"{kind}: {len(got)} rows out for {len(want)} in, "
                    f"{len(got) - len(set(got))} repeated"
                )
        for query in queries:
            assert query.exception() is None, query.exception()
    finally:
        stop.set()
        oidc.ttl = old_ttl
        for query in queries:
            query.stop()
    seconds = time.monotonic() - t0
    log = oidc_pulsar.log_text(logged)
    closes = [line for line in log.splitlines() if _AUTH_CLOSE.search(line)]
    assert not closes, "the broker closed connections over credentials:\n" + "\n".join(closes[:20])
    per_connection = _refreshes(log)
    refreshes = {kind: sum(per_connection.get(role, {}).values()) for kind, role in roles.items()}
    # A fetched token serves connections for four fifths of its life: the driver and
    # the Python workers fetch one per process and expiry, not one per connection.
    fetched = oidc.issued[CLIENT] - issued_before
    assert fetched <= 8 * (seconds / (SHORT_TTL * 0.8) + 1), fetched
    figure(
        record_property,
        "token_refresh_stream",
        seconds=round(seconds),
        rows={kind: sent[kind] for kind in roles},
        refreshes=refreshes,
        tokens_fetched=fetched,
    )


def _refreshes(log: str) -> dict[str, dict[str, int]]:
    """Refreshes the broker accepted, by role and by connection (the client's address)."""
    out: dict[str, dict[str, int]] = {}
    for address, role in _REFRESHED.findall(log):
        by_connection = out.setdefault(role, {})
        by_connection[address] = by_connection.get(address, 0) + 1
    return out
