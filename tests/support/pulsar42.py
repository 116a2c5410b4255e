"""Prototype: Apache Pulsar 4.2.x standalone assembled from Maven Central jars.

Apache Pulsar 4.2.x publishes no ``pulsar-server-distribution`` tarball on Maven Central
(only 4.0.4, 4.0.6 and 4.0.8 are there), but its jars are: ``pulsar-broker`` 4.2.4 (the
only 4.2.x broker jar there; ``pulsar-bom`` also lists 4.2.0, 4.2.2 and 4.2.5).
:func:`ensure_assembled` builds a ``lib/`` directory like the distribution's with Maven
(``dependency:copy-dependencies``) from a generated pom (:data:`POM_TEMPLATE`) whose
``<dependencyManagement>`` *imports* ``org.apache.pulsar:pulsar:<version>``, Pulsar's
parent pom: that is where the build pins every third-party version (OpenTelemetry,
Netty, Jetty, BookKeeper, ZooKeeper, ...). ``pulsar-bom`` alone is not enough: it only
manages Pulsar's own artifacts. Without the import Maven's "nearest wins" mediation
picks whatever version the dependency tree happens to reach first (the OpenTelemetry
mismatch that makes a plain resolution of ``pulsar-broker`` fail at start).

The result is cached in ``$PULSAR_SPARK_CACHE`` or ``~/.cache/pulsar-spark``
(``pulsar-<version>-maven/lib``), built once under a file lock; Maven's own local
repository for it is ``<cache>/maven-repo`` (``$PULSAR_SPARK_MAVEN_REPO`` overrides).

Run ``python -m tests.support.pulsar42 [version]`` from the project root: assembles,
starts a standalone (broker + ZooKeeper + bookie, no functions worker, no stream storage)
with ``tests/apache/standalone.conf`` on free ports, checks ``GET /admin/v2/clusters``
and the binary port, produces and consumes one message with the official Python client,
stops it, and prints timings.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .apache import ApachePulsar
from .apache_dist import MAVEN_CENTRAL, DistributionError, cache_dir

__all__ = ["DEFAULT_VERSION", "POM_TEMPLATE", "ApachePulsar42", "ensure_assembled"]

DEFAULT_VERSION = "4.2.4"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

#: The generated project. ``{version}`` is the Pulsar release; ``{repo}`` Maven Central
#: or ``$PULSAR_SPARK_MAVEN_URL``. Importing ``org.apache.pulsar:pulsar`` (type pom,
#: scope import) applies the parent's whole ``<dependencyManagement>`` to the transitive
#: tree, as Pulsar's own build (``distribution/server``) does by inheritance.
POM_TEMPLATE = """\
<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0"
         xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
         xsi:schemaLocation="http://maven.apache.org/POM/4.0.0 http://maven.apache.org/maven-v4_0_0.xsd">
  <modelVersion>4.0.0</modelVersion>
  <groupId>pulsar-spark.tests</groupId>
  <artifactId>pulsar-standalone-assembly</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>

  <repositories>
    <repository>
      <id>central</id>
      <url>{repo}</url>
    </repository>
  </repositories>
  <pluginRepositories>
    <pluginRepository>
      <id>central</id>
      <url>{repo}</url>
    </pluginRepository>
  </pluginRepositories>

  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.pulsar</groupId>
        <artifactId>pulsar</artifactId>
        <version>{version}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
      <dependency>
        <groupId>org.apache.pulsar</groupId>
        <artifactId>pulsar-bom</artifactId>
        <version>{version}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>

  <dependencies>
    <!-- PulsarStandaloneStarter, the broker; brings managed-ledger, pulsar-metadata,
         bookkeeper-server, zookeeper, pulsar-functions-worker (standalone's classes
         refer to it even with the worker off). -->
    <dependency>
      <groupId>org.apache.pulsar</groupId>
      <artifactId>pulsar-broker</artifactId>
    </dependency>
    <!-- Logging, as the distribution ships it: log4j2 behind SLF4J 2, YAML config. -->
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-core</artifactId>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j2-impl</artifactId>
    </dependency>
    <dependency>
      <groupId>com.fasterxml.jackson.dataformat</groupId>
      <artifactId>jackson-dataformat-yaml</artifactId>
    </dependency>
  </dependencies>
