"""The test infrastructure for real brokers works (tests/support/).

pulsar-lite starts, answers the readiness handshake, runs several instances at once, keeps
data across a restart and a crash; the official client round-trips messages with every
codec, batched or not; the partitioned instance partitions; the fault proxy forwards,
rewrites lookups, drops connections every K frames, drops on demand and pauses; a broker
that cannot start fails loudly with its log.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pulsar_spark.protocol import Frame, FrameDecoder, codec_by_name, encode_command, pb
from tests.support.fault_proxy import FaultProxy
from tests.support.lite import START_TIMEOUT, PulsarLite, pulsar_handshake
from tests.support.net import free_port
from tests.support.official import CODECS, produce, read_all, topic_partitions
from tests.support.plugin import BrokerFactory, ProxyFactory
from tests.support.process import BrokerStartError


def sample_messages(n: int = 100, prefix: str = "m") -> list[dict]:
    """Messages with every field the helpers carry: key, properties, event time."""
    return [
        {
            "value": f"{prefix}-{i:04d}-".encode() + bytes([i % 256]) * (i % 37),
            "key": f"key-{i % 7}",
            "properties": {"i": str(i), "parity": "even" if i % 2 == 0 else "odd"},
            "event_time": 1_700_000_000_000 + i,
        }
        for i in range(n)
    ]


def assert_same_messages(got: list[dict], sent: list[dict]) -> None:
    assert [m["value"] for m in got] == [m["value"] for m in sent]
    assert [m["key"] for m in got] == [m["key"] for m in sent]
    assert [m["properties"] for m in got] == [m["properties"] for m in sent]
    assert [m["event_time"] for m in got] == [m["event_time"] for m in sent]


# ---------------------------------------------------------------------------
# pulsar-lite processes
# ---------------------------------------------------------------------------


def test_pulsar_lite_starts_and_answers_connect(pulsar_lite: PulsarLite) -> None:
    assert pulsar_lite.running
    assert re.fullmatch(r"pulsar://127\.0\.0\.1:\d+", pulsar_lite.service_url)
    assert pulsar_lite.service_url == f"pulsar://127.0.0.1:{pulsar_lite.port}"
    assert pulsar_lite.cold_start_seconds is not None
    assert 0 < pulsar_lite.cold_start_seconds < START_TIMEOUT
    connected = pulsar_handshake("127.0.0.1", pulsar_lite.port)
    assert connected is not None
    assert connected.server_version == pulsar_lite.server_version
    assert connected.server_version.startswith("Pulsar-Lite")
    # The metrics endpoint stays off: the config was applied, 0.0.0.0:8080 left alone.
    assert "[metrics]\nenabled = false" in pulsar_lite.config_path.read_text()
    assert "Metrics endpoint listening" not in pulsar_lite.log_text()
    assert f"Server listening on 127.0.0.1:{pulsar_lite.port}" in pulsar_lite.log_text()
    assert pulsar_lite.rss_bytes() > 1024 * 1024


def test_readiness_handshake_fails_on_a_port_without_broker() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()  # accepts, never answers
        assert pulsar_handshake("127.0.0.1", s.getsockname()[1], timeout=0.3) is None
    assert pulsar_handshake("127.0.0.1", free_port(), timeout=0.3) is None


def test_several_instances_run_at_once(
    pulsar_lite: PulsarLite, fresh_pulsar_lite: BrokerFactory, topic_name: str
) -> None:
    a = fresh_pulsar_lite()
    b = fresh_pulsar_lite(keep_alive_interval_secs=7)
    brokers = [pulsar_lite, a, b]
    assert all(x.running for x in brokers)
    assert len({x.port for x in brokers}) == 3
    assert len({x.pid for x in brokers}) == 3
    assert all(pulsar_handshake("127.0.0.1", x.port) is not None for x in brokers)
    assert "Keep-alive interval: 7s" in b.log_text()
    # Each has its own data.
    produce(a.service_url, topic_name, [b"only-on-a"])
    assert [m["value"] for m in read_all(a.service_url, topic_name)] == [b"only-on-a"]
    assert read_all(b.service_url, topic_name) == []


def test_topic_name_is_unique_per_test(topic_name: str, request: pytest.FixtureRequest) -> None:
    assert topic_name.startswith("persistent://public/default/test_topic_name_is_unique")
    assert re.search(r"-[0-9a-f]{8}$", topic_name)
    assert not re.search(r"-partition-\d+$", topic_name)


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
@pytest.mark.parametrize("codec", CODECS)
def test_official_client_round_trip(
    pulsar_lite: PulsarLite,
    fault_proxy: ProxyFactory,
    topic_name: str,
    codec: str,
    batching: bool,
) -> None:
    sent = sample_messages(100)
    ids = produce(pulsar_lite.service_url, topic_name, sent, batching=batching, compression=codec)
    assert len(ids) == len(set(ids)) == 100

    got = read_all(pulsar_lite.service_url, topic_name)
    assert_same_messages(got, sent)
    assert [m["message_id"] for m in got] == ids
    assert {m["partition"] for m in got} == {-1}
    entries = {m["message_id"].rsplit(":", 2)[0] for m in got}
    batch_indexes = [int(m["message_id"].rsplit(":", 1)[1]) for m in got]
    if batching:
        assert len(entries) < 100 and min(batch_indexes) == 0
    else:
        assert len(entries) == 100 and set(batch_indexes) == {-1}

    # The entries really are compressed with the codec: look at the MESSAGE frames.
    codecs_seen: set[int] = set()

    def record(frame: Frame, raw: bytes) -> bytes:
        if frame.metadata is not None:
            codecs_seen.add(frame.metadata.compression)
        return raw

    proxy = fault_proxy(pulsar_lite, frame_hook=record)
    assert [m["value"] for m in read_all(proxy.service_url, topic_name)] == [
        m["value"] for m in sent
    ]
    assert codecs_seen == {codec_by_name(codec)}


def test_restart_keeps_data_and_port(fresh_pulsar_lite: BrokerFactory, topic_name: str) -> None:
    broker = fresh_pulsar_lite()
    sent = sample_messages(100)
    ids = produce(broker.service_url, topic_name, sent, compression="LZ4")
    port, pid = broker.port, broker.pid

    seconds = broker.restart()

    assert broker.running
    assert (broker.port, broker.service_url) == (port, f"pulsar://127.0.0.1:{port}")
    assert broker.pid != pid
    assert 0 < seconds < START_TIMEOUT
    assert broker.start_seconds == [broker.cold_start_seconds, seconds]
    assert not broker.stop_needed_sigkill  # SIGTERM was enough
    got = read_all(broker.service_url, topic_name)
    assert_same_messages(got, sent)
    assert [m["message_id"] for m in got] == ids
    # And the broker keeps writing after the restart.
    more = produce(broker.service_url, topic_name, [b"after-restart"])
    assert more[0] not in ids
    assert read_all(broker.service_url, topic_name)[-1]["value"] == b"after-restart"
    assert "start #2" in broker.log_text()


def test_kill_keeps_acknowledged_data(fresh_pulsar_lite: BrokerFactory, topic_name: str) -> None:
    broker = fresh_pulsar_lite()
    sent = sample_messages(100)
    produce(broker.service_url, topic_name, sent, batching=False)
    broker.kill()
    assert not broker.running
    assert pulsar_handshake("127.0.0.1", broker.port, timeout=0.3) is None
    broker.start()
    assert_same_messages(read_all(broker.service_url, topic_name), sent)


def test_session_brokers_refuse_to_stop(pulsar_lite: PulsarLite) -> None:
    for action in (pulsar_lite.stop, pulsar_lite.kill, pulsar_lite.restart):
        with pytest.raises(RuntimeError, match="fresh_pulsar_lite"):
            action()
    assert pulsar_lite.running


def test_partitioned_instance(pulsar_lite_partitioned: PulsarLite, topic_name: str) -> None:
    url = pulsar_lite_partitioned.service_url
    assert pulsar_lite_partitioned.default_partitions == 4
    assert topic_partitions(url, topic_name) == [f"{topic_name}-partition-{k}" for k in range(4)]
    sent = [{"value": f"v{i}".encode(), "key": f"k{i}"} for i in range(100)]
    ids = produce(url, topic_name, sent)
    got = read_all(url, topic_name)
    assert sorted(m["value"] for m in got) == sorted(m["value"] for m in sent)
    assert sorted(m["message_id"] for m in got) == sorted(ids)
    assert {m["partition"] for m in got} <= {0, 1, 2, 3}
    assert len({m["partition"] for m in got}) > 1
    # Quirk 3: "<topic>-partition-1" is partitioned again here. The official reader would
    # abort the process; the helpers refuse instead.
    with pytest.raises(ValueError, match="quirk 3"):
        read_all(url, f"{topic_name}-partition-1")


def test_non_partitioned_instance_has_no_partitions(
    pulsar_lite: PulsarLite, topic_name: str
) -> None:
    assert topic_partitions(pulsar_lite.service_url, topic_name) == [topic_name]


# ---------------------------------------------------------------------------
# Brokers that cannot start
# ---------------------------------------------------------------------------


def test_occupied_port_raises_with_log(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        broker = PulsarLite(tmp_path, port=port)
        with pytest.raises(BrokerStartError, match="exited with status") as info:
            broker.start()
    assert "Address already in use" in info.value.log_tail
    assert "Address already in use" in str(info.value)  # the tail is in the message
    assert not broker.running


def test_unparsable_config_raises_with_log(tmp_path: Path) -> None:
    # pulsar-lite ignores a config file it cannot parse and runs on defaults (metrics on
    # 0.0.0.0:8080, no partitions): the fixture notices from the settings it logs.
    broker = PulsarLite(tmp_path, default_partitions=4, extra_toml='keep_alive_interval_secs = "x"')
    with pytest.raises(BrokerStartError, match="did not apply") as info:
        broker.start()
    message = str(info.value)
    assert "default_partitions: asked 4, log says 0" in message
    assert "metrics: asked disabled, log says enabled" in message
    assert "Default partitions: 0" in info.value.log_tail
    assert not broker.running


def test_start_deadline_raises_with_log(tmp_path: Path) -> None:
    broker = PulsarLite(tmp_path)
    with pytest.raises(BrokerStartError, match="did not answer CONNECT within") as info:
        broker.start(timeout=0.0)
    assert "=== fixture: start #1" in info.value.log_tail
    assert not broker.running
    broker.start()  # the same instance starts fine afterwards
    broker.close()
    assert not broker.running


def test_unknown_config_key_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="unknown pulsar-lite config key"):
        PulsarLite(tmp_path, default_partition=4)
    with pytest.raises(TypeError, match="expected int"):
        PulsarLite(tmp_path, default_partitions="4")


def test_failed_test_report_carries_broker_log(tmp_path: Path) -> None:
    """A failing test that used a broker fixture gets the broker log in its report."""
    tests_dir = Path(__file__).resolve().parents[1]
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tests_dir)!r})\npytest_plugins = ['support.plugin']\n"
    )
    (tmp_path / "test_fails.py").write_text(
        textwrap.dedent(
            """
            import pytest
            from support.lite import PulsarLite
            from support.official import produce

            @pytest.fixture(scope="session")
            def session_broker(tmp_path_factory):
                with PulsarLite(tmp_path_factory.mktemp("s"), name="session") as broker:
                    yield broker

            def test_uses_broker(fresh_pulsar_lite, session_broker):
                broker = fresh_pulsar_lite()
                assert broker.running
                produce(session_broker.service_url, "t", [b"x"])
                raise AssertionError("deliberate failure")
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "deliberate failure" in result.stdout
    assert re.search(r"pulsar-lite fresh-0 log, .*\(whole log: .*broker\.log\)", result.stdout)
    assert "Server listening on 127.0.0.1:" in result.stdout
    assert re.search(r"pulsar-lite session log, since the test began", result.stdout)
    assert "Closing connection" in result.stdout.split("session log, since the test began")[1]


