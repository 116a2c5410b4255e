"""The embedded broker (``pulsar_spark.embedded``): pulsar-lite started and stopped by the
process, from Python and as ``pulsar-spark-broker``; messages kept in a data directory survive
a restart; a port already taken is a clear error naming it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_spark.embedded import EmbeddedBroker, EmbeddedBrokerError
from tests.support.quick_start import produce, read_values

TOPIC = "persistent://public/default/embedded"


def test_a_broker_in_a_with_block_serves_and_its_data_directory_outlives_it(
    tmp_path: Path,
) -> None:
    data = tmp_path / "pulsar-data"
    with EmbeddedBroker(data_dir=data) as broker:
        assert broker.running
        produce(broker.service_url, TOPIC, [b"one", b"two"])
        port = broker.port
    assert not broker.running
    with EmbeddedBroker(port, data_dir=data) as again:
        assert read_values(again.service_url, TOPIC) == [b"one", b"two"]


def test_a_temporary_broker_leaves_nothing_behind() -> None:
    with EmbeddedBroker() as broker:
        log = broker.log_path
        assert log is not None and log.exists()
    assert not log.parent.exists()


def test_a_taken_port_is_an_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EmbeddedBrokerError, match=f"pulsar-lite on port {port}"):
            EmbeddedBroker(port).start(timeout=10)


def test_the_command_runs_until_interrupted(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "pulsar_spark.embedded", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline()  # printed once the broker answers
        assert f"pulsar://127.0.0.1:{port}" in banner, banner + process.stderr.read()
        produce(f"pulsar://127.0.0.1:{port}", TOPIC, [b"cli"])
        assert read_values(f"pulsar://127.0.0.1:{port}", TOPIC) == [b"cli"]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(20) == 0
    assert (tmp_path / "pulsar-data.rocksdb").exists()