</project>
"""


def _maven_repo() -> Path:
    env = os.environ.get("PULSAR_SPARK_MAVEN_REPO")
    return Path(env).expanduser() if env else cache_dir() / "maven-repo"


def _mvn() -> str:
    exe = shutil.which("mvn")
    if not exe:
        msg = "assembling Pulsar from Maven Central needs Maven (mvn) on the PATH"
        raise DistributionError(msg)
    return exe


def render_pom(version: str) -> str:
    repo = os.environ.get("PULSAR_SPARK_MAVEN_URL", MAVEN_CENTRAL).rstrip("/")
    return POM_TEMPLATE.format(version=version, repo=repo)


def ensure_assembled(version: str = DEFAULT_VERSION) -> Path:
    """``<cache>/pulsar-<version>-maven`` with ``lib/`` (every runtime jar), built once.

    Safe against concurrent processes (a lock file in the cache) and interrupted runs
    (assembled in a staging directory, renamed into place, completion marker last).

    Raises:
        DistributionError: Maven is missing or failed (with the tail of its output).
    """
    cache = cache_dir()
    home = cache / f"pulsar-{version}-maven"
    marker = home / ".pulsar-spark-complete"
    if marker.exists():
        return home
    with (cache / ".lock-maven").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return home
        staging = cache / f".assemble-{version}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        pom = render_pom(version)
        (staging / "pom.xml").write_text(pom, "utf-8")
        command = [
            _mvn(), "-B", "-q", "-C",  # -C: fail on a checksum mismatch
            "-f", str(staging / "pom.xml"),
            f"-Dmaven.repo.local={_maven_repo()}",
            f"{DEPENDENCY_PLUGIN}:copy-dependencies",
            f"-DoutputDirectory={staging / 'lib'}",
            "-DincludeScope=runtime",
            "-Dmdep.prependGroupId=true",
        ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=1800, check=False, cwd=staging
        )
        if done.returncode != 0 or not (staging / "lib").is_dir():
            out = (done.stdout + done.stderr)[-4000:]
            shutil.rmtree(staging, ignore_errors=True)
            msg = f"Maven could not assemble Pulsar {version} (exit {done.returncode}):\n{out}"
            raise DistributionError(msg)
        shutil.rmtree(home, ignore_errors=True)
        staging.replace(home)
        marker.write_text(
            f"org.apache.pulsar:pulsar-broker:{version} (managed by org.apache.pulsar:pulsar:"
            f"{version}), assembled by:\n{' '.join(command)}\n"
        )
    return home


class ApachePulsar42(ApachePulsar):
    """:class:`ApachePulsar` (same command line, config and readiness) on the jars of
    :func:`ensure_assembled` instead of the 4.0.8 distribution."""

    def __init__(self, root: Path, *, version: str = DEFAULT_VERSION, **kwargs: object) -> None:
        super().__init__(root, **kwargs)  # type: ignore[arg-type]
        self.version = version
        self.header_label = f" (Apache Pulsar {version}, Maven-assembled)"

    def _before_start(self) -> None:
        self.home = ensure_assembled(self.version)


def _dir_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.iterdir() if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main(argv: list[str]) -> int:
    import json
    import tempfile
    import urllib.request

    import pulsar  # the official client, in the project's .venv

    from .net import handshake

    version = argv[1] if len(argv) > 1 else DEFAULT_VERSION
    home = cache_dir() / f"pulsar-{version}-maven"
    cached = (home / ".pulsar-spark-complete").exists()
    t0 = time.monotonic()
    home = ensure_assembled(version)
    assemble = time.monotonic() - t0
    count, size = _dir_size(home / "lib")
    print(
        f"assembled {home} in {assemble:.1f} s ({'cached' if cached else 'first time'}); "
        f"lib/: {count} jars, {size / 2**20:.0f} MiB",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="pulsar42-") as tmp:
        broker = ApachePulsar42(Path(tmp), version=version, name=f"pulsar-{version}")
        try:
            try:
                ready = broker.start()
            except Exception as exc:
                print(f"start failed: {exc}", flush=True)
                print(broker.log_tail(200) if broker.log_path.exists() else "", flush=True)
                return 1
            print(f"ready after {ready:.1f} s: {broker.service_url} {broker.http_url}")
            print(f"command: {' '.join(broker._command(False))}")
            with urllib.request.urlopen(f"{broker.http_url}/admin/v2/clusters", timeout=5) as r:
                print(f"GET /admin/v2/clusters -> {r.status} {json.loads(r.read())}")
            reply = handshake(broker.host, broker.port, timeout=5)
            print(
                f"binary port CONNECT -> {type(reply).__name__}: "
                f"{getattr(reply, 'server_version', '?')}"
            )
            print(f"RSS after ready: {broker.rss_bytes() / 2**20:.0f} MiB")
            topic = "persistent://public/default/pulsar42-roundtrip"
            t1 = time.monotonic()
            client = pulsar.Client(broker.service_url, operation_timeout_seconds=30)
            try:
                consumer = client.subscribe(topic, "sub")
                producer = client.create_producer(topic)
                msg_id = producer.send(b"hello from 4.2")
                msg = consumer.receive(timeout_millis=30000)
                consumer.acknowledge(msg)
                assert msg.data() == b"hello from 4.2", msg.data()
            finally:
                client.close()
            print(f"round trip ok ({msg_id}) in {time.monotonic() - t1:.2f} s")
            print(f"RSS after round trip: {broker.rss_bytes() / 2**20:.0f} MiB")
            t2 = time.monotonic()
            code = broker.stop()
            print(f"stopped in {time.monotonic() - t2:.1f} s (exit {code})")
            errors = [
                line for line in broker.log_text().splitlines()
                if " ERROR " in line or "Exception" in line
            ]  # fmt: skip
            print(f"log: {len(errors)} ERROR/Exception lines")
            for line in errors[:20]:
                print("   ", line[:300])
        finally:
            if broker.running:
                broker.kill()
            keep = os.environ.get("PULSAR42_KEEP_LOG")
            if keep and broker.log_path.exists():
                shutil.copy(broker.log_path, keep)
            broker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
