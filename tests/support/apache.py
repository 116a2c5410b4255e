"""Apache Pulsar 4.0 standalone as a test broker: one JVM per instance, in five variants.

:class:`ApachePulsar` runs ``org.apache.pulsar.PulsarStandaloneStarter`` (broker,
ZooKeeper and one bookie in one JVM) from the distribution of
:mod:`tests.support.apache_dist`, in ZooKeeper metadata mode
(``PULSAR_STANDALONE_USE_ZOOKEEPER=1``; reliability.md A4), without functions worker
(``-nfw``) or stream storage (``-nss``), on free loopback ports. Variants:

``plain``
    ``pulsar://127.0.0.1:PORT``, admin on ``http://127.0.0.1:PORT``.
``secure``
    TLS, and token, mTLS and basic authentication (an ``htpasswd`` file of one user),
    OAuth2 tokens of an OpenID Connect issuer and Kerberos (SASL) of a realm of its own
    (:mod:`tests.support.identity`), with authorization (:mod:`tests.support.apache_tls`):
    ``service_url`` is ``pulsar+ssl://localhost:PORT``; the plain ports stay open (tokens
    still required) for the broker's own internal client. Auth data is checked again
    every second (``authenticationRefreshCheckSeconds=1``), so a short-lived token makes
    the broker send AUTH_CHALLENGE. Roles: ``client`` (produce and consume on
    ``public/default``) and ``admin`` (superuser).
``dedup``
    Broker-wide deduplication and broker entry metadata (broker timestamp and index)
    exposed to clients.
``txn``
    Transactions on (``transactionCoordinatorEnabled``; standalone then makes a
    1-partition coordinator assign topic: one coordinator), deduplication off.
``stock``
    Apache Pulsar 4.0's stock data-lifecycle policies (``conf/broker.conf``) on a fast
    clock (:data:`STOCK_SETTINGS`): no retention, closed ledgers of a topic that no durable
    subscription needs are deleted within about a second, ledgers roll every 20 entries,
    and a topic with no subscription and no producer is deleted after 3 s of inactivity.
    The other variants turn inactive-topic deletion off, never roll a ledger, and keep
    closed ledgers (unlimited retention: an unload closes a ledger; truncation still
    removes them).

Lines: ``ApachePulsar(..., line="2.10")`` (``"3.3"``, ``"4.2"``) runs another Pulsar line's
jars (:data:`tests.support.apache_dist.LINES`: 2.10.1 and 3.3.6 from their official
distributions, 4.2.4 assembled from Maven Central) with the same command, JVM flags and
``standalone.conf``: the plain variant starts on each of them unchanged (a key a line does
not know is ignored). The default line is 4.0 (4.0.8), what every test but ``tests/lines``
runs on.

Readiness means: the process is alive, the binary port answers CONNECT with CONNECTED
(over TLS and with a token on the secure one), the admin API answers and lists
``public/default``. Also here: :class:`BrokerHandle`, what the ``broker`` fixture
(:mod:`tests.support.plugin`) hands a test meant to run on either broker kind. The
distribution's and the tokens' public names are re-exported.

Measured on the 2-core CI machine (Pulsar 4.0.8, Java 17): see :data:`MEASURED`.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pulsar_spark.protocol import pb

from .admin import PulsarAdmin
from .apache_dist import (
    CONFIG_DIR,
    DEFAULT_LINE,
    DIST_SHA1,
    JVM_FLAGS,
    JVM_MEMORY,
    LINES,
    PULSAR_VERSION,
    DistributionError,
    dist_url,
    ensure_distribution,
    java,
    line_home,
    render_config,
)
from .apache_tls import SecureSettings, generate_secure_settings, make_token
from .identity import OPENID_PROVIDER, SASL_PROVIDER, IdentityProviders
from .net import free_port, handshake
from .process import BrokerProcess, BrokerStartError

__all__ = [
    "BROKER_KINDS",
    "CONFIG_DIR",
    "ANONYMOUS_ROLE",
    "DEDUP_SETTINGS",
    "LINE_SETTINGS",
    "DEFAULT_LINE",
    "DIST_SHA1",
    "LINES",
    "PULSAR_VERSION",
    "STOCK_NAMESPACE",
    "STOCK_SETTINGS",
    "VARIANTS",
    "ApachePulsar",
    "BrokerHandle",
    "BrokerStartError",
    "DistributionError",
    "SecureSettings",
    "dist_url",
    "ensure_distribution",
    "line_home",
    "make_token",
    "render_config",
]

#: Seconds a start may take before it counts as failed (cold JIT on a busy 2-core box).
START_TIMEOUT = 180.0
#: Seconds between SIGTERM and SIGKILL.
STOP_TIMEOUT = 30.0
TAIL_LINES = 120

#: Figures measured on this project's 2-core machine, Pulsar 4.0.8 on OpenJDK 17, spawn
#: to ready (CONNECTED + admin API + public/default): cold start 4.6-4.9 s alone, 5.5-6.6 s
#: inside the full suite; SIGTERM stop 0.5-0.7 s; restart (same data) 4.6-6.5 s; RSS
#: 260-320 MiB after start, ~410 MiB after the whole suite (plain variant, chunked
#: messages included). Every run prints its own at the end (``apache pulsar figures``).
MEASURED = "cold start ~5-7 s, restart ~5-6 s, RSS ~260-410 MiB per broker"

#: Broker keys of the dedup variant (issue 4).
DEDUP_SETTINGS: dict[str, str] = {
    "brokerDeduplicationEnabled": "true",
    "brokerEntryMetadataInterceptors": (
        "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor,"
        "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"
    ),
    "exposingBrokerEntryMetadataToClientEnabled": "true",
}

#: Broker keys of the txn variant (issue 26): the transaction coordinator and the
#: transaction buffer of every topic; deduplication stays off, so exactly-once writes are
#: tested without it.
TXN_ASSIGN_TOPIC = "persistent://pulsar/system/transaction_coordinator_assign"
TXN_SETTINGS: dict[str, str] = {
    "transactionCoordinatorEnabled": "true",
    "systemTopicEnabled": "true",
}

#: Broker keys of the stock variant: the data-lifecycle policies of Apache Pulsar 4.0's
#: ``conf/broker.conf`` (what a production broker runs), with the clocks made fast. Every
#: key name checked against ``org.apache.pulsar.broker.ServiceConfiguration`` of 4.0.8.
#:
#: key                                                      stock (4.0)                  here
#: ``brokerDeleteInactiveTopicsEnabled``                    true                         true
#: ``brokerDeleteInactiveTopicsMode``                       delete_when_no_subscriptions same
#: ``brokerDeleteInactiveTopicsFrequencySeconds``           60                           1
#: ``brokerDeleteInactiveTopicsMaxInactiveDurationSeconds`` empty (= frequency)          3
#: ``defaultRetentionTimeInMinutes``                        0 (no retention)             0
#: ``defaultRetentionSizeInMB``                             0 (no retention)             0
#: ``managedLedgerMaxEntriesPerLedger``                     50000                        20
#: ``managedLedgerMinLedgerRolloverTimeMinutes``            10                           0
#: ``retentionCheckIntervalInSeconds``                      120                          1
#: ``subscriptionExpirationTimeMinutes``                    0 (off)                      0
#: ``subscriptionExpiryCheckIntervalInMinutes``             5                            1
#: ``backlogQuotaDefaultLimitBytes``                        -1 (no quota)                -1
#: ``backlogQuotaDefaultLimitGB``                           -1 (standalone.conf: 10)     -1
#: ``ttlDurationDefaultInSeconds``                          0 (no TTL)                   0
#:
#: Left at their stock values (not set here, nor by ``tests/apache/standalone.conf``):
#: ``managedLedgerMaxLedgerRolloverTimeMinutes`` 240, ``managedLedgerMaxSizePerLedgerMbytes``
#: 2048, ``brokerDeleteInactivePartitionedTopicMetadataEnabled`` false (a partitioned
#: topic's partitions are deleted, its metadata stays). So: a topic with no durable
#: subscription keeps nothing once a ledger closes (every 20 entries), the next retention
#: check (every second) deletes it; a durable subscription holds what it has not
#: acknowledged; a topic with no subscription and no producer for 3 s is deleted.
STOCK_SETTINGS: dict[str, str] = {
    "brokerDeleteInactiveTopicsEnabled": "true",
    "brokerDeleteInactiveTopicsMode": "delete_when_no_subscriptions",
    "brokerDeleteInactiveTopicsFrequencySeconds": "1",
    "brokerDeleteInactiveTopicsMaxInactiveDurationSeconds": "3",
    "defaultRetentionTimeInMinutes": "0",
    "defaultRetentionSizeInMB": "0",
    "managedLedgerMaxEntriesPerLedger": "20",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "retentionCheckIntervalInSeconds": "1",
    "subscriptionExpirationTimeMinutes": "0",
    "subscriptionExpiryCheckIntervalInMinutes": "1",
    "backlogQuotaDefaultLimitBytes": "-1",
    "backlogQuotaDefaultLimitGB": "-1",
    "ttlDurationDefaultInSeconds": "0",
}

#: The namespace of the line variant where the stock retention holds (none: a closed
#: ledger no durable subscription needs is deleted within about a second).
STOCK_NAMESPACE = "public/stock"
#: The role a client without credentials gets on the line variant.
ANONYMOUS_ROLE = "anonymous"

#: Broker keys of the line variant, the one broker of each Pulsar line the conformance
#: set runs on (``tests/lines``): transactions on (:data:`TXN_SETTINGS`); token
#: authentication checked (a token must be signed with the instance's key) while a client
#: without credentials is let in as :data:`ANONYMOUS_ROLE`, authorization off; ledgers
#: closed every 20 entries and the retention check every second, as in
#: :data:`STOCK_SETTINGS`. ``public/default`` keeps everything (the broker's retention is
#: unlimited); :data:`STOCK_NAMESPACE` has the stock retention (none), set at start.
#: Inactive topics are not deleted (the stock variant of the default line tests that).
LINE_SETTINGS: dict[str, str] = {
    **TXN_SETTINGS,
    "authenticationEnabled": "true",
    "authenticationProviders": (
        "org.apache.pulsar.broker.authentication.AuthenticationProviderToken"
    ),
    "anonymousUserRole": ANONYMOUS_ROLE,
    "authorizationEnabled": "false",
    "managedLedgerMaxEntriesPerLedger": "20",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "retentionCheckIntervalInSeconds": "1",
}

VARIANTS = ("plain", "secure", "dedup", "stock", "txn", "line")


class ApachePulsar(BrokerProcess):
    """One Apache Pulsar standalone (broker + ZooKeeper + one bookie in one JVM).

    ``root`` holds ``standalone.conf`` (rendered), ``broker.log`` (stdout and stderr of
    every start, appended, each headed by a ``=== fixture: ... ===`` line), ``data/``
    (ZooKeeper and bookie; removed by :meth:`close`) and, for ``secure``, ``tls/``.
    Ports are picked at the first start and kept, so :meth:`restart` comes back on the
    same addresses with the same data. Process handling (start loop, stop, kill, restart,
    log, RSS) is :class:`tests.support.process.BrokerProcess`'s.

    Args:
        root: the instance's directory.
        variant: ``plain``, ``secure`` (TLS + tokens), ``dedup`` (deduplication and
            broker entry metadata), ``stock`` (stock data-lifecycle policies on a fast
            clock: :data:`STOCK_SETTINGS`), ``txn`` (transactions on:
            :data:`TXN_SETTINGS`) or ``line`` (transactions, token authentication
            beside anonymous access, a namespace with the stock retention:
            :data:`LINE_SETTINGS`; ``.token_secret`` signs its tokens).
        name: for reports.
        settings: more broker keys (override the variant's).
        jvm_flags: more flags for the broker's JVM (a JAAS file for Kerberos, say).
        shared: a session instance: :meth:`stop`, :meth:`kill` and :meth:`restart` raise.
        start_timeout: seconds for a start to reach readiness.
        line: the Pulsar line whose jars run it (a key of :data:`LINES`: ``2.10``,
            ``3.3``, ``4.0`` (the default, 4.0.8) or ``4.2``); same command, flags and
            configuration on every line.
    """

    kind = "apache"
    report_label = "Apache Pulsar"
    summarize_figures = True
    tail_lines = TAIL_LINES
    tail_bytes = 512 * 1024
    stop_timeout = STOP_TIMEOUT
    probe_interval = 0.2
    fresh_fixture = "fresh_apache_pulsar"
    process_label = "the broker JVM"
    header_label = f" (Apache Pulsar {PULSAR_VERSION})"

    def __init__(
        self,
        root: Path,
        *,
        variant: str = "plain",
        name: str | None = None,
        settings: Mapping[str, str] | None = None,
        shared: bool = False,
        start_timeout: float = START_TIMEOUT,
        line: str = DEFAULT_LINE,
        jvm_flags: Sequence[str] = (),
    ) -> None:
        if line not in LINES:
            msg = f"line must be one of {tuple(LINES)}, not {line!r}"
            raise ValueError(msg)
        if variant not in VARIANTS:
            msg = f"variant must be one of {VARIANTS}, not {variant!r}"
            raise ValueError(msg)
        super().__init__(
            root, name=name or f"apache-{variant}", shared=shared, start_timeout=start_timeout
        )
        self.variant = variant
        self.line = line
        #: The Pulsar release this instance runs.
        self.version = LINES[line]
        if line != DEFAULT_LINE:
            self.header_label = f" (Apache Pulsar {self.version})"
        self.extra_settings = dict(settings or {})
        #: More JVM flags (``-Djava.security.auth.login.config=...`` for Kerberos).
        self.extra_jvm_flags = list(jvm_flags)
        self.secure: SecureSettings | None = (
            generate_secure_settings(self.root / "tls") if variant == "secure" else None
        )
        #: The secure variant's OpenID Connect issuer and Kerberos realm.
        self.identity: IdentityProviders | None = (
            IdentityProviders(self.root / "identity") if variant == "secure" else None
        )
        #: The HS256 key the line variant's broker checks tokens with (None otherwise).
        self.token_secret: bytes | None = None
        if variant == "line":
            self.token_secret = secrets.token_bytes(32)
            self.root.mkdir(parents=True, exist_ok=True)
            key_file = self.root / "token-secret.key"
            key_file.write_bytes(self.token_secret)
            key_file.chmod(0o600)
            self.extra_settings.setdefault("tokenSecretKey", key_file.as_uri())
        self.ports: dict[str, int] = {}
        self.home: Path | None = None

    def signed_token(self, subject: str = "client", expires_in: float | None = None) -> str:
        """A token the line variant's broker accepts: an HS256 JWT for role ``subject``
        signed with :attr:`token_secret`."""
        if self.token_secret is None:
            msg = f"{self.name}: only the line variant checks tokens signed by the fixture"
            raise RuntimeError(msg)
        return make_token(self.token_secret, subject, expires_in)

    # -- addresses -----------------------------------------------------------------

    @property
    def host(self) -> str:
        """The name clients use: ``localhost`` on the secure variant (its certificate
        names nothing else), ``127.0.0.1`` otherwise."""
        return "localhost" if self.secure else "127.0.0.1"

    def _port(self, which: str) -> int:
        try:
            return self.ports[which]
        except KeyError:
            msg = f"{self.name} has not been started yet"
            raise RuntimeError(msg) from None

    @property
    def port(self) -> int:
        """The binary protocol port clients use (the TLS one on the secure variant)."""
        return self._port("broker_tls" if self.secure else "broker")

    @property
    def service_url(self) -> str:
        if self.secure:
            return f"pulsar+ssl://{self.host}:{self._port('broker_tls')}"
        return f"pulsar://{self.host}:{self._port('broker')}"

    @property
    def http_url(self) -> str:
        if self.secure:
            return f"https://{self.host}:{self._port('web_tls')}"
        return f"http://{self.host}:{self._port('web')}"

    @property
    def plain_service_url(self) -> str:
        """The plaintext binary port (on the secure variant it still wants a token)."""
        return f"pulsar://127.0.0.1:{self._port('broker')}"

    @property
    def plain_http_url(self) -> str:
        return f"http://127.0.0.1:{self._port('web')}"

    @property
    def admin(self) -> PulsarAdmin:
        """A :class:`PulsarAdmin` on this broker (with the superuser token when secure)."""
        if self.secure:
            return PulsarAdmin(
                self.http_url, token=self.secure.superuser_token, ca_file=self.secure.ca_cert
            )
        return PulsarAdmin(self.http_url)

    @property
    def config_path(self) -> Path:
        return self.root / "standalone.conf"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        where = self.service_url if self.ports else "no ports yet"
        return f"<ApachePulsar {self.name} {where} {state}>"

    # -- configuration ---------------------------------------------------------------

    def settings(self) -> dict[str, str]:
        """Every key this instance sets on top of ``tests/apache/standalone.conf``."""
        advertised = self.host
        s: dict[str, str] = {
            "brokerServicePort": str(self.ports["broker"]),
            "webServicePort": str(self.ports["web"]),
            "bindAddress": "127.0.0.1",
            "advertisedAddress": advertised,
        }
        if self.variant == "dedup":
            s.update(DEDUP_SETTINGS)
        elif self.variant == "stock":
            s.update(STOCK_SETTINGS)
        elif self.variant == "txn":
            s.update(TXN_SETTINGS)
        elif self.variant == "line":
            s.update(LINE_SETTINGS)
        if self.secure is not None:
            sec = self.secure
            s.update({
                "brokerServicePortTls": str(self.ports["broker_tls"]),
                "webServicePortTls": str(self.ports["web_tls"]),
                "tlsCertificateFilePath": sec.server_cert,
                "tlsKeyFilePath": sec.server_key,
                "tlsTrustCertsFilePath": sec.ca_cert,
                "tlsAllowInsecureConnection": "false",
                "tlsRequireTrustedClientCertOnConnect": "false",
                "authenticationEnabled": "true",
                "authenticationProviders": (
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken,"
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls,"
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderBasic,"
                    f"{OPENID_PROVIDER},{SASL_PROVIDER}"
                ),
                "tokenSecretKey": Path(sec.secret_key_file).as_uri(),
                "basicAuthConf": Path(sec.htpasswd_file).as_uri(),
                "authorizationEnabled": "true",
                "superUserRoles": sec.superuser_role,
                # How often the broker checks whether a connection's credentials have
                # expired, and sends AUTH_CHALLENGE when they have.
                "authenticationRefreshCheckSeconds": "1",
                "brokerClientAuthenticationPlugin": (
                    "org.apache.pulsar.client.impl.auth.AuthenticationToken"
                ),
                "brokerClientAuthenticationParameters": f"token:{sec.superuser_token}",
            })  # fmt: skip
        if self.identity is not None:
            s.update(self.identity.broker_settings())
        s.update(self.extra_settings)
        return s

    def _pick_ports(self, attempt: int) -> None:
        names = ["broker", "web", "zookeeper", "bookie"]
        if self.secure:
            names += ["broker_tls", "web_tls"]
        ports: dict[str, int] = {}
        while len(ports) < len(names):
            port = free_port()
            if port not in ports.values():
                ports[names[len(ports)]] = port
        self.ports = ports

    # -- lifecycle (the parts BrokerProcess asks for) ------------------------------------

    def start(self, timeout: float | None = None) -> float:
        """Start the broker and wait until it is ready; return the seconds it took.

        The first start wipes the data directories and may retry on other ports if it
        lost a race for one; a restart comes back on the same ports and data.

        Raises:
            BrokerStartError: with the tail of the log, after killing the JVM.
            DistributionError: the distribution or Java is not there.
        """
        return super().start(timeout)

    def _before_start(self) -> None:
        self.home = line_home(self.line)
        if self.identity is not None:
            self.identity.start()

    def _command(self, first: bool) -> list[str]:
        exe, _ = java()
        assert self.home is not None
        zk, bk = self.data_dir / "zookeeper", self.data_dir / "bookkeeper"
        cmd = [
            exe,
            *JVM_MEMORY,
            *JVM_FLAGS,
            *self.extra_jvm_flags,
            *(self.identity.jvm_flags() if self.identity is not None else ()),
            f"-Dlog4j.configurationFile={CONFIG_DIR / 'log4j2.yaml'}",
            "-cp", str(self.home / "lib" / "*"),
            "org.apache.pulsar.PulsarStandaloneStarter",
            "--config", str(self.config_path),
            "--no-functions-worker",
            "--no-stream-storage",
            "--zookeeper-port", str(self.ports["zookeeper"]),
            "--zookeeper-dir", str(zk),
            "--bookkeeper-port", str(self.ports["bookie"]),
            "--bookkeeper-dir", str(bk),
        ]  # fmt: skip
        if first:
            cmd.append("--wipe-data")
        return cmd

    def _prepare(self, first: bool) -> None:
        template = (CONFIG_DIR / "standalone.conf").read_text("utf-8")
        self.config_path.write_text(render_config(template, self.settings()), "utf-8")
        if first:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True, exist_ok=True)

    def _env(self) -> Mapping[str, str]:
        return {**os.environ, "PULSAR_STANDALONE_USE_ZOOKEEPER": "1"}

    def _not_ready(self, timeout: float) -> str:
        return (
            f"{self.name}: Apache Pulsar on {self.service_url} was not ready within "
            f"{timeout:.0f} s (CONNECT, admin API, public/default)"
        )

    def _probe(self, left: float) -> bool:
        """CONNECT answered with CONNECTED, and ``public/default`` listed by the admin API
        (and, with transactions, the coordinator assign topic made)."""
        if "messaging service is ready" not in self.log_text(self._log_start):
            return False
        sec = self.secure
        reply = handshake(
            self.host,
            self.port,
            timeout=2.0,
            tls_ca=sec.ca_cert if sec else None,
            token=sec.superuser_token if sec else None,
        )
        if not isinstance(reply, pb.CommandConnected):
            return False
        try:
            admin = self.admin
            admin.timeout = 2.0
            if "public/default" not in admin.namespaces("public"):
                return False
            # Transactions: standalone makes pulsar/system and the coordinator assign
            # topic just after the broker says it is ready.
            txn = self.variant in ("txn", "line")
            if txn and admin.partitions(TXN_ASSIGN_TOPIC) < 1:
                return False
            if self.variant == "line":
                if STOCK_NAMESPACE not in admin.namespaces("public"):
                    admin.create_namespace(STOCK_NAMESPACE)
                admin.set_namespace_retention(STOCK_NAMESPACE, 0, 0)
            if sec is not None:
                # The client role may produce and consume in public/default.
                admin.grant_permission("public/default", sec.client_role, ["produce", "consume"])
                roles = [sec.tls_client_role, sec.basic_user]
                roles += self.identity.roles if self.identity is not None else []
                for role in roles:
                    admin.grant_permission("public/default", role, ["produce", "consume"])
        except Exception:
            return False
        self.server_version = reply.server_version
        return True

    def _after_ready(self, elapsed: float) -> None:
        self._note(f"ready after {elapsed:.1f} s")

    def _cleanup(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if self.identity is not None:
            self.identity.stop()


#: The kinds the ``broker`` fixture runs a test on, in order.
BROKER_KINDS = ("lite", "apache")


@dataclass(frozen=True)
class BrokerHandle:
    """One broker of the ``broker`` fixture: what a test needs to run on either kind."""

    kind: str
    service_url: str
    http_url: str | None
    instance: BrokerProcess

    @property
    def admin(self) -> PulsarAdmin:
        if self.http_url is None:
            msg = f"{self.kind} has no admin REST API"
            raise RuntimeError(msg)
        return PulsarAdmin(self.http_url)

    @property
    def log_path(self) -> Path:
        return self.instance.log_path
