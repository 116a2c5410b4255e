"""pulsar-lite as a test broker: one process on a free loopback port, its config checked.

:class:`PulsarLite` runs the ``pulsar-lite`` binary (the ``pulsar-lite`` package) with its
port, RocksDB data, TOML config and log in one directory; process handling is
:class:`tests.support.process.BrokerProcess`'s. The fixtures (``pulsar_lite``,
``pulsar_lite_partitioned``, ``fresh_pulsar_lite``) are in :mod:`tests.support.plugin`.

pulsar-lite 0.2.0 behaviours met while building this (beyond brokers.md's quirks 1-4):

- A config file it cannot parse (bad TOML, a wrong type) is ignored without a word: it runs
  on defaults, metrics on 0.0.0.0:8080 included. Unknown keys are ignored too. Hence the
  key check in :class:`PulsarLite` and the comparison with the settings it logs.
- ``--db-path DIR`` stores its data in ``DIR.rocksdb``. An occupied port or a locked
  database ends the process with status 1 and ``Error: ...`` on stderr. SIGTERM kills it at
  once (status -15, no shutdown log); acknowledged data survived SIGTERM and SIGKILL in
  every try.
- It has no advertised-address setting (``--addr`` is both the bind address and the one
  LOOKUP answers with): see :class:`tests.support.fault_proxy.FaultProxy`.
- Reading with the official client: see :mod:`tests.support.official`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pulsar_spark.protocol import pb

from .net import free_port, handshake
from .process import BrokerProcess, BrokerStartError

__all__ = [
    "PULSAR_LITE_CONFIG_KEYS",
    "START_TIMEOUT",
    "PulsarLite",
    "pulsar_handshake",
]

#: Default deadline for a broker to answer CONNECT with CONNECTED.
START_TIMEOUT = 20.0
#: Default grace period between SIGTERM and SIGKILL.
STOP_TIMEOUT = 10.0
#: Lines of broker log put into errors and failed-test reports.
TAIL_LINES = 80

#: pulsar-lite 0.2.0's top-level config keys (read from the binary) and their TOML types.
#: The binary silently ignores unknown keys, so :class:`PulsarLite` rejects them itself.
PULSAR_LITE_CONFIG_KEYS: dict[str, type] = {
    "cluster": str,
    "default_partitions": int,
    "keep_alive_interval_secs": int,
    "handshake_timeout_secs": int,
    "connection_liveness_check_timeout_secs": int,
    "max_connections": int,
    "max_connections_per_ip": int,
    "max_concurrent_non_persistent_messages_per_connection": int,
    "max_pending_publish_requests_per_connection": int,
    "max_pending_publish_bytes_per_connection": int,
    "max_message_size_bytes": int,
    "publish_rate_messages_per_sec": int,
    "publish_rate_bytes_per_sec": int,
    "pulsar_channel_write_buffer_high_water_mark_bytes": int,
    "pulsar_channel_write_buffer_low_water_mark_bytes": int,
}

#: Where pulsar-lite's startup log (level info) echoes the settings it runs with. A config
#: file it cannot parse is ignored without a word and the defaults apply, so after each
#: start these are compared with what was asked for.
_ECHOED: dict[str, re.Pattern[str]] = {
    "default_partitions": re.compile(r"Default partitions: (\d+)"),
    "keep_alive_interval_secs": re.compile(r"Keep-alive interval: (\d+)s"),
    "handshake_timeout_secs": re.compile(r"handshake timeout: (\d+)s"),
    "connection_liveness_check_timeout_secs": re.compile(r"liveness timeout: (\d+)s"),
    "max_connections": re.compile(r"\bmax_connections=(\d+)"),
    "max_connections_per_ip": re.compile(r"\bmax_connections_per_ip=(\d+)"),
    "max_concurrent_non_persistent_messages_per_connection": re.compile(
        r"\bmax_concurrent_per_connection=(\d+)"
    ),
    "max_pending_publish_requests_per_connection": re.compile(r"\bmax_pending_publish=(\d+)"),
    "max_message_size_bytes": re.compile(r"\bmax_message_size=(\d+)B"),
    "publish_rate_messages_per_sec": re.compile(r"\bmessages_per_sec=(\d+)"),
    "publish_rate_bytes_per_sec": re.compile(r"\bbytes_per_sec=(\d+)"),
}
_METRICS_LINE = "Metrics endpoint listening"
_LOG_LEVELS = ("info", "debug", "trace")  # the config check needs the info lines


def _binary() -> Path:
    from pulsar_lite.binary_finder import find_pulsar_lite_binary

    return Path(find_pulsar_lite_binary())


def pulsar_handshake(host: str, port: int, timeout: float = 2.0) -> pb.CommandConnected | None:
    """Open a connection, send CONNECT, return the CONNECTED reply (``None`` on anything else)."""
    reply = handshake(host, port, timeout=timeout, client_version="readiness")
    return reply if isinstance(reply, pb.CommandConnected) else None


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    msg = f"cannot write {value!r} as TOML"
    raise TypeError(msg)


class PulsarLite(BrokerProcess):
    """One pulsar-lite broker process, with its port, data, config and log in ``root``.

    ``root`` holds ``pulsar-lite.toml``, ``broker.log`` (stdout and stderr of every start,
    appended, each start headed by a ``=== fixture: start #N ===`` line) and the RocksDB
    data (``data.rocksdb``: pulsar-lite appends ``.rocksdb`` to ``--db-path``). The port is
    picked at the first start and kept, so :meth:`restart` comes back on the same address
    with the same data. Process handling (start loop, stop, kill, restart, log, RSS) is
    :class:`tests.support.process.BrokerProcess`'s.

    Args:
        root: the instance's directory (created if needed).
        name: for reports.
        port: a fixed port; by default a free one below the ephemeral range.
        metrics: enable the metrics endpoint (it binds 0.0.0.0:8080, shared by all
            instances: leave it off).
        log_level: ``info``, ``debug`` or ``trace``.
        extra_toml: raw TOML appended to the top-level section (to test bad configs).
        start_timeout: default readiness deadline for :meth:`start`, seconds.
        shared: a session instance; :meth:`stop`, :meth:`kill` and :meth:`restart` raise.
        **config: top-level config keys, see :data:`PULSAR_LITE_CONFIG_KEYS`;
            ``default_partitions`` defaults to 0.
    """

    kind = "lite"
    report_label = "pulsar-lite"
    tail_lines = TAIL_LINES
    stop_timeout = STOP_TIMEOUT
    probe_interval = 0.005
    fresh_fixture = "fresh_pulsar_lite"
    process_label = "pulsar-lite"

    def __init__(
        self,
        root: Path,
        *,
        name: str = "pulsar-lite",
        port: int | None = None,
        metrics: bool = False,
        log_level: str = "info",
        extra_toml: str = "",
        start_timeout: float = START_TIMEOUT,
        shared: bool = False,
        **config: Any,
    ) -> None:
        for key, value in config.items():
            want = PULSAR_LITE_CONFIG_KEYS.get(key)
            if want is None:
                msg = f"unknown pulsar-lite config key {key!r} (the broker would ignore it)"
                raise TypeError(msg)
            if not isinstance(value, want) or isinstance(value, bool):
                msg = f"pulsar-lite config {key}={value!r}: expected {want.__name__}"
                raise TypeError(msg)
        if log_level not in _LOG_LEVELS:
            msg = f"log_level must be one of {_LOG_LEVELS} (the config check reads info lines)"
            raise ValueError(msg)
        super().__init__(root, name=name, shared=shared, start_timeout=start_timeout)
        self.config: dict[str, Any] = {"default_partitions": 0, **config}
        self.metrics = metrics
        self.log_level = log_level
        self.extra_toml = extra_toml
        self._port = port
        self._port_fixed = port is not None

    # -- paths and properties ---------------------------------------------

    @property
    def config_path(self) -> Path:
        return self.root / "pulsar-lite.toml"

    @property
    def db_path(self) -> Path:
        """The ``--db-path`` argument; the data itself is in ``data.rocksdb`` beside it."""
        return self.root / "data"

    @property
    def port(self) -> int:
        if self._port is None:
            msg = f"{self.name} has not been started yet"
            raise RuntimeError(msg)
        return self._port

    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.host}:{self.port}"

    @property
    def default_partitions(self) -> int:
        return int(self.config["default_partitions"])

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<PulsarLite {self.name} {self._port and self.service_url} {state}>"

    # -- config --------------------------------------------------------------

    def _toml(self) -> str:
        lines = [f"{k} = {_toml_value(v)}" for k, v in self.config.items()]
        if self.extra_toml:
            lines.append(self.extra_toml.rstrip("\n"))
        lines += ["", "[metrics]", f"enabled = {_toml_value(self.metrics)}", ""]
        return "\n".join(lines)

    def _check_effective_config(self, log: str) -> None:
        """Compare the settings the broker logged at startup with what was asked for."""
        wrong = []
        for key, pattern in _ECHOED.items():
            if key not in self.config:
                continue
            m = pattern.search(log)
            got = m.group(1) if m else "nothing"
            if got != str(self.config[key]):
                wrong.append(f"{key}: asked {self.config[key]}, log says {got}")
        metrics_on = _METRICS_LINE in log
        if metrics_on != self.metrics:
            asked = "enabled" if self.metrics else "disabled"
            got = "enabled (0.0.0.0:8080)" if metrics_on else "disabled"
            wrong.append(f"metrics: asked {asked}, log says {got}")
        if wrong:
            msg = (
                f"{self.name}: pulsar-lite did not apply {self.config_path} (it runs on "
                "defaults, silently, when it cannot parse its config file): " + "; ".join(wrong)
            )
            raise BrokerStartError(msg, self.log_tail())

    # -- lifecycle (the parts BrokerProcess asks for) ------------------------

    def start(self, timeout: float | None = None) -> float:
        """Start the broker and wait until it answers CONNECT; return the seconds it took.

        Ready means: the log of this start says ``Server listening on 127.0.0.1:PORT``,
        a Pulsar CONNECT gets CONNECTED back, the process is still alive and its logged
        settings match the config. Otherwise :class:`BrokerStartError` (with the log tail),
        after killing the process. Only the first start on a port picked here may move to
        another port (it lost a race for it); a restart comes back where it was.
        """
        return super().start(timeout)

    def _ports_movable(self) -> bool:
        return not self._port_fixed

    def _pick_ports(self, attempt: int) -> None:
        if self._port is None or attempt > 1:
            self._port = free_port()

    def _prepare(self, first: bool) -> None:
        self.config_path.write_text(self._toml(), "utf-8")

    def _command(self, first: bool) -> list[str]:
        return [
            str(_binary()),
            "--addr", self.address,
            "--db-path", str(self.db_path),
            "--config", str(self.config_path),
            "--log-level", self.log_level,
        ]  # fmt: skip

    def _probe(self, left: float) -> bool:
        # The log line guards against a stranger on the port answering for us.
        if f"Server listening on {self.address}" not in self.log_text(self._log_start):
            return False
        connected = pulsar_handshake(self.host, self.port, timeout=min(2.0, left))
        if connected is None:
            return False
        self.server_version = connected.server_version
        return True

    def _not_ready(self, timeout: float) -> str:
        return (
            f"{self.name}: pulsar-lite on {self.address} did not answer CONNECT "
            f"within {timeout:.1f} s"
        )

    def _after_ready(self, elapsed: float) -> None:
        self._check_effective_config(self.log_text(self._log_start))