# ---------------------------------------------------------------------------
# FaultProxy
# ---------------------------------------------------------------------------


def test_proxy_forwards_official_client_traffic(
    pulsar_lite: PulsarLite, fault_proxy: ProxyFactory, topic_name: str
) -> None:
    proxy = fault_proxy(pulsar_lite)
    assert proxy.service_url != pulsar_lite.service_url
    sent = sample_messages(100)
    ids = produce(proxy.service_url, topic_name, sent, batching=False)
    got = read_all(proxy.service_url, topic_name)
    assert_same_messages(got, sent)
    assert [m["message_id"] for m in got] == ids
    assert proxy.connections_accepted >= 2  # one client per helper call
    assert proxy.lookups_rewritten >= 2
    assert proxy.drops == 0
    assert proxy.errors == []
    # The payloads themselves crossed the proxy, both ways.
    payload_bytes = sum(len(m["value"]) for m in sent)
    assert proxy.bytes_to_broker > payload_bytes
    assert proxy.bytes_to_client > payload_bytes
    assert proxy.wait_for(lambda p: p.active_connections == 0)


def test_proxy_without_lookup_rewrite_is_bypassed(
    pulsar_lite: PulsarLite, fault_proxy: ProxyFactory, topic_name: str
) -> None:
    """Why the proxy rewrites lookups: otherwise the client follows the broker's own URL."""
    proxy = fault_proxy(pulsar_lite, rewrite_lookups=False)
    sent = sample_messages(100)
    produce(proxy.service_url, topic_name, sent, batching=False)
    assert proxy.lookups_rewritten == 0
    assert proxy.bytes_to_broker < sum(len(m["value"]) for m in sent)  # SENDs went direct
    assert len(read_all(pulsar_lite.service_url, topic_name)) == 100


