"""Apache Pulsar 4.0 LTS standalone brokers for tests, fetched from Maven Central.

A pytest plugin (``tests/conftest.py`` loads it through ``pytest_plugins``).

The distribution
----------------
``org.apache.pulsar:pulsar-server-distribution:4.0.8:tar.gz:bin`` (the official binary
tarball, ~245 MB) is downloaded by the first fixture that needs it, its SHA-1 checked
against the ``.sha1`` Maven Central publishes next to it (and against the value pinned
here), and extracted once into the cache directory: ``$PULSAR_SPARK_CACHE`` or
``~/.cache/pulsar-spark``. Later runs reuse it. Nothing downloaded lives in the repository.
``$PULSAR_SPARK_MAVEN_URL`` replaces ``https://repo1.maven.org/maven2`` (a mirror).

The broker runs as ``java ... org.apache.pulsar.PulsarStandaloneStarter`` on the
distribution's ``lib/*``, with Java 17+ (``$JAVA_HOME/bin/java`` or ``java`` on the PATH),
in ZooKeeper metadata mode (``PULSAR_STANDALONE_USE_ZOOKEEPER=1``; reliability.md A4),
without functions worker (``-nfw``) or stream storage (``-nss``), 512 MiB of heap and
256 MiB of direct memory. Its configuration is ``tests/apache/standalone.conf`` rendered
per instance (ports, directories, variant keys) into the instance's directory, with
``tests/apache/log4j2.yaml``.

Fixtures (all session-scoped, started on first use)
----------------------------------------------------
``apache_pulsar``
    Plain standalone: ``pulsar://127.0.0.1:PORT``, admin on ``http://127.0.0.1:PORT``.
``apache_pulsar_secure``
    TLS and token authentication with authorization (:class:`SecureSettings`): a CA, a
    server certificate for ``localhost`` (DNS name only: ``127.0.0.1`` is the "wrong
    host" for hostname verification), a client certificate (CN ``client-tls``, for mTLS),
    an HS256 secret key and tokens for roles ``client`` (produce and consume on
    ``public/default``) and ``admin`` (superuser). ``service_url`` is
    ``pulsar+ssl://localhost:PORT``; the plain ports stay open (tokens still required)
    for the broker's own internal client.
    Auth data is checked again every second (``authenticationRefreshCheckSeconds=1``), so
    a short-lived token makes the broker send AUTH_CHALLENGE.
``apache_pulsar_dedup``
    Broker-wide deduplication and broker entry metadata (broker timestamp and index)
    exposed to clients.
``fresh_apache_pulsar`` (function)
    A factory of private instances, ``fresh_apache_pulsar(variant="plain") ->
    ApachePulsar``, for tests that stop or restart a broker (session ones refuse).
``broker`` (function, parametrized ``lite`` / ``apache``)
    A :class:`BrokerHandle` with ``kind``, ``service_url``, ``http_url`` (None for
    pulsar-lite, which has no admin API) and ``admin``, for tests meant to run on both.

:class:`ApachePulsar` and ``brokers.PulsarLite`` share their process handling
(``tests/broker_process.py``, :class:`broker_process.BrokerProcess`: ``log_path``,
``log_tail``, ``start``, ``stop``, ``restart``, ``kill``, ``rss_bytes``, ``figures``,
``start_seconds``) and answer the same interface where it makes sense (``service_url``,
``host``, ``port``; ``http_url`` and ``admin`` are Apache's only). Readiness means: the
process is alive, the binary port answers CONNECT with CONNECTED (over TLS and with a token
on the secure one), the admin API answers and lists ``public/default``. A broker that does
not get there fails the test with the tail of its log (:class:`BrokerStartError`), never a
skip. When a test fails, the log of each Apache broker it used is attached to its report;
the whole log stays in the instance's directory under pytest's basetemp. At teardown the
JVM's process group is killed and the data directories removed.

Measured on the 2-core CI machine (Pulsar 4.0.8, Java 17): see :data:`MEASURED`.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import hmac
import json
import os
import re
import shutil
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from admin import PulsarAdmin
from broker_process import (
    BrokerProcess,
    BrokerStartError,
    free_port,
    handshake,
    log_marks,
    log_sections,
    orphan_guard,
    poll_until,
)
from brokers import PulsarLite

from pulsar_spark.protocol import pb

__all__ = [
    "DIST_SHA1",
    "PULSAR_VERSION",
    "ApachePulsar",
    "BrokerHandle",
    "BrokerStartError",
    "DistributionError",
    "SecureSettings",
    "dist_url",
    "ensure_distribution",
    "make_token",
]

#: The pinned Apache Pulsar release: the newest 4.0.x (LTS) with a binary distribution on
#: Maven Central when this was written (4.0.5 and 4.0.7 have none there).
PULSAR_VERSION = "4.0.8"
#: SHA-1 of ``pulsar-server-distribution-4.0.8-bin.tar.gz`` as Maven Central publishes it.
DIST_SHA1 = "c1778d3c31fa53616190d644bb69616f9a3ae2fc"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

CONFIG_DIR = Path(__file__).resolve().parent / "apache"
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

JVM_MEMORY = ("-Xms64m", "-Xmx512m", "-XX:MaxDirectMemorySize=256m")
#: The JVM flags of the distribution's bin/pulsar (4.0.x), without its 2 GiB heap, ZGC with
#: pre-touched memory and GC log. C1 only: measured 4.6-4.9 s to ready instead of 5.9-6.0 s
#: with the default tiered JIT, and 263 instead of 300 MiB RSS.
JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Djava.net.preferIPv4Stack=true",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dorg.apache.pulsar.shade.io.netty.tryReflectionSetAccessible=true",
    "-Djute.maxbuffer=10485760",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.zip=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-opens", "java.base/sun.net=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.platform=ALL-UNNAMED",
    "--add-opens", "java.management/sun.management=ALL-UNNAMED",
    "--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
    "-Dbookkeeper.metadata.bookie.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
    "-Dbookkeeper.metadata.client.drivers="
    "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
    "-Dzookeeper.snapshot.trust.empty=true",
    "-Dzookeeper.admin.enableServer=false",
    "-Dlog4j.shutdownHookEnabled=false",
    "-Dlog4j2.is.webapp=false",
    "-Dpulsar.allocator.exit_on_oom=true",
)  # fmt: skip

#: Broker keys of the dedup variant (issue 4).
DEDUP_SETTINGS: dict[str, str] = {
    "brokerDeduplicationEnabled": "true",
    "brokerEntryMetadataInterceptors": (
        "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor,"
        "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"
    ),
    "exposingBrokerEntryMetadataToClientEnabled": "true",
}


class DistributionError(RuntimeError):
    """The Pulsar distribution could not be downloaded, verified or extracted."""


# ---------------------------------------------------------------------------
# The distribution: download, verify, extract, reuse
# ---------------------------------------------------------------------------


def cache_dir() -> Path:
    """``$PULSAR_SPARK_CACHE``, or ``~/.cache/pulsar-spark`` (created)."""
    env = os.environ.get("PULSAR_SPARK_CACHE")
    path = Path(env).expanduser() if env else Path.home() / ".cache" / "pulsar-spark"
    path.mkdir(parents=True, exist_ok=True)
    return path


def dist_url(version: str = PULSAR_VERSION) -> str:
    base = os.environ.get("PULSAR_SPARK_MAVEN_URL", MAVEN_CENTRAL).rstrip("/")
    name = f"pulsar-server-distribution-{version}-bin.tar.gz"
    return f"{base}/org/apache/pulsar/pulsar-server-distribution/{version}/{name}"


def _fetch(url: str, dest: Path | None, timeout: float = 60.0) -> bytes:
    """GET ``url`` into ``dest`` (streamed) or into memory; errors name the URL."""
    request = urllib.request.Request(url, headers={"User-Agent": "pulsar-spark-tests"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            if dest is None:
                return response.read()
            with dest.open("wb") as out:
                shutil.copyfileobj(response, out, 1 << 20)
            return b""
    except urllib.error.HTTPError as exc:
        msg = f"cannot download {url}: HTTP {exc.code} {exc.reason}"
        raise DistributionError(msg) from exc
    except (OSError, ValueError) as exc:
        msg = f"cannot download {url}: {getattr(exc, 'reason', exc)}"
        raise DistributionError(msg) from exc


def _sha1(path: Path) -> str:
    digest = hashlib.sha1()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ensure_distribution(version: str = PULSAR_VERSION) -> Path:
    """The extracted distribution (``.../apache-pulsar-<version>``), fetched if needed.

    Safe against concurrent test processes (a lock file in the cache directory) and
    interrupted runs (downloads and extractions land under temporary names first).

    Raises:
        DistributionError: naming the URL or the file at fault.
    """
    cache = cache_dir()
    home = cache / f"apache-pulsar-{version}"
    marker = home / ".pulsar-spark-complete"
    if marker.exists():
        return home
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return home
        url = dist_url(version)
        tarball = cache / url.rsplit("/", 1)[1]
        published = _fetch(url + ".sha1", None).decode("ascii", "replace").split()
        if not published or not re.fullmatch(r"[0-9a-f]{40}", published[0]):
            msg = f"{url}.sha1 does not hold a SHA-1: {published[:1]}"
            raise DistributionError(msg)
        expected = published[0]
        if version == PULSAR_VERSION and expected != DIST_SHA1:
            msg = (
                f"{url}.sha1 says {expected}, but tests/apache_pulsar.py pins {DIST_SHA1} "
                "for this release: refusing a changed artifact"
            )
            raise DistributionError(msg)
        if not tarball.exists() or _sha1(tarball) != expected:
            part = tarball.with_name(tarball.name + ".part")
            _fetch(url, part, timeout=120.0)
            got = _sha1(part)
            if got != expected:
                part.unlink()
                msg = f"{url}: downloaded file has SHA-1 {got}, Maven Central says {expected}"
                raise DistributionError(msg)
            part.replace(tarball)
        staging = cache / f".extract-{version}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            with tarfile.open(tarball) as tar:
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(staging, filter="data")
                else:  # Python without PEP 706 (before 3.10.12 / 3.11.4)
                    tar.extractall(staging)  # a checksummed release tarball
        except (OSError, tarfile.TarError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            msg = f"cannot extract {tarball} (from {url}): {exc}"
            raise DistributionError(msg) from exc
        inner = staging / f"apache-pulsar-{version}"
        if not (inner / "lib").is_dir():
            shutil.rmtree(staging, ignore_errors=True)
            msg = f"{tarball} (from {url}) has no apache-pulsar-{version}/lib"
            raise DistributionError(msg)
        shutil.rmtree(home, ignore_errors=True)
        inner.replace(home)
        shutil.rmtree(staging, ignore_errors=True)
        marker.write_text(f"{url}\nsha1 {expected}\n")
    return home


_JAVA: tuple[str, int] | None = None


def java() -> tuple[str, int]:
    """The java executable and its major version (17 or newer, else an error)."""
    global _JAVA
    if _JAVA is not None:
        return _JAVA
    home = os.environ.get("JAVA_HOME")
    exe = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not exe or not Path(exe).exists():
        msg = "Apache Pulsar needs Java 17+: no java on the PATH and no JAVA_HOME"
        raise DistributionError(msg)
    out = subprocess.run(
        [exe, "-version"], capture_output=True, text=True, timeout=60, check=False
    ).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        msg = f"cannot tell the version of {exe}: {out.strip()[:200]}"
        raise DistributionError(msg)
    major = int(m.group(2)) if m.group(1) == "1" else int(m.group(1))
    if major < 17:
        msg = f"Apache Pulsar {PULSAR_VERSION} needs Java 17+, {exe} is Java {major}"
        raise DistributionError(msg)
    _JAVA = (exe, major)
    return _JAVA


# ---------------------------------------------------------------------------
# Tokens and certificates
# ---------------------------------------------------------------------------


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_token(secret: bytes, subject: str, expires_in: float | None = None) -> str:
    """An HS256 JWT with ``sub`` = ``subject`` (the role) and, if given, ``exp``."""
    header = {"alg": "HS256", "typ": "JWT"}
    claims: dict[str, Any] = {"sub": subject}
    if expires_in is not None:
        claims["exp"] = int(time.time() + expires_in)
    signing_input = (
        _b64url(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64url(json.dumps(claims, separators=(",", ":")).encode())
    )
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


@dataclass(frozen=True)
class SecureSettings:
    """Files and credentials of a TLS + token instance (all paths are strings)."""

    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    #: A second CA that signed nothing of this broker's ("wrong CA").
    other_ca_cert: str
    secret_key_file: str
    secret: bytes
    #: Role ``client``: produce and consume on ``public/default``.
    token: str
    #: Role ``admin``: a superuser.
    superuser_token: str
    client_role: str = "client"
    superuser_role: str = "admin"
    #: The subject of the client certificate (its role with mTLS).
    tls_client_role: str = "client-tls"

    def make_token(self, subject: str | None = None, expires_in: float | None = None) -> str:
        """A token signed with this broker's key (role ``client`` by default)."""
        return make_token(self.secret, subject or self.client_role, expires_in)


