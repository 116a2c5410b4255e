"""Slow and odd links: a broker behind a 1 Mbit/s link, added latency, a TLS broker
given ``pulsar://`` (and a plain one given ``pulsar+ssl://``), and the producer's window
bounded by bytes while a slow link holds its messages.

The slow links come from the fault proxy's throttles (tests/support/throttle.py). A
frame takes as long to write as the link needs: the connection fails a write only when
no byte moves for the operation timeout, and the producer never waits for the socket.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.net.transport import TlsMismatch
from pulsar_spark.client.write.producer import DEFAULT_MAX_PENDING_BYTES
from pulsar_spark.protocol import FrameDecoder, encode_command, pb
from tests.support.throttle import Throttle, mbit


def _values(client: PulsarClient, topic: str) -> list[bytes]:
    return [v for b in client.read_batches(topic) for v in b.column("value").to_pylist()]


def _sink() -> tuple[socket.socket, list[int]]:
    """A listening socket whose one connection is read to the end; its byte count."""
    server = socket.create_server(("127.0.0.1", 0))
    got = [0]

    def drain() -> None:
        conn, _ = server.accept()
        with conn:
            while data := conn.recv(65536):
                got[0] += len(data)

    threading.Thread(target=drain, daemon=True).start()
    return server, got


def test_the_throttle_paces_bytes_and_adds_delay(pulsar_lite, fault_proxy) -> None:
    # Delay: a CONNECT round trip through 0.2 s one way and 0.3 s the other.
    proxy = fault_proxy(pulsar_lite, to_broker=Throttle(delay=0.2), to_client=Throttle(delay=0.3))
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        connect = pb.BaseCommand(
            type=pb.BaseCommand.CONNECT,
            connect=pb.CommandConnect(client_version="links", protocol_version=21),
        )
        started = time.monotonic()
        sock.sendall(encode_command(connect))
        decoder = FrameDecoder()
        while (frame := decoder.next_frame()) is None:
            decoder.feed(sock.recv(65536))
        assert frame.command.type == pb.BaseCommand.CONNECTED
        assert time.monotonic() - started >= 0.5
    # Rate: 300 kB at 200 kB/s into a plain socket take 1.5 s.
    server, got = _sink()
    with server:
        slow = fault_proxy(f"pulsar://127.0.0.1:{server.getsockname()[1]}")
        slow.to_broker.rate = 200_000
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", slow.port), timeout=10) as sock:
            sock.sendall(b"x" * 300_000)
            assert slow.wait_for(lambda p: got[0] >= 300_000, timeout=20)
        assert 1.2 <= time.monotonic() - started < 10


@pytest.mark.waits
def test_a_5_mb_message_over_a_1_mbit_link_goes_once(pulsar_lite, fault_proxy, topic_name) -> None:
    # 5,000,000 bytes at 125,000 bytes/s: 40 s on the wire. A write used to be given
    # 1 s for a whole frame: the connection was taken for closed, the producer sent
    # everything again on a new one, and again, until the send timeout.
    # In 1 MiB chunks (8 s each): nothing can go between the bytes of one frame, and
    # pulsar-lite drops a connection whose PONG is 40 s late (a PING after 30 s idle,
    # 10 s to answer): the PONG goes out between two chunks, ahead of queued frames.
    proxy = fault_proxy(pulsar_lite, to_broker=Throttle(rate=mbit(1)))
    big = random.Random(5).randbytes(5_000_000)
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(
            topic_name, batching=False, send_timeout=180, chunk_max_size=1024 * 1024
        )
        producer.send(b"before")
        started = time.monotonic()
        producer.send(big)  # queued: neither this thread nor the producer waits for the socket
        producer.send(b"after")
        assert time.monotonic() - started < 5
        producer.flush(timeout=180)
        elapsed = time.monotonic() - started
        producer.close()
    print(f"\n5 MB over 1 Mbit/s: {elapsed:.1f} s, {proxy.stats()['connections_accepted']} conn")
    assert proxy.connections_accepted == 1  # no write was taken for a closed connection
    assert elapsed >= 30  # the link was that slow
    with PulsarClient(pulsar_lite.service_url) as client:
        assert _values(client, topic_name) == [b"before", big, b"after"]


@pytest.mark.waits
def test_a_5_mb_message_over_a_2_mbit_link_is_read(pulsar_lite, fault_proxy, topic_name) -> None:
    # One MESSAGE frame of 5,000,000 bytes at 250,000 bytes/s: 20 s on the wire, twice
    # the reader's 10 s stall bound (PartitionReader.STALL) and four times the 5 s
    # operation timeout set here (2 Mbit/s rather than 1: the same point in half the
    # time). A frame used to count as progress only once whole: the answer to
    # GET_LAST_MESSAGE_ID, queued behind it, timed out, and the reader took the quiet
    # link for a stalled subscription. Now bytes still arriving count. One permit at a
    # time: the read's end is fixed before the big message is dispatched, so the
    # reader waits through it with nothing dispatched (the stall path), and asks for
    # the last id again meanwhile (the request path).
    big = random.Random(5).randbytes(5_000_000)
    sent = [b"before", big, b"after"]
    with (
        PulsarClient(pulsar_lite.service_url) as client,
        client.create_producer(topic_name, batching=False) as producer,
    ):
        for value in sent:
            producer.send(value)
    proxy = fault_proxy(pulsar_lite, to_client=Throttle(rate=mbit(2)))
    started = time.monotonic()
    with PulsarClient(proxy.service_url, operation_timeout=5) as client:
        batches = client.read_batches(topic_name, receiver_queue_size=1)
        values = [v for b in batches for v in b.column("value").to_pylist()]
    elapsed = time.monotonic() - started
    print(f"\n5 MB read over 2 Mbit/s: {elapsed:.1f} s, {proxy.connections_accepted} conn")
    assert values == sent  # each once, in order
    assert proxy.connections_accepted == 1  # no reconnect, no re-subscription elsewhere
    assert elapsed >= 15  # the link was that slow


def test_a_slow_write_is_not_taken_for_a_lost_receipt(
    pulsar_lite, fault_proxy, topic_name, caplog
) -> None:
    # A receipt overdue for the operation timeout with nothing moving is taken for lost
    # and its message sent again (test_send_faults.py). 1,000,000 bytes at 125,000
    # bytes/s take 8 s, nearly three operation timeouts of 3 s, most of it in the
    # kernel's send buffer once written: those bytes still moving keep the receipt due.
    proxy = fault_proxy(pulsar_lite, to_broker=Throttle(rate=mbit(1)))
    sent = [b"before", random.Random(7).randbytes(1_000_000), b"after"]
    with (
        caplog.at_level(logging.WARNING, logger="pulsar_spark.client"),
        PulsarClient(proxy.service_url, operation_timeout=3) as client,
    ):
        producer = client.create_producer(topic_name, batching=False, send_timeout=0)
        started = time.monotonic()
        for value in sent:
            producer.send(value)
        producer.flush(timeout=60)
        elapsed = time.monotonic() - started
        producer.close()
    print(f"\n1 MB over 1 Mbit/s with a 3 s operation timeout: {elapsed:.1f} s")
    assert elapsed >= 6  # the link was that slow
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    with PulsarClient(pulsar_lite.service_url) as client:
        assert _values(client, topic_name) == sent  # once: nothing was sent again


@pytest.mark.waits
def test_a_stalled_write_fails_within_the_operation_timeout(
    pulsar_lite, fault_proxy, topic_name
) -> None:
    # A link that moves nothing at all (1 byte/s) is dead: the write is abandoned once
    # no byte moved for the operation timeout, and the producer reports it.
    proxy = fault_proxy(pulsar_lite)
    with PulsarClient(proxy.service_url, operation_timeout=3) as client:
        producer = client.create_producer(topic_name, batching=False, send_timeout=8)
        proxy.to_broker.rate = 1.0  # from now on, for the open connection too
        producer.send(random.Random(1).randbytes(4_000_000))
        started = time.monotonic()
        with pytest.raises(Exception, match=r"(?i)timeout|timed out|within|no byte"):
            producer.flush(timeout=30)
        assert time.monotonic() - started < 25
        proxy.to_broker.rate = None


def _assert_clear(exc: TlsMismatch, expected: str) -> None:
    assert expected in str(exc), str(exc)
    assert not exc.retriable  # a wrong scheme is not retried up to the operation timeout


def test_a_tls_broker_given_plain_pulsar_fails_clearly_in_time(
    apache_pulsar_secure, topic_name
) -> None:
    broker = apache_pulsar_secure
    url = broker.service_url.replace("pulsar+ssl://", "pulsar://")
    started = time.monotonic()
    with PulsarClient(url, connect_timeout=5) as client, pytest.raises(TlsMismatch) as caught:
        client.create_producer(topic_name)
    elapsed = time.monotonic() - started
    print(f"\nTLS broker given pulsar://: {elapsed:.1f} s: {caught.value}")
    assert elapsed < 5 + 3
    _assert_clear(caught.value, "speaks TLS: use pulsar+ssl:// for it")


def test_a_plain_broker_given_pulsar_ssl_fails_clearly_in_time(
    apache_pulsar_secure, topic_name
) -> None:
    broker = apache_pulsar_secure
    url = broker.plain_service_url.replace("pulsar://", "pulsar+ssl://")
    started = time.monotonic()
    with PulsarClient(url, connect_timeout=5) as client, pytest.raises(TlsMismatch) as caught:
        client.create_producer(topic_name)
    elapsed = time.monotonic() - started
    print(f"\nplain broker given pulsar+ssl://: {elapsed:.1f} s: {caught.value}")
    assert elapsed < 5 + 3
    _assert_clear(caught.value, "speaks plain Pulsar, not TLS: use pulsar://")


def test_the_window_is_bounded_by_bytes(pulsar_lite, fault_proxy, topic_name) -> None:
    # 20 messages of 300 kB over a 3 MB/s link: with a 1 MB byte window at most four
    # are unconfirmed at any time (one more than the window holds never goes ahead).
    proxy = fault_proxy(pulsar_lite, to_broker=Throttle(rate=3_000_000))
    value = b"v" * 300_000
    peak = [0]
    with PulsarClient(proxy.service_url) as client:
        producer = client.create_producer(
            topic_name, batching=False, max_pending_bytes=1_000_000, send_timeout=60
        )
        assert producer._window[1] == 1_000_000
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], producer._pending_bytes)
                time.sleep(0.002)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        for _ in range(20):
            producer.send(value)
        producer.flush(timeout=60)
        stop.set()
        sampler.join()
        producer.close()
    assert 300_000 <= peak[0] <= 1_000_000 + 1024
    with PulsarClient(pulsar_lite.service_url) as client:
        assert _values(client, topic_name) == [value] * 20
        with client.create_producer(topic_name) as p:
            assert p._window[1] == DEFAULT_MAX_PENDING_BYTES == 32 * 1024 * 1024