@pytest.mark.parametrize("batching", [True, False], ids=["batched", "single"])
def test_proxy_drops_every_k_frames(
    pulsar_lite: PulsarLite, fault_proxy: ProxyFactory, topic_name: str, batching: bool
) -> None:
    k = 8
    proxy = fault_proxy(pulsar_lite, drop_every_frames=k)
    sent = sample_messages(100)
    ids = produce(
        proxy.service_url,
        topic_name,
        sent,
        batching=batching,
        batching_max_messages=10,
        batching_max_publish_delay_ms=1,
    )
    stats = proxy.stats()
    assert len(ids) == 100, stats  # the official client reconnected and finished
    assert proxy.drops >= 1, stats
    # Every drop was followed by a reconnect, except perhaps the last: when the final receipt
    # happens to be a connection's K-th frame, the producer closes without reconnecting.
    assert proxy.connections_accepted >= proxy.drops >= proxy.connections_accepted - 1, stats
    assert proxy.frames_from_broker <= k * proxy.connections_accepted, stats
    assert proxy.errors == [], stats
    # No deduplication in pulsar-lite: messages whose receipt was cut off are resent and
    # stored again. Every message is there at least once, in the order first sent.
    got = read_all(pulsar_lite.service_url, topic_name, at_least=len(sent))
    values = [m["value"] for m in got]
    assert set(values) == {m["value"] for m in sent}, stats
    assert list(dict.fromkeys(values)) == [m["value"] for m in sent], stats


