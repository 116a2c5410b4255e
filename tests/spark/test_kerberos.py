"""Kerberos end to end: a real MIT KDC (:mod:`tests.support.kdc`) and Apache Pulsar with
``AuthenticationProviderSasl`` and authorization on; the connector authenticates with SASL
``GSSAPI`` over MIT's ``libgssapi_krb5`` (:mod:`pulsar_spark.client.gssapi`).

The broker is the session's secure one (TLS, tokens), whose SASL provider sits beside the
token provider, with the realm of :mod:`tests.support.identity`. Its service principal is
``broker/localhost@PULSAR.TEST`` (clients connect to ``localhost``), logged in from a
keytab through the JAAS section ``PulsarBroker``. The client principals are users of the
realm, and their full names are the roles the namespace's permissions name
(``spark-jobs@PULSAR.TEST``). Options are written as users of the Java client's
``AuthenticationSasl`` write them: the JAAS file and section (``jaasConfFile``,
``saslJaasClientSectionName``), or the ``Krb5LoginModule`` options themselves
(``principal``, ``keyTab``), with ``krb5Conf`` for the realm's configuration.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator

import pytest

from pulsar_spark.client import PulsarClient, SaslAuthentication, TokenAuthentication
from pulsar_spark.client.gssapi import KerberosError
from tests.support.apache import ApachePulsar
from tests.support.fault_proxy import FaultProxy
from tests.support.figures import figure
from tests.support.identity import KERBEROS_USER, IdentityProviders

SASL = "org.apache.pulsar.client.impl.auth.AuthenticationSasl"
#: The client principals (short names; the realm is the KDC's): the secure broker's own,
#: and this module's.
JOBS = KERBEROS_USER
SHORT = "spark-short"
ROTATED = "spark-rotated"
#: Seconds the tickets of SHORT live.
SHORT_LIFE = 20


class Realm:
    """The secure broker's KDC, the keytabs of this module's principals and the files a
    client's options name."""

    def __init__(self, identity: IdentityProviders) -> None:
        kdc = identity.kdc
        self.kdc = kdc
        #: The JAAS file with the client section ``PulsarClient`` (for :data:`JOBS`).
        self.jaas = identity.jaas_file
        self.keytabs = {JOBS: identity.keytab}
        self.keytabs.update({name: kdc.add_principal(name) for name in (SHORT, ROTATED)})
        kdc.set_max_life(SHORT, SHORT_LIFE)
        # A keytab exported before the key changed: the KDC no longer takes it.
        kdc.rotate_key(ROTATED)

    def principal(self, name: str) -> str:
        return self.kdc.principal(name)

    def auth(self, name: str = JOBS) -> SaslAuthentication:
        return SaslAuthentication(principal=self.principal(name), keytab=str(self.keytabs[name]))

    def params(self, name: str = JOBS) -> dict[str, str]:
        """``authParams`` with the ``Krb5LoginModule`` options themselves."""
        return {
            "principal": self.principal(name),
            "keyTab": str(self.keytabs[name]),
            "krb5Conf": str(self.kdc.krb5_conf),
        }

    def as_requests(self, name: str) -> list[int]:
        """The ``authtime`` of every ticket-granting ticket the KDC issued ``name``."""
        return self.kdc.tgts_issued(name)


@pytest.fixture(scope="module")
def krb_pulsar(apache_pulsar_secure: ApachePulsar) -> ApachePulsar:
    return apache_pulsar_secure


@pytest.fixture(scope="module")
def realm(krb_pulsar: ApachePulsar) -> Iterator[Realm]:
    assert krb_pulsar.identity is not None
    realm = Realm(krb_pulsar.identity)
    for name in (SHORT, ROTATED):
        krb_pulsar.admin.grant_permission(
            "public/default", realm.principal(name), ["produce", "consume"]
        )
    with pytest.MonkeyPatch.context() as patch:
        for key, value in realm.kdc.env().items():
            patch.setenv(key, value)  # this process's clients: KRB5_CONFIG
        yield realm


def _client(broker: ApachePulsar, auth: SaslAuthentication | TokenAuthentication,
            url: str | None = None) -> PulsarClient:  # fmt: skip
    return PulsarClient(
        url or broker.service_url,
        auth=auth,
        tls_trust_certs_file=broker.secure.ca_cert,
        connect_timeout=10,
        operation_timeout=15,
    )


def _sasl_options(broker: ApachePulsar, params: dict[str, str], topic: str) -> dict[str, str]:
    """Spark options of a read or write on the secure broker with Kerberos ``params``."""
    return {
        "service.url": broker.service_url,
        "pulsar.client.tlsTrustCertsFilePath": broker.secure.ca_cert,
        "pulsar.client.authPluginClassName": SASL,
        "pulsar.client.authParams": json.dumps(params),
        "topic": topic,
    }


