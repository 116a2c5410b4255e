"""StreamNative's pulsar-spark against this project: batch read and write, one broker.

    python bench/streamnative/run.py [--messages 1000000] [--size 100] [--runs 3]
                                     [--write-partitions 2] [--out bench/results/streamnative.json]
    bash bench/streamnative/run.sh [same options]

One command prepares what is missing (each step is skipped once done), then measures:

1. StreamNative's connector ``pulsar-spark-connector_2.13`` 3.4.1.3 (Spark 3.4.1, Scala
   2.13): ``$SN_CONNECTOR_JAR`` if set; otherwise cloned from ``$SN_GIT`` (default
   https://github.com/streamnative/pulsar-spark; a local clone or bare mirror also works)
   at tag ``release-3.4.1.3`` and built with Maven (tests, scalastyle, licence checks and
   docs skipped; log in ``CACHE/sn-build.log``).
2. A Spark 3.4.1 / Scala 2.13 venv for it: PyPI's ``pyspark==3.4.1`` carries Scala 2.12
   jars, so its ``jars/`` folder is replaced by Spark 3.4.1's Scala 2.13 runtime jars,
   resolved from Maven Central with ``spark-parent_2.13:3.4.1`` as the version list, Scala
   2.13.12 (the connector's) and jackson-annotations 2.17.2 (the Pulsar client 4.0.5 inside
   the connector needs >= 2.15; Spark 3.4.1 ships 2.14.2). ``$SN_PYTHON`` names an existing
   one instead.
3. The project's venv: ``$OURS_PYTHON``, else the repository's ``.venv`` if it imports
   pyspark, pulsar (the official client) and pulsar_spark, else ``CACHE/venv-ours`` with
   the project installed editable.
4. ``measure.py`` in the project's venv: Apache Pulsar 4.0 standalone (the test suite's
   launcher and cached distribution), N messages, both drivers, the JSON result.

``CACHE`` is ``$PULSAR_SPARK_BENCH_CACHE`` or ``~/.cache/pulsar-spark-bench``. Needs
Java 17, Maven, git and network access to PyPI and Maven Central the first time.
Standard library only: any Python 3.10+ runs this file.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TAG = "release-3.4.1.3"
JAR_NAME = "pulsar-spark-connector_2.13-3.4.1.3.jar"
SN_REPO = "https://github.com/streamnative/pulsar-spark"
SPARK_VERSION = "3.4.1"

# The runtime jars of Spark 3.4.1 for Scala 2.13, as Maven resolves them.
SPARK_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.bench</groupId>
  <artifactId>spark-341-scala-213</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.spark</groupId><artifactId>spark-parent_2.13</artifactId>
        <version>3.4.1</version><type>pom</type><scope>import</scope>
      </dependency>
      <dependency>
        <groupId>com.fasterxml.jackson.core</groupId><artifactId>jackson-annotations</artifactId>
        <version>2.17.2</version>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>org.apache.spark</groupId><artifactId>spark-sql_2.13</artifactId>
      <version>3.4.1</version>
    </dependency>
    <dependency>
      <groupId>org.scala-lang</groupId><artifactId>scala-library</artifactId>
      <version>2.13.12</version>
    </dependency>
    <dependency>
      <groupId>org.scala-lang</groupId><artifactId>scala-reflect</artifactId>
      <version>2.13.12</version>
    </dependency>
    <dependency>
      <groupId>com.fasterxml.jackson.core</groupId><artifactId>jackson-annotations</artifactId>
    </dependency>
  </dependencies>
</project>
"""


def say(text: str) -> None:
    print(f"[prepare] {text}", flush=True)