def _write_private(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    path.chmod(0o600)
    return str(path)


def generate_secure_settings(directory: Path) -> SecureSettings:
    """A CA, a server certificate for ``localhost``, a client certificate, a second CA,
    an HS256 secret key and two tokens, written into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)

    def key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def pem_key(k: ec.EllipticCurvePrivateKey) -> bytes:
        # PKCS#8: what the broker's Netty SslContext reads.
        return k.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def ca(cn: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        k = key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(name(cn))
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True,
                    content_commitment=False, key_encipherment=False, data_encipherment=False,
                    key_agreement=False, encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(k.public_key()), False)
            .sign(k, hashes.SHA256())
        )
        return cert, k

    def leaf(
        cn: str,
        issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
        usage: x509.ObjectIdentifier,
        dns: list[str],
    ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        k = key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(issuer[0].subject)
            .public_key(k.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer[1].public_key()),
                critical=False,
            )
        )
        if dns:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(d) for d in dns]), critical=False
            )
        return builder.sign(issuer[1], hashes.SHA256()), k

    def pem(cert: x509.Certificate) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    root = ca("pulsar-spark test CA")
    other = ca("pulsar-spark unrelated CA")
    # DNS name only, on purpose: connecting to 127.0.0.1 is the hostname mismatch.
    server = leaf("localhost", root, ExtendedKeyUsageOID.SERVER_AUTH, ["localhost"])
    client = leaf("client-tls", root, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    d = directory
    (d / "ca.cert.pem").write_bytes(pem(root[0]))
    (d / "other-ca.cert.pem").write_bytes(pem(other[0]))
    (d / "server.cert.pem").write_bytes(pem(server[0]))
    (d / "client.cert.pem").write_bytes(pem(client[0]))
    secret = os.urandom(32)
    return SecureSettings(
        ca_cert=str(d / "ca.cert.pem"),
        ca_key=_write_private(d / "ca.key.pem", pem_key(root[1])),
        server_cert=str(d / "server.cert.pem"),
        server_key=_write_private(d / "server.key.pem", pem_key(server[1])),
        client_cert=str(d / "client.cert.pem"),
        client_key=_write_private(d / "client.key.pem", pem_key(client[1])),
        other_ca_cert=str(d / "other-ca.cert.pem"),
        secret_key_file=_write_private(d / "token-secret.key", secret),
        secret=secret,
        token=make_token(secret, "client"),
        superuser_token=make_token(secret, "admin"),
    )


# ---------------------------------------------------------------------------
# ApachePulsar
# ---------------------------------------------------------------------------

VARIANTS = ("plain", "secure", "dedup")


def render_config(template: str, settings: Mapping[str, str]) -> str:
    """``template`` (a .properties text) with each key of ``settings`` set: replaced in
    place where the template has it, appended otherwise. Every key appears once (the
    bookie's configuration reader would turn a repeated key into a list)."""
    out: list[str] = []
    seen: set[str] = set()
    for line in template.splitlines():
        m = re.match(r"\s*([A-Za-z0-9_.]+)\s*=", line)
        if m and not line.lstrip().startswith("#"):
            key = m.group(1)
            if key in seen:
                continue
            seen.add(key)
            if key in settings:
                line = f"{key}={settings[key]}"
        out.append(line)
    extra = [k for k in settings if k not in seen]
    if extra:
        out += ["", "# --- set by tests/apache_pulsar.py for this instance ---"]
        out += [f"{k}={settings[k]}" for k in extra]
    return "\n".join(out) + "\n"


class ApachePulsar(BrokerProcess):
    """One Apache Pulsar standalone (broker + ZooKeeper + one bookie in one JVM).

    ``root`` holds ``standalone.conf`` (rendered), ``broker.log`` (stdout and stderr of
    every start, appended, each headed by a ``=== fixture: ... ===`` line), ``data/``
    (ZooKeeper and bookie; removed by :meth:`close`) and, for ``secure``, ``tls/``.
    Ports are picked at the first start and kept, so :meth:`restart` comes back on the
    same addresses with the same data. Process handling (start loop, stop, kill, restart,
    log, RSS) is :class:`broker_process.BrokerProcess`'s.

    Args:
        root: the instance's directory.
        variant: ``plain``, ``secure`` (TLS + tokens) or ``dedup`` (deduplication and
            broker entry metadata).
        name: for reports.
        settings: more broker keys (override the variant's).
        shared: a session instance: :meth:`stop`, :meth:`kill` and :meth:`restart` raise.
        start_timeout: seconds for a start to reach readiness.
    """

    kind = "apache"
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
    ) -> None:
        if variant not in VARIANTS:
            msg = f"variant must be one of {VARIANTS}, not {variant!r}"
            raise ValueError(msg)
        super().__init__(root, name=name or f"apache-{variant}", shared=shared,
                         start_timeout=start_timeout)
        self.variant = variant
        self.extra_settings = dict(settings or {})
        self.secure: SecureSettings | None = (
            generate_secure_settings(self.root / "tls") if variant == "secure" else None
        )
        self.ports: dict[str, int] = {}
        self.home: Path | None = None

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
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderTls"
                ),
                "tokenSecretKey": Path(sec.secret_key_file).as_uri(),
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
        self.home = ensure_distribution()

    def _command(self, first: bool) -> list[str]:
        exe, _ = java()
        assert self.home is not None
        zk, bk = self.data_dir / "zookeeper", self.data_dir / "bookkeeper"
        cmd = [
            *_ORPHAN_GUARD,
            exe,
            *JVM_MEMORY,
            *JVM_FLAGS,
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
        """CONNECT answered with CONNECTED, and ``public/default`` listed by the admin API."""
        if "messaging service is ready" not in self.log_text(self._log_start):
            return False
        sec = self.secure
        reply = handshake(
            self.host, self.port, timeout=2.0,
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
            if sec is not None:
                # The client role may produce and consume in public/default.
                admin.grant_permission("public/default", sec.client_role,
                                       ["produce", "consume"])
                admin.grant_permission("public/default", sec.tls_client_role,
                                       ["produce", "consume"])
        except Exception:
            return False
        self.server_version = reply.server_version
        return True

    def _after_ready(self, elapsed: float) -> None:
        self._note(f"ready after {elapsed:.1f} s")

    def _cleanup(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)


_ORPHAN_GUARD = orphan_guard()
#: Figures of every instance that started, printed at the end of the run.
_FIGURES: dict[str, str] = {}


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


def _session_instance(
    tmp_path_factory: pytest.TempPathFactory, variant: str
) -> Iterator[ApachePulsar]:
    name = f"apache_pulsar_{variant}"
    broker = ApachePulsar(tmp_path_factory.mktemp(name), variant=variant, name=name,
                          shared=True)
    try:
        broker.start()
        _FIGURES[str(broker.root)] = broker.figures()
        yield broker
    finally:
        if broker.running:
            _FIGURES[str(broker.root)] = broker.figures()
        broker.close()


@pytest.fixture(scope="session")
def apache_pulsar(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide plain Apache Pulsar standalone."""
    yield from _session_instance(tmp_path_factory, "plain")


@pytest.fixture(scope="session")
def apache_pulsar_secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide Apache Pulsar with TLS, token authentication and authorization;
    ``.secure`` holds the certificates and tokens."""
    yield from _session_instance(tmp_path_factory, "secure")


@pytest.fixture(scope="session")
def apache_pulsar_dedup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApachePulsar]:
    """A session-wide Apache Pulsar with deduplication and broker entry metadata."""
    yield from _session_instance(tmp_path_factory, "dedup")


class ApacheFactory:
    """What ``fresh_apache_pulsar`` yields: ``fresh_apache_pulsar(variant=..., start=True)``."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory, prefix: str) -> None:
        self._tmp = tmp_path_factory
        self._prefix = prefix
        self.instances: list[ApachePulsar] = []

    def __call__(self, *, variant: str = "plain", start: bool = True,
                 **options: Any) -> ApachePulsar:
        n = len(self.instances)
        root = self._tmp.mktemp(f"{self._prefix}-{n}", numbered=True)
        options.setdefault("name", f"{self._prefix}-{variant}-{n}")
        broker = ApachePulsar(root, variant=variant, **options)
        self.instances.append(broker)
        if start:
            broker.start()
        return broker

    def close(self) -> None:
        for broker in self.instances:
            if broker.start_seconds:
                _FIGURES[str(broker.root)] = broker.figures()
            broker.close()


@pytest.fixture
def fresh_apache_pulsar(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ApacheFactory]:
    """A factory of private Apache Pulsar instances (stop, restart and kill allowed)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", request.node.name).strip("-")[:40] or "test"
    factory = ApacheFactory(tmp_path_factory, f"ap-{slug}")
    try:
        yield factory
    finally:
        factory.close()


@dataclass(frozen=True)
class BrokerHandle:
    """One broker of the ``broker`` fixture: what a test needs to run on either kind."""

    kind: str
    service_url: str
    http_url: str | None
    instance: PulsarLite | ApachePulsar

    @property
    def admin(self) -> PulsarAdmin:
        if self.http_url is None:
            msg = f"{self.kind} has no admin REST API"
            raise RuntimeError(msg)
        return PulsarAdmin(self.http_url)

    @property
    def log_path(self) -> Path:
        return self.instance.log_path


BROKER_KINDS = ("lite", "apache")


@pytest.fixture(params=BROKER_KINDS, ids=BROKER_KINDS)
def broker(request: pytest.FixtureRequest) -> BrokerHandle:
    """Each broker kind in turn: the session pulsar-lite, then the session Apache Pulsar."""
    if request.param == "lite":
        lite: PulsarLite = request.getfixturevalue("pulsar_lite")
        return BrokerHandle("lite", lite.service_url, None, lite)
    apache: ApachePulsar = request.getfixturevalue("apache_pulsar")
    return BrokerHandle("apache", apache.service_url, apache.http_url, apache)


# ---------------------------------------------------------------------------
# Logs in failed-test reports; figures at the end
# ---------------------------------------------------------------------------

_LOG_MARKS = pytest.StashKey[dict[int, int]]()


def _instances_of(item: pytest.Item) -> list[ApachePulsar]:
    found: list[ApachePulsar] = []
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, ApachePulsar):
            found.append(value)
        elif isinstance(value, BrokerHandle) and isinstance(value.instance, ApachePulsar):
            found.append(value.instance)
        elif isinstance(value, ApacheFactory):
            found.extend(value.instances)
    return list({id(b): b for b in found}.values())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    item.stash[_LOG_MARKS] = log_marks(_instances_of(item))
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    marks = item.stash.get(_LOG_MARKS, {})
    report.sections.extend(log_sections("Apache Pulsar", _instances_of(item), marks))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _FIGURES:
        terminalreporter.section("apache pulsar figures")
        for line in _FIGURES.values():
            terminalreporter.write_line(line)


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` every 0.1 s; ``TimeoutError`` naming ``what`` after ``timeout``."""
    if not poll_until(check, timeout):
        msg = f"{what}: not within {timeout:g} s"
        raise TimeoutError(msg)