def _values(client: PulsarClient, topic: str) -> list[bytes]:
    return [v for b in client.read_batches(topic) for v in b.column("value").to_pylist()]


def test_the_client_writes_and_reads_as_a_kerberos_principal(realm, krb_pulsar, topic_name):
    logged = krb_pulsar.log_size()
    with _client(krb_pulsar, realm.auth()) as client:
        with client.create_producer(topic_name) as producer:
            for i in range(20):
                producer.send(f"m-{i}".encode())
        assert _values(client, topic_name) == [f"m-{i}".encode() for i in range(20)]
    # The broker's view: the role is the principal, the method SASL.
    log = krb_pulsar.log_text(logged)
    assert f"connected with role={JOBS}@{realm.kdc.realm} using authMethod=sasl" in log
    # Read back by another identity (a token) too: the data is on the broker.
    with _client(krb_pulsar, TokenAuthentication(krb_pulsar.secure.superuser_token)) as client:
        assert len(_values(client, topic_name)) == 20


@pytest.mark.parametrize("form", ["keytab", "jaas"])
def test_spark_writes_reads_and_streams_as_a_kerberos_principal(
    spark, realm, krb_pulsar, topic_name, tmp_path, form: str
) -> None:
    if form == "keytab":
        params = realm.params()
    else:
        params = {
            "jaasConfFile": str(realm.jaas),
            "saslJaasClientSectionName": "PulsarClient",
            "serverType": "broker",
            "krb5Conf": str(realm.kdc.krb5_conf),
        }
    options = _sasl_options(krb_pulsar, params, topic_name)
    rows = spark.createDataFrame([(f"v{i}",) for i in range(50)], "value string")
    rows.write.format("pulsar").options(**options).mode("append").save()
    df = spark.read.format("pulsar").options(**options).load()
    got = sorted(r.value for r in df.selectExpr("cast(value as string) value").collect())
    assert got == sorted(f"v{i}" for i in range(50))
    name = f"kerberos_{form}"
    query = (
        spark.readStream.format("pulsar")
        .options(**options, startingOffsets="earliest")
        .load()
        .selectExpr("cast(value as string) value")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    assert sorted(r.value for r in spark.table(name).collect()) == got


def test_a_ticket_expired_mid_stream_is_obtained_again_from_the_keytab(
    spark, realm, krb_pulsar, topic_name, tmp_path, record_property
) -> None:
    """A stream authenticates as a principal whose tickets live 20 s. Once every ticket
    the KDC issued it so far has expired, a proxy between the stream and the broker drops
    every connection: the connections made again need new tickets, which the client gets
    from the keytab. The stream goes on; every row arrives once.

    Driven by progress: the drop waits until the last ticket issued has expired (and no
    newer one came), and the test goes on once the stream wrote rows sent after it."""
    with FaultProxy(f"pulsar://127.0.0.1:{krb_pulsar.ports['broker']}", host="localhost") as proxy:
        base = {
            "service.url": proxy.service_url,
            "pulsar.client.authPluginClassName": SASL,
            "pulsar.client.authParams": json.dumps(realm.params(SHORT)),
        }
        own = TokenAuthentication(krb_pulsar.secure.superuser_token)
        source, sink = f"{topic_name}-in", f"{topic_name}-out"
        stop = threading.Event()
        sent = [0]

        def feed() -> None:
            with _client(krb_pulsar, own) as client, client.create_producer(source) as producer:
                while not stop.is_set():
                    producer.send(f"r-{sent[0]}".encode())
                    producer.flush()
                    sent[0] += 1
                    stop.wait(0.2)

        query = (
            spark.readStream.format("pulsar")
            .options(**base, topic=source, startingOffsets="earliest")
            .load()
            .selectExpr("value")
            .writeStream.format("pulsar")
            .options(**base, topic=sink)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        reader = _client(krb_pulsar, own)
        try:

            def written() -> int:
                assert query.exception() is None, query.exception()
                return len(_values(reader, sink))

            deadline = time.monotonic() + 120
            while written() < 10:
                assert time.monotonic() < deadline, "the stream wrote nothing in 120 s"
                time.sleep(1)
            # Wait until every ticket issued so far has expired.
            while True:
                issued = realm.as_requests(SHORT)
                assert issued, "the KDC issued no ticket to the stream's principal"
                if time.time() > max(issued) + SHORT_LIFE + 2:
                    break
                assert time.monotonic() < deadline + 120, "tickets kept being issued"
                time.sleep(1)
            dropped_at = time.time()
            logged = krb_pulsar.log_size()
            before = len(realm.as_requests(SHORT))
            drops = proxy.drop_all()
            assert drops > 0, "no connection of the stream went through the proxy"
            at_drop = sent[0]
            deadline = time.monotonic() + 120
            while written() < at_drop + 10:
                assert time.monotonic() < deadline, (
                    f"the stream wrote nothing sent after the drop in 120 s "
                    f"({written()} rows out, {at_drop} sent before the drop)"
                )
                time.sleep(1)
            stop.set()
            feeder.join(30)
            want = sorted(f"r-{i}".encode() for i in range(sent[0]))
            deadline = time.monotonic() + 60
            got = sorted(_values(reader, sink))
            while len(got) < len(want) and time.monotonic() < deadline:
                time.sleep(1)
                got = sorted(_values(reader, sink))
            assert got == want, f"{len(got)} rows out for {len(want)} in"
            assert query.exception() is None, query.exception()
        finally:
            stop.set()
            reader.close()
            query.stop()
    renewed = [t for t in realm.as_requests(SHORT)[before:] if t >= int(dropped_at)]
    assert renewed, "no ticket was obtained from the keytab after the old ones expired"
    log = krb_pulsar.log_text(logged)
    reconnected = log.count(f"connected with role={SHORT}@{realm.kdc.realm} using authMethod=sasl")
    assert reconnected > 0, "no connection authenticated after the drop"
    figure(
        record_property,
        "kerberos_ticket_renewal",
        ticket_life_s=SHORT_LIFE,
        connections_dropped=drops,
        tickets_after_drop=len(renewed),
        connections_after_drop=reconnected,
        rows=sent[0],
    )


@pytest.mark.parametrize(
    "case", ["rotated keytab", "missing keytab", "keytab of another principal", "no section"]
)
def test_bad_kerberos_credentials_fail_clearly(spark, realm, krb_pulsar, topic_name, case):
    params = realm.params()
    expected = {
        "rotated keytab": rf"{ROTATED}@\S+.*{re.escape(str(realm.keytabs[ROTATED]))}",
        "missing keytab": r"keytab \S*nowhere\.keytab\b.*does not exist",
        "keytab of another principal": rf"{JOBS}@\S+.*{re.escape(str(realm.keytabs[SHORT]))}",
        "no section": r"has no section 'Missing' \(saslJaasClientSectionName\)",
    }[case]
    if case == "rotated keytab":
        params = realm.params(ROTATED)
    elif case == "missing keytab":
        params["keyTab"] = str(realm.kdc.directory / "nowhere.keytab")
    elif case == "keytab of another principal":
        params["keyTab"] = str(realm.keytabs[SHORT])
    else:
        params = {"jaasConfFile": str(realm.jaas), "saslJaasClientSectionName": "Missing"}
    options = _sasl_options(krb_pulsar, params, topic_name)
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        spark.read.format("pulsar").options(**options).load().count()
    text = str(info.value)
    assert re.search(expected, text), text[:3000]
    if case in ("missing keytab", "no section"):
        assert "pulsar.client.authParams" in text, text[:3000]
    # Refused at once, not after the operation timeout's retries.
    assert time.monotonic() - t0 < 30


def test_a_misspelled_sasl_parameter_is_named(spark, realm, krb_pulsar, topic_name) -> None:
    params = {**realm.params(), "keytab": "x"}  # keyTab, as Krb5LoginModule spells it
    options = {
        "service.url": krb_pulsar.service_url,
        "pulsar.client.authPluginClassName": "sasl",
        "pulsar.client.authParams": json.dumps(params),
        "topic": topic_name,
    }
    with pytest.raises(Exception, match=r"pulsar.client.authParams.*unknown SASL parameter"):
        spark.read.format("pulsar").options(**options).load().count()


def test_the_client_refuses_a_rotated_keytab_without_retrying(realm, krb_pulsar, topic_name):
    with pytest.raises(KerberosError) as info, _client(krb_pulsar, realm.auth(ROTATED)) as client:
        client.get_partitions(topic_name)
    assert str(realm.keytabs[ROTATED]) in str(info.value)


def test_clients_of_one_login_share_its_tickets(realm, krb_pulsar, topic_name) -> None:
    """Each client a task makes builds its provider anew; the tickets (and the KDC login)
    are the process's, one per principal and keytab."""
    first, second = realm.auth(), realm.auth()
    assert first.credentials is second.credentials
    assert realm.auth(SHORT).credentials is not first.credentials
    before = len(realm.as_requests(JOBS))
    for auth in (first, second):
        with _client(krb_pulsar, auth) as client:
            client.get_partitions(topic_name)
    assert len(realm.as_requests(JOBS)) - before <= 1