def run(cmd: list[str], log: Path | None = None, cwd: Path | None = None) -> None:
    if log is None:
        subprocess.run(cmd, check=True, cwd=cwd)
        return
    with log.open("ab") as out:
        done = subprocess.run(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_text(errors="replace").splitlines()[-40:]
        sys.exit(f"{' '.join(cmd[:3])} failed ({done.returncode}); log {log}:\n" + "\n".join(tail))


def connector_jar(cache: Path) -> Path:
    given = os.environ.get("SN_CONNECTOR_JAR")
    if given:
        say(f"connector: {given} (SN_CONNECTOR_JAR)")
        return Path(given)
    jar = cache / "connector" / JAR_NAME
    if jar.is_file():
        say(f"connector: {jar}")
        return jar
    source = os.environ.get("SN_GIT", SN_REPO)
    src = cache / "sn-src"
    log = cache / "sn-build.log"
    log.write_text("")
    shutil.rmtree(src, ignore_errors=True)
    say(f"connector: cloning {source} at {TAG} into {src}")
    run(["git", "clone", "--quiet", "--depth", "1", "--branch", TAG, source, str(src)], log)
    say(f"connector: building with Maven (a few minutes; log {log})")
    run(
        [
            "mvn", "-B", "package", "-DskipTests", "-Dmaven.test.skip=true",
            "-Dscalastyle.skip=true", "-Dlicense.skip=true", "-Dmaven.javadoc.skip=true",
            "-Dmaven.source.skip=true",
        ],
        log,
        cwd=src,
    )  # fmt: skip
    jar.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src / "target" / JAR_NAME, jar)  # the shaded jar
    say(f"connector: built {jar}")
    return jar


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def streamnative_python(cache: Path) -> Path:
    given = os.environ.get("SN_PYTHON")
    if given:
        say(f"Spark 3.4.1 venv: {given} (SN_PYTHON)")
        return Path(given)
    venv = cache / "venv-spark341-scala213"
    python = venv_python(venv)
    stamp = venv / "scala-2.13-jars"
    if stamp.is_file():
        say(f"Spark 3.4.1 venv: {venv}")
        return python
    log = cache / "spark-venv.log"
    log.write_text("")
    say(f"Spark 3.4.1 venv: creating {venv} (pyspark=={SPARK_VERSION})")
    shutil.rmtree(venv, ignore_errors=True)
    run([sys.executable, "-m", "venv", str(venv)], log)
    run([str(python), "-m", "pip", "install", "-q", f"pyspark=={SPARK_VERSION}"], log)
    jars_dir = cache / "spark-341-scala213"
    shutil.rmtree(jars_dir, ignore_errors=True)
    jars_dir.mkdir(parents=True)
    (jars_dir / "pom.xml").write_text(SPARK_POM)
    say("Spark 3.4.1 venv: resolving the Scala 2.13 jars from Maven Central")
    run(
        [
            "mvn", "-B", "-q", "dependency:copy-dependencies", "-DincludeScope=runtime",
            f"-DoutputDirectory={jars_dir / 'jars'}",
        ],
        log,
        cwd=jars_dir,
    )  # fmt: skip
    found = subprocess.run(
        [str(python), "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    bundled = Path(found) / "jars"
    shutil.rmtree(bundled)
    shutil.copytree(jars_dir / "jars", bundled)
    names = sorted(p.name for p in bundled.iterdir())
    stamp.write_text("\n".join(names) + "\n")
    say(f"Spark 3.4.1 venv: {len(names)} Scala 2.13 jars in {bundled}")
    return python


def ours_python(cache: Path) -> Path:
    given = os.environ.get("OURS_PYTHON")
    if given:
        say(f"project venv: {given} (OURS_PYTHON)")
        return Path(given)
    check = ["-c", "import pyspark, pulsar, pulsar_spark"]
    for candidate in (ROOT / ".venv", cache / "venv-ours"):
        python = venv_python(candidate)
        if python.is_file() and subprocess.run([str(python), *check]).returncode == 0:
            say(f"project venv: {candidate}")
            return python
    venv = cache / "venv-ours"
    log = cache / "ours-venv.log"
    log.write_text("")
    say(f"project venv: creating {venv} (the project editable, pyspark 4, pulsar-client)")
    run([sys.executable, "-m", "venv", str(venv)], log)
    python = venv_python(venv)
    run([str(python), "-m", "pip", "install", "-q", "-e", f"{ROOT}[spark]", "pulsar-client"], log)
    return python


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=int(os.environ.get("N", 1_000_000)))
    parser.add_argument("--size", type=int, default=int(os.environ.get("SIZE", 100)))
    parser.add_argument("--runs", type=int, default=int(os.environ.get("RUNS", 3)))
    parser.add_argument("--write-partitions", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "streamnative.json"))
    parser.add_argument("--prepare-only", action="store_true")
    args = parser.parse_args()
    if args.size < 10:
        parser.error("--size must be at least 10 (a 10-digit serial leads each payload)")
    cache = Path(
        os.environ.get("PULSAR_SPARK_BENCH_CACHE", Path.home() / ".cache" / "pulsar-spark-bench")
    )
    cache.mkdir(parents=True, exist_ok=True)
    jar = connector_jar(cache)
    sn_python = streamnative_python(cache)
    our_python = ours_python(cache)
    if args.prepare_only:
        return 0
    command = [
        str(our_python), str(HERE / "measure.py"),
        "--messages", str(args.messages), "--size", str(args.size), "--runs", str(args.runs),
        "--write-partitions", str(args.write_partitions), "--out", args.out,
        "--jar", str(jar), "--sn-python", str(sn_python), "--logs", str(cache / "runs"),
    ]  # fmt: skip
    os.environ.setdefault(
        "BENCH_COMMAND", shlex.join(["python", "bench/streamnative/run.py", *sys.argv[1:]])
    )
    return subprocess.run(command, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
