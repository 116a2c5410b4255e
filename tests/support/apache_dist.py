"""The Apache Pulsar distribution for test brokers: download, cache, Java, JVM flags, config.

``org.apache.pulsar:pulsar-server-distribution:4.0.8:tar.gz:bin`` (the official binary
tarball, ~245 MB) is downloaded by the first fixture that needs it, its SHA-1 checked
against the ``.sha1`` Maven Central publishes next to it (and against the value pinned
here), and extracted once into the cache directory: ``$PULSAR_SPARK_CACHE`` or
``~/.cache/pulsar-spark``. Later runs reuse it. Nothing downloaded lives in the repository.
``$PULSAR_SPARK_MAVEN_URL`` replaces ``https://repo1.maven.org/maven2`` (a mirror).

The other Pulsar lines the conformance set (``tests/lines``) runs on are in :data:`LINES`:
2.10.1 and 3.3.6 from their official tarballs the same way (SHA-1s pinned in
:data:`DIST_SHA1S`; 350 and 217 MB), 4.2.4 assembled from Maven Central jars
(:mod:`tests.support.pulsar42`: no 4.2 tarball is published there). :func:`line_home`
gives a line's ``lib/`` holder. All four run with the same command, flags and
``standalone.conf`` (``bin/pulsar`` is not used, so neither its ``--config`` nor its GC log
under the distribution's ``logs/`` apply).

The broker runs on the distribution's ``lib/*`` with Java 17+ (:func:`java`) and the
flags :data:`JVM_MEMORY` and :data:`JVM_FLAGS`; its configuration is
``tests/apache/standalone.conf`` rendered per instance (:func:`render_config`), with
``tests/apache/log4j2.yaml``. The broker process itself is
:class:`tests.support.apache.ApachePulsar`.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "ASSEMBLED_LINES",
    "CONFIG_DIR",
    "DEFAULT_LINE",
    "DIST_SHA1",
    "DIST_SHA1S",
    "JVM_FLAGS",
    "JVM_MEMORY",
    "LINES",
    "PULSAR_VERSION",
    "DistributionError",
    "cache_dir",
    "dist_url",
    "ensure_distribution",
    "java",
    "line_home",
    "render_config",
]

#: The pinned Apache Pulsar release: the newest 4.0.x (LTS) with a binary distribution on
#: Maven Central when this was written (4.0.5 and 4.0.7 have none there).
PULSAR_VERSION = "4.0.8"
#: SHA-1 of ``pulsar-server-distribution-4.0.8-bin.tar.gz`` as Maven Central publishes it.
DIST_SHA1 = "c1778d3c31fa53616190d644bb69616f9a3ae2fc"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"

#: The Pulsar lines users run, each as the release the tests run it on. 2.10 and 3.3: the
#: newest of each line with a binary distribution on Maven Central (the only ones of their
#: lines there: 2.10.1; 3.3.5 and 3.3.6); 4.2: the only 4.2 broker jar there.
LINES: dict[str, str] = {"2.10": "2.10.1", "3.3": "3.3.6", "4.0": PULSAR_VERSION, "4.2": "4.2.4"}
#: The line every test but the conformance set runs on.
DEFAULT_LINE = "4.0"
#: Lines with no distribution tarball on Maven Central: assembled from its jars instead.
ASSEMBLED_LINES = frozenset({"4.2"})
#: SHA-1 of each pinned ``pulsar-server-distribution-<version>-bin.tar.gz``, as Maven
#: Central publishes it (checked again on every download).
DIST_SHA1S: dict[str, str] = {
    "2.10.1": "70fe1374b9ccdd094ff0e796f76d81ad716443e1",
    "3.3.6": "af6245792874f3bb12fc7ae2a8b070dce9e53c37",
    PULSAR_VERSION: DIST_SHA1,
}

#: ``standalone.conf`` and ``log4j2.yaml``, rendered or used per instance.
CONFIG_DIR = Path(__file__).resolve().parents[1] / "apache"

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


class DistributionError(RuntimeError):
    """The Pulsar distribution could not be downloaded, verified or extracted."""


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
        pinned = DIST_SHA1S.get(version)
        if pinned is not None and expected != pinned:
            msg = (
                f"{url}.sha1 says {expected}, but tests/support/apache_dist.py pins {pinned} "
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


def line_home(line: str = DEFAULT_LINE) -> Path:
    """The directory whose ``lib/`` holds the jars of Pulsar ``line`` (a key of
    :data:`LINES`): the extracted distribution, or the Maven-assembled one for 4.2.

    Raises:
        ValueError: not a line of :data:`LINES`.
        DistributionError: as :func:`ensure_distribution` or the assembly.
    """
    if line not in LINES:
        msg = f"line must be one of {tuple(LINES)}, not {line!r}"
        raise ValueError(msg)
    if line in ASSEMBLED_LINES:
        from .pulsar42 import ensure_assembled  # it imports tests.support.apache

        return ensure_assembled(LINES[line])
    return ensure_distribution(LINES[line])


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
        out += ["", "# --- set by tests/support/apache.py for this instance ---"]
        out += [f"{k}={settings[k]}" for k in extra]
    return "\n".join(out) + "\n"


#: The value half of the KEY_VALUE messages :func:`java_produce_key_value` writes.
KV_VALUE = '{"type":"record","name":"V","fields":[{"name":"n","type":"int"}]}'


def java_produce_key_value(service_url: str, topic: str, encoding: str) -> None:
    """One KEY_VALUE<STRING, AVRO> message (key ``the-key``, value ``{"n": 5}``) written by
    the distribution's Java ``bin/pulsar-client``, encoded ``inline`` or ``separated``."""
    command = [
        str(ensure_distribution() / "bin" / "pulsar-client"),
        "--url", service_url,
        "produce", topic,
        "-ks", "string",
        "-vs", f"avro:{KV_VALUE}",
        "-kvet", encoding,
        "-kvk", "the-key",
        "-m", '{"n": 5}',
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    assert "1 messages successfully produced" in done.stdout + done.stderr, done.stderr[-2000:]
