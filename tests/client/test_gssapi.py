"""The SASL GSSAPI initiator (:mod:`pulsar_spark.client.gssapi`) against a real MIT KDC.

One KDC per module (:class:`tests.support.kdc.Kdc`, realm ``PULSAR.TEST``); the acceptor
is :class:`tests.support.kdc.SaslGssapiServer` over the service's keytab, in process. The
in-process krb5 reads the KDC's ``krb5.conf`` through ``KRB5_CONFIG`` (set per test).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pulsar_spark.client.errors import ClientError
from pulsar_spark.client.gssapi import (
    KerberosCredentials,
    KerberosError,
    SaslGssapiClient,
)
from tests.support.kdc import Kdc, KdcError, SaslGssapiServer, sasl_exchange
from tests.support.net import poll_until

SERVICE = "broker"
HOST = "localhost"


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    with Kdc(tmp_path_factory.mktemp("kdc")) as kdc:
        kdc.add_principal(f"{SERVICE}/{HOST}")
        kdc.add_principal("client")
        yield kdc


@pytest.fixture(autouse=True)
def krb5_env(kdc: Kdc, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in kdc.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("KRB5CCNAME", raising=False)


def _keytab(kdc: Kdc, name: str) -> Path:
    return kdc.directory / (name.replace("/", "_") + ".keytab")


def _server(kdc: Kdc, **kw: int) -> SaslGssapiServer:
    return SaslGssapiServer(_keytab(kdc, f"{SERVICE}/{HOST}"), rcache_dir=kdc.rcache_dir, **kw)


def _authenticate(kdc: Kdc, credentials: KerberosCredentials, service: str = SERVICE) -> str:
    """One SASL exchange; the principal the acceptor authenticated."""
    with _server(kdc) as server, SaslGssapiClient(credentials, service, HOST) as client:
        sasl_exchange(client, server)
        assert client.complete and server.complete
        assert server.authorization_id == ""  # none asked for
        assert server.client_principal is not None
        return server.client_principal


def test_a_sasl_exchange_from_a_keytab_authenticates_the_client(kdc: Kdc) -> None:
    credentials = KerberosCredentials("client", str(_keytab(kdc, "client")), None)
    with _server(kdc) as server, SaslGssapiClient(credentials, SERVICE, HOST) as client:
        assert not client.complete
        token = client.initial_response()
        assert token  # the AP-REQ
        # AP-REP (mutual authentication), the empty answer, the layer offer, the choice.
        rounds = sasl_exchange_from(client, server, token)
        assert rounds == 3
        assert client.complete and server.complete
        assert server.client_principal == "client@PULSAR.TEST"
        assert client.context_lifetime is not None and client.context_lifetime > 3600
    # The same object serves the next connection; a keytab without principal works too.
    assert _authenticate(kdc, credentials) == "client@PULSAR.TEST"
    anonymous_keytab = KerberosCredentials(None, str(_keytab(kdc, "client")), None)
    assert _authenticate(kdc, anonymous_keytab) == "client@PULSAR.TEST"


def sasl_exchange_from(client: SaslGssapiClient, server: SaslGssapiServer, token: bytes) -> int:
    rounds = 0
    response = token
    while not server.complete:
        rounds += 1
        challenge = server.evaluate_response(response)
        if not server.complete:
            response = client.evaluate_challenge(challenge)
    return rounds


def test_default_credentials_after_kinit(
    kdc: Kdc, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ccache = f"FILE:{tmp_path / 'krb5cc'}"
    kdc.kinit("client", keytab=_keytab(kdc, "client"), ccache=ccache)
    # An explicit cache, then the default one ($KRB5CCNAME), as after a user's kinit.
    assert _authenticate(kdc, KerberosCredentials(None, None, ccache)) == "client@PULSAR.TEST"
    monkeypatch.setenv("KRB5CCNAME", ccache)
    assert _authenticate(kdc, KerberosCredentials()) == "client@PULSAR.TEST"
    assert _authenticate(kdc, KerberosCredentials("client")) == "client@PULSAR.TEST"


def test_a_stale_keytab_fails_naming_the_keytab_and_principal(kdc: Kdc, tmp_path: Path) -> None:
    old = kdc.add_principal("rotated", keytab=tmp_path / "old.keytab")
    new = kdc.rotate_key("rotated", tmp_path / "new.keytab")
    assert new is not None
    with pytest.raises(KerberosError) as caught:
        _authenticate(kdc, KerberosCredentials("rotated", str(old), None))
    message = str(caught.value)
    assert isinstance(caught.value, ClientError)
    assert str(old) in message and "rotated" in message and "broker/localhost" in message
    assert "Preauthentication failed" in message, message
    assert "0x7" not in message  # no handles
    assert _authenticate(kdc, KerberosCredentials("rotated", str(new), None)) == (
        "rotated@PULSAR.TEST"
    )


def test_a_principal_missing_from_the_keytab_fails_clearly(kdc: Kdc) -> None:
    credentials = KerberosCredentials("someone-else", str(_keytab(kdc, "client")), None)
    with pytest.raises(KerberosError) as caught:
        credentials.acquire()
    message = str(caught.value)
    assert "someone-else" in message and str(_keytab(kdc, "client")) in message, message


def test_a_missing_keytab_file_fails_at_once(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.keytab"
    with pytest.raises(KerberosError, match=f"keytab {missing} .*does not exist"):
        KerberosCredentials("client", str(missing), None)


def test_an_unknown_service_principal_fails_clearly(kdc: Kdc) -> None:
    credentials = KerberosCredentials("client", str(_keytab(kdc, "client")), None)
    with pytest.raises(KerberosError) as caught:
        _authenticate(kdc, credentials, service="nosuch")
    message = str(caught.value)
    assert "nosuch/localhost" in message and "client" in message, message
    assert "not found in Kerberos database" in message, message


def test_a_server_without_the_none_layer_is_refused(kdc: Kdc) -> None:
    credentials = KerberosCredentials("client", str(_keytab(kdc, "client")), None)
    with (
        _server(kdc, offered_layers=4) as server,
        SaslGssapiClient(credentials, SERVICE, HOST) as client,
        pytest.raises(KerberosError, match="without 'none'"),
    ):
        sasl_exchange(client, server)
    assert not client.complete


@pytest.mark.waits
def test_expired_tickets_are_obtained_again_from_the_keytab(kdc: Kdc, tmp_path: Path) -> None:
    life = 20
    keytab = kdc.add_principal("shortlived", max_life=f"{life} seconds")
    kdc.set_max_life(kdc.krbtgt(), life)
    try:
        ccache = f"FILE:{tmp_path / 'krb5cc'}"
        kdc.kinit("shortlived", keytab=keytab, ccache=ccache)
        start, end = kdc.ticket_times(ccache)
        assert 0 < end - start <= life  # klist shows the short life
        credentials = KerberosCredentials("shortlived", str(keytab), None)
        assert _authenticate(kdc, credentials) == "shortlived@PULSAR.TEST"
        first_end = credentials.expires_at()
        assert first_end is not None and first_end - time.time() <= life
        # Until krb5 itself reports the ticket expired.
        assert poll_until(lambda: credentials.lifetime() == 0, life + 10, 0.25)
        assert _authenticate(kdc, credentials) == "shortlived@PULSAR.TEST"
        renewed_end = credentials.expires_at()
        assert renewed_end is not None and renewed_end > first_end + 1
        # A kinit cache is not renewed: its expiry is reported as such.
        assert time.time() > end
        with pytest.raises(KerberosError, match="expired: run kinit again") as caught:
            _authenticate(kdc, KerberosCredentials(None, None, ccache))
        assert ccache in str(caught.value)
    finally:
        kdc.set_max_life(kdc.krbtgt(), 10 * 3600)


def test_threads_share_one_credentials_object(kdc: Kdc) -> None:
    keytab = kdc.add_principal("threads")
    credentials = KerberosCredentials("threads", str(keytab), None)
    seen: list[str] = []
    errors: list[BaseException] = []
    go = threading.Barrier(8)

    def work() -> None:
        try:
            go.wait(10)
            seen.extend(_authenticate(kdc, credentials) for _ in range(5))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert seen == ["threads@PULSAR.TEST"] * 40
    # One TGT for all of them: the credential was acquired once.
    issued = [
        line
        for line in kdc.log.read_text().splitlines()
        if "ISSUE" in line and "threads@PULSAR.TEST for krbtgt/" in line
    ]
    assert len(issued) == 1, issued


def test_a_machine_without_libgssapi_krb5_gets_a_clear_error() -> None:
    script = (
        "import ctypes, ctypes.util\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('not here')\n"
        "ctypes.CDLL = refuse\n"
        "ctypes.util.find_library = lambda name: None\n"
        "from pulsar_spark.client.gssapi import KerberosCredentials, SaslGssapiClient\n"
        "from pulsar_spark.client.errors import ClientError\n"
        "try:\n"
        "    SaslGssapiClient(KerberosCredentials(), 'broker', 'localhost')\n"
        "except ClientError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.startswith("KerberosUnavailable "), done.stdout + done.stderr
    assert "libgssapi_krb5" in done.stdout and "libgssapi-krb5-2" in done.stdout
    assert "krb5-libs" in done.stdout


def test_a_password_principal_after_kinit(kdc: Kdc, tmp_path: Path) -> None:
    kdc.add_password_principal("alice", "correct horse")
    ccache = f"FILE:{tmp_path / 'krb5cc'}"
    with pytest.raises(KdcError) as caught:
        kdc.kinit("alice", password="wrong horse", ccache=ccache)
    assert "wrong horse" not in str(caught.value)
    kdc.kinit("alice", password="correct horse", ccache=ccache)
    assert _authenticate(kdc, KerberosCredentials(None, None, ccache)) == "alice@PULSAR.TEST"
