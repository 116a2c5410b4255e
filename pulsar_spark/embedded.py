"""The embedded broker: pulsar-lite (the ``lite`` extra) started on loopback by this process.

For trying the connector, examples and tests: pulsar-lite speaks Pulsar's binary protocol on
one port, keeps its data in a local directory and starts in milliseconds; it has no admin API,
schema registry, transactions, authentication or TLS. From Python::

    with EmbeddedBroker() as broker:          # a free port, data in a temporary directory
        spark.read.format("pulsar").option("service.url", broker.service_url)...

and from a shell, ``pulsar-spark-broker`` (``--port 6650``, ``--data-dir ./pulsar-data``),
which runs until interrupted.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from pulsar_spark.client import PulsarClient
from pulsar_spark.protocol import PulsarError

__all__ = ["EmbeddedBroker", "EmbeddedBrokerError", "main"]

log = logging.getLogger(__name__)

#: New topics non-partitioned; the metrics endpoint off (it would bind 0.0.0.0:8080).
_CONFIG = "default_partitions = 0\n\n[metrics]\nenabled = false\n"


class EmbeddedBrokerError(PulsarError):
    """The embedded broker is not installed, or did not start (the message has its log's end)."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _binary() -> str:
    try:
        from pulsar_lite.binary_finder import find_pulsar_lite_binary
    except ImportError:
        msg = (
            "the embedded broker is pulsar-lite, which is not installed: "
            "pip install 'pulsar-spark[lite]'"
        )
        raise EmbeddedBrokerError(msg) from None
    return str(find_pulsar_lite_binary())


class EmbeddedBroker:
    """pulsar-lite on ``127.0.0.1:port`` (``port=0``: a free one), its data in ``data_dir``
    (``None``: a temporary directory, deleted by :meth:`stop`)."""

    def __init__(
        self, port: int = 0, data_dir: str | Path | None = None, log_level: str = "warn"
    ) -> None:
        self.port = port or _free_port()
        self._keep_data = data_dir is not None
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.log_level = log_level
        self._root: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def service_url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the broker process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path | None:
        """The broker's log, while it runs."""
        return self._root / "broker.log" if self._root else None

    def start(self, timeout: float = 30.0) -> EmbeddedBroker:
        """Start the broker and wait until it answers a lookup.

        Raises:
            EmbeddedBrokerError: pulsar-lite is not installed, exited (an occupied port, a
                data directory another broker holds) or did not answer within ``timeout``.
        """
        if self._process is not None:
            return self
        binary = _binary()
        self._root = Path(tempfile.mkdtemp(prefix="pulsar-spark-broker-"))
        if self.data_dir is None:
            self.data_dir = self._root / "data"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        config = self._root / "pulsar-lite.toml"
        config.write_text(_CONFIG, "utf-8")
        command = [
            binary,
            "--addr", f"127.0.0.1:{self.port}",
            "--db-path", str(self.data_dir),
            "--config", str(config),
            "--log-level", self.log_level,
        ]  # fmt: skip
        with (self._root / "broker.log").open("wb") as out:
            self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        log.info("embedded broker up at %s (pid %d)", self.service_url, self._process.pid)
        return self

    def _wait_ready(self, timeout: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                msg = (
                    f"pulsar-lite on port {self.port} exited with status "
                    f"{self._process.returncode}: {self._log_tail()}"
                )
                raise EmbeddedBrokerError(msg)
            try:
                with PulsarClient(
                    self.service_url, connect_timeout=1, operation_timeout=2
                ) as client:
                    client.get_partitions("persistent://public/default/readiness-check")
                return
            except PulsarError as failure:
                if time.monotonic() > deadline:
                    msg = (
                        f"pulsar-lite on port {self.port} did not answer within {timeout:g} s "
                        f"({failure}): {self._log_tail()}"
                    )
                    raise EmbeddedBrokerError(msg) from failure
                time.sleep(0.05)

    def _log_tail(self, lines: int = 15) -> str:
        path = self.log_path
        if path is None or not path.exists():
            return "(no log)"
        text = path.read_text("utf-8", errors="replace").strip().splitlines()
        return "\n".join(text[-lines:]) or "(empty log)"

    def stop(self) -> None:
        """Stop the broker and delete its temporary files (the data too, unless ``data_dir``
        was given)."""
        process, self._process = self._process, None
        if process is not None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None
            if not self._keep_data:
                self.data_dir = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``pulsar-spark-broker``: run the embedded broker until interrupted."""
    parser = argparse.ArgumentParser(
        prog="pulsar-spark-broker",
        description="Run pulsar-lite, the embedded Pulsar broker, on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument("--port", type=int, default=6650, help="binary protocol port (6650)")
    parser.add_argument(
        "--data-dir",
        default="pulsar-data",
        help="where the messages are kept between runs (./pulsar-data, as pulsar-data.rocksdb)",
    )
    args = parser.parse_args(argv)
    try:
        broker = EmbeddedBroker(args.port, args.data_dir).start()
    except EmbeddedBrokerError as failure:
        print(f"pulsar-spark-broker: {failure}", file=sys.stderr)
        return 1
    stored = f"{broker.data_dir}.rocksdb"  # pulsar-lite's name for its database
    banner = f"Pulsar (pulsar-lite) at {broker.service_url}; data in {stored}; Ctrl-C stops"
    print(banner, flush=True)
    try:
        while broker.running:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