def _open_connected(proxy: FaultProxy) -> socket.socket:
    """A raw connection through the proxy that has done the CONNECT handshake."""
    s = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    s.sendall(
        encode_command(
            pb.BaseCommand(
                type=pb.BaseCommand.CONNECT,
                connect=pb.CommandConnect(client_version="test", protocol_version=21),
            )
        )
    )
    decoder = FrameDecoder()
    while (frame := decoder.next_frame()) is None:
        decoder.feed(s.recv(65536))
    assert frame.command.type == pb.BaseCommand.CONNECTED
    return s


def test_proxy_drop_all_closes_both_sides(
    pulsar_lite: PulsarLite, fault_proxy: ProxyFactory
) -> None:
    proxy = fault_proxy(pulsar_lite)
    mark = pulsar_lite.log_size()
    conns = [_open_connected(proxy) for _ in range(3)]
    assert proxy.wait_for(lambda p: p.active_connections == 3)
    assert proxy.drop_all() == 3
    assert proxy.drops == 3
    for s in conns:
        s.settimeout(5)
        assert s.recv(1) == b""  # EOF
        s.close()
    assert proxy.active_connections == 0
    # The broker saw its side closed too.
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if pulsar_lite.log_text(mark).count("Connection closed from") == 3:
            break
        time.sleep(0.02)
    assert pulsar_lite.log_text(mark).count("Connection closed from") == 3


def test_proxy_reset_mode(pulsar_lite: PulsarLite, fault_proxy: ProxyFactory) -> None:
    proxy = fault_proxy(pulsar_lite, reset=True)
    s = _open_connected(proxy)
    assert proxy.drop_all() == 1
    s.settimeout(5)
    with pytest.raises(ConnectionResetError):
        s.recv(1)
    s.close()


def test_proxy_pause_refuses_then_resumes(
    pulsar_lite: PulsarLite, fault_proxy: ProxyFactory
) -> None:
    proxy = fault_proxy(pulsar_lite)
    kept = _open_connected(proxy)
    proxy.pause()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=2).close()
    # Open connections keep working while paused.
    assert proxy.active_connections == 1
    proxy.resume()
    assert pulsar_handshake("127.0.0.1", proxy.port) is not None
    kept.close()


def test_proxy_pause_without_refusing_leaves_connects_hanging(
    pulsar_lite: PulsarLite, fault_proxy: ProxyFactory
) -> None:
    proxy = fault_proxy(pulsar_lite)
    proxy.pause(refuse=False)
    accepted = proxy.connections_accepted
    # TCP connects (the backlog), but nothing answers.
    assert pulsar_handshake("127.0.0.1", proxy.port, timeout=0.5) is None
    assert proxy.connections_accepted == accepted
    proxy.resume()
    assert pulsar_handshake("127.0.0.1", proxy.port) is not None
    assert proxy.connections_accepted > accepted
