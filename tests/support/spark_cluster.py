"""A Spark standalone cluster on this machine whose two workers are two hosts to Spark.

Spark never runs a speculative copy of a task on a host where an attempt of it already
runs, and every executor of ``local-cluster[...]`` sits on one host: real speculation
needs executors on two hosts. :class:`StandaloneCluster` starts the master of pyspark's
own distribution (``bin/spark-class``) on ``127.0.0.1`` and one worker on each of
``127.0.0.1`` and ``127.0.0.2`` (both loopback addresses on Linux), one core each. Their
executors report those addresses as their hosts, so the scheduler sees two.

Daemons run in process groups of their own (killed as groups on exit: executors and their
Python workers with them), log to files in the cluster's directory, bind every port on
loopback (the master's REST server off, web UIs on ephemeral ports), and the cluster is
ready once the master has registered both workers.

:func:`local_cluster_session` starts the ``local-cluster[2,1,1024]`` session of a driver
subprocess, and :func:`executor_of` tells which executor JVM a Python worker belongs to.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .net import free_port

__all__ = ["HOSTS", "StandaloneCluster", "executor_of", "local_cluster_session"]

#: The workers' hosts: two names the scheduler tells apart, both on this machine.
HOSTS = ("127.0.0.1", "127.0.0.2")

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"
_DAEMON_OPTS = "-Dspark.master.rest.enabled=false -XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    """A master and one single-core worker per host of :data:`HOSTS`, under ``root``."""

    def __init__(self, root: Path, *, worker_memory: str = "1g") -> None:
        self.root = root
        self.worker_memory = worker_memory
        self.port = free_port()
        self.url = f"spark://{HOSTS[0]}:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []

    def _daemon(self, name: str, args: list[str], host: str) -> None:
        home = _spark_home()
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_NO_DAEMONIZE": "1",
            "SPARK_LOCAL_HOSTNAME": host,
            "SPARK_LOCAL_IP": host,
            "SPARK_DAEMON_JAVA_OPTS": _DAEMON_OPTS,
            "SPARK_DAEMON_MEMORY": "256m",
            "PYSPARK_PYTHON": sys.executable,
        }
        with (self.root / f"{name}.log").open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [str(home / "bin" / "spark-class"), *args],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def start(self, timeout: float = 90.0) -> StandaloneCluster:
        self.root.mkdir(parents=True, exist_ok=True)
        web = ["--webui-port", "0"]
        self._daemon("master", [_MASTER, "--host", HOSTS[0], "--port", str(self.port), *web],
                     HOSTS[0])  # fmt: skip
        for n, host in enumerate(HOSTS):
            work = self.root / f"worker-{n}"
            args = [_WORKER, "--host", host, "--cores", "1", "--memory", self.worker_memory]
            self._daemon(f"worker-{n}", [*args, *web, "--work-dir", str(work), self.url], host)
        deadline = time.monotonic() + timeout
        while self.registered() < len(HOSTS):
            dead = [p.args for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                why = f"ended: {dead}" if dead else f"not ready within {timeout:g} s"
                msg = f"Spark standalone cluster {why}\n{self.tail('master')}"
                raise RuntimeError(msg)
            time.sleep(0.2)
        return self

    def registered(self) -> int:
        """How many workers the master has registered."""
        log = self.root / "master.log"
        if not log.exists():
            return 0
        return log.read_text(errors="replace").count("Registering worker")

    def tail(self, name: str, chars: int = 4000) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else ""

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def executor_of(pid: int) -> int:
    """The executor JVM above a Python worker (pyspark's daemon forks the workers); the
    pid itself when none is found."""
    for _ in range(4):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return pid
        if b"CoarseGrainedExecutorBackend" in cmdline:
            return pid
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pid


def local_cluster_session(app_name: str, **config: str) -> tuple[Any, int]:
    """A ``local-cluster[2,1,1024]`` SparkSession (two executor JVMs, each with Python
    workers of ``sys.executable`` and this ``PYTHONPATH``) with the pulsar format registered,
    and the executors registered within 120 s. ``config``: more settings."""
    from pyspark.sql import SparkSession

    from pulsar_spark import PulsarDataSource

    from .spark import TEST_JVM_OPTIONS

    builder = (
        SparkSession.builder.master("local-cluster[2,1,1024]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS)
        .config("spark.executor.extraJavaOptions", TEST_JVM_OPTIONS)
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.executorEnv.PYTHONPATH", os.environ["PYTHONPATH"])
    )
    for key, value in config.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    spark.dataSource.register(PulsarDataSource)
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    deadline = time.time() + 120
    while status.size() < 3 and time.time() < deadline:  # the driver and two executors
        time.sleep(0.5)
        status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus()
    return spark, status.size() - 1
