"""A Python worker's pooled clients (spark/worker_clients.py): lent to one task at a time,
given back clean or closed, keyed by connection settings, never shared with a fork.

Fast tests on pulsar-lite behind a fault proxy, which counts the connections a broker
sees. The Spark side (several tasks of one worker, a broker restart between queries)
is ``test_worker_clients_spark.py``.
"""

from __future__ import annotations

import inspect
import os

import pytest

from pulsar_spark.spark import connect, worker_clients
from pulsar_spark.spark.connect import open_client
from pulsar_spark.spark.options.parse import parse_options
from pulsar_spark.spark.worker_clients import client_key, idle_count


def _options(url: str, **more: str):
    return parse_options({"service.url": url, **more})


@pytest.fixture
def pool():
    """An empty pool for the test, emptied again after it."""
    worker_clients._POOL.close_all()
    yield worker_clients._POOL
    worker_clients._POOL.close_all()


def _send(client, topic: str, n: int) -> None:
    with client.create_producer(topic) as producer:
        for i in range(n):
            producer.send(b"m%d" % i)
        producer.flush()


def test_tasks_one_after_another_share_one_connection(
    pool, pulsar_lite, fault_proxy, topic_name: str
) -> None:
    proxy = fault_proxy(pulsar_lite)
    options = _options(proxy.service_url)
    for task in range(5):
        with open_client(options, reuse=True) as client:
            _send(client, topic_name, 2)
            rows = sum(b.num_rows for b in client.read_batches(topic_name))
            assert rows == 2 * (task + 1)
        assert idle_count() == 1
    # Lookups are answered with the proxy's own address: one connection for all.
    assert proxy.connections_accepted == 1
    # Outside a task (planning, tests) a client is the caller's own, as before.
    assert not worker_clients.in_task()
    with open_client(options) as own:
        assert not isinstance(own, worker_clients.LentClient)
    assert idle_count() == 1


def test_a_failed_task_closes_its_client(pool, pulsar_lite, fault_proxy, topic_name) -> None:
    proxy = fault_proxy(pulsar_lite)
    options = _options(proxy.service_url)
    msg = "task failed"
    with pytest.raises(RuntimeError, match=msg), open_client(options, reuse=True) as client:
        _send(client, topic_name, 1)
        raise RuntimeError(msg)
    assert idle_count() == 0
    assert proxy.wait_for(lambda p: p.active_connections == 0)
    # close() from a finally while an exception propagates counts as a failure too.
    client = open_client(options, reuse=True)
    with pytest.raises(ValueError):
        try:
            _send(client, topic_name, 1)
            raise ValueError
        finally:
            client.close()
    assert idle_count() == 0
    with open_client(options, reuse=True) as client:
        assert sum(b.num_rows for b in client.read_batches(topic_name)) == 2
    assert idle_count() == 1
    assert proxy.connections_accepted == 3


def test_a_client_left_with_a_producer_is_closed(pool, pulsar_lite, topic_name) -> None:
    options = _options(pulsar_lite.service_url)
    client = open_client(options, reuse=True)
    producer = client.create_producer(topic_name)  # never closed by the "task"
    producer.send(b"x")
    producer.flush()
    client.close()
    assert idle_count() == 0  # closed: the broker drops the producer with the connection
    with open_client(options, reuse=True) as again:
        assert sum(b.num_rows for b in again.read_batches(topic_name)) == 1
    # A read left half way (Spark stops pulling: the generator is closed) is a failure.
    with open_client(options, reuse=True) as again:
        _send(again, topic_name, 3)

    def task():
        with open_client(options, reuse=True) as client:
            yield from client.read_batches(topic_name, batch_rows=1)

    rows = task()
    next(rows)
    rows.close()
    assert idle_count() == 0


def test_broken_connections_of_an_idle_client_are_replaced(
    pool, pulsar_lite, fault_proxy, topic_name
) -> None:
    proxy = fault_proxy(pulsar_lite)
    options = _options(proxy.service_url)
    with open_client(options, reuse=True) as client:
        _send(client, topic_name, 1)
    assert proxy.drop_all() == 1  # as a broker restart does to the idle client
    with open_client(options, reuse=True) as client:
        assert sum(b.num_rows for b in client.read_batches(topic_name)) == 1
    assert idle_count() == 1
    assert proxy.connections_accepted == 2


def test_keys_follow_connection_settings_and_hide_secrets(pool, pulsar_lite) -> None:
    url = pulsar_lite.service_url
    token = "eyJ-a-secret-token"
    plain = _options(url)
    same = _options(url, topic="persistent://public/default/other", pollTimeoutMs="5000")
    with_token = _options(
        url,
        authPluginClassName="org.apache.pulsar.client.impl.auth.AuthenticationToken",
        authParams=f"token:{token}",
    )
    assert client_key(plain, None) == client_key(same, None)  # topic: not a setting
    assert client_key(plain, None) != client_key(with_token, None)
    assert client_key(plain, None) != client_key(plain, 5.0)  # the operation timeout
    assert token not in repr(client_key(with_token, None))
    assert token not in str(client_key(with_token, None))
    with open_client(plain, reuse=True), open_client(same, reuse=True) as second:
        assert idle_count() == 0  # two at once: each its own
    assert idle_count() == 2
    with open_client(plain, reuse=True, operation_timeout=5.0) as other:
        assert other.operation_timeout == 5.0
    assert idle_count() == 3
    assert second is not None


def test_every_client_setting_is_in_the_key() -> None:
    """A setting added to connect._settings must be added to the key too."""
    source = inspect.getsource(connect._settings)
    for line in source.splitlines():
        line = line.strip()
        if line.startswith('"') and '": ' in line:
            setting = line.split('"')[1]
            if setting == "operation_timeout":
                continue  # the key's last item
            assert setting in worker_clients._FIELDS, setting


def test_a_forked_child_does_not_use_its_parents_clients(pool, pulsar_lite) -> None:
    options = _options(pulsar_lite.service_url)
    with open_client(options, reuse=True):
        pass
    assert idle_count() == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no client of the parent's, and closing them is not its job
        try:
            worker_clients._POOL.close_all()
            os.write(write, str(idle_count()).encode())
        finally:
            os._exit(0)
    os.close(write)
    got = os.read(read, 16)
    os.waitpid(pid, 0)
    os.close(read)
    assert got == b"0"
    assert idle_count() == 1  # the parent's client is intact
    with open_client(options, reuse=True) as client:
        assert client.get_partitions("persistent://public/default/x")
