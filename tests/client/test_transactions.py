"""Transactions in the client (issue 26): the coordinator client, transactional producers,
and what readers see, on Apache Pulsar with transactions on and deduplication off
(``apache_pulsar_txn``); the Java client of the distribution is the peer.

Brokers without transactions (pulsar-lite, Apache Pulsar with the coordinator off) get
:class:`TransactionsUnavailable` before anything is written.
"""

from __future__ import annotations

import contextlib
import time

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.txn import TransactionFailed, TransactionState, TransactionsUnavailable
from pulsar_spark.protocol import Frame, pb
from pulsar_spark.protocol.errors import PulsarError, ServerError
from pulsar_spark.protocol.txn import TxnId
from tests.support.java_txn import commit, java_consume_all, java_produce_steps, send


def _values(client: PulsarClient, topic: str) -> list[str]:
    return [
        v.decode()
        for batch in client.read_batches(topic)
        for v in batch.column("value").to_pylist()
    ]


def test_a_broker_without_transactions_is_named_before_anything_is_written(
    pulsar_lite, apache_pulsar, topic_name
) -> None:
    for url in (pulsar_lite.service_url, apache_pulsar.service_url):
        with PulsarClient(url, operation_timeout=10) as client:
            with pytest.raises(TransactionsUnavailable, match="transactionCoordinatorEnabled"):
                client.new_transaction()
            # Nothing was made on the way: the topic has no message.
            assert client.get_last_message_id(topic_name) is None


def test_transaction_ids_read_back_from_their_text() -> None:
    txn = TxnId(3, 2**64 - 1)
    assert TxnId.parse(str(txn)) == txn
    for bad in ("", "3", "a:b", "-1:2", f"1:{2**64}"):
        with pytest.raises(ValueError, match="transaction id"):
            TxnId.parse(bad)


def test_committed_messages_appear_at_once_and_aborted_ones_never(
    apache_pulsar_txn, topic_name
) -> None:
    url = apache_pulsar_txn.service_url
    with PulsarClient(url) as client:
        kept = client.new_transaction(timeout=60)
        dropped = client.new_transaction(timeout=60)
        with (
            client.create_producer(topic_name, transaction=kept) as in_kept,
            client.create_producer(topic_name, transaction=dropped) as in_dropped,
            client.create_producer(topic_name) as plain,
        ):
            # Sent in this order: k1 first, so the open transaction holds back p1 too.
            for producer, value in ((in_kept, b"k1"), (in_dropped, b"d1"), (plain, b"p1")):
                producer.send(value)
                producer.flush()
            in_kept.send(b"k2")
            in_kept.flush()
        # Open transactions hold back what follows them, for every reader.
        assert _values(client, topic_name) == []
        dropped.abort()
        assert _values(client, topic_name) == []  # kept is still open, and first
        kept.commit()
        assert kept.state is TransactionState.COMMITTED
        assert _values(client, topic_name) == ["k1", "p1", "k2"]
    # The Java client, with its default isolation, agrees.
    assert java_consume_all(url, topic_name, idle=3) == ["k1", "p1", "k2"]


def test_a_partitioned_topic_registers_each_partition_it_writes(
    apache_pulsar_txn, topic_name
) -> None:
    apache_pulsar_txn.admin.create_partitioned_topic(topic_name, 3)
    with PulsarClient(apache_pulsar_txn.service_url) as client:
        txn = client.new_transaction(timeout=60)
        with client.create_producer(topic_name, transaction=txn) as producer:
            for i in range(30):
                producer.send(b"%d" % i, key=f"k{i}")
            producer.flush()
        assert len(txn.partitions) == 3
        assert _values(client, topic_name) == []
        txn.commit()
        assert sorted(map(int, _values(client, topic_name))) == list(range(30))


def test_a_transaction_ends_by_id_from_another_client(apache_pulsar_txn, topic_name) -> None:
    url = apache_pulsar_txn.service_url
    with PulsarClient(url) as writer, PulsarClient(url) as driver:
        txn = writer.new_transaction(timeout=60)
        with writer.create_producer(topic_name, transaction=txn) as producer:
            for i in range(100):
                producer.send(b"%03d" % i)
            producer.flush()
        driver.transaction(txn.id).commit()
        assert len(_values(driver, topic_name)) == 100
        # The coordinator forgets an ended transaction: ending it again is refused.
        with pytest.raises(ServerError, match="TransactionNotFound"):
            driver.transaction(txn.id).commit()


def test_a_transaction_that_timed_out_cannot_commit(apache_pulsar_txn, topic_name) -> None:
    with PulsarClient(apache_pulsar_txn.service_url) as client:
        txn = client.new_transaction(timeout=1)
        with client.create_producer(topic_name, transaction=txn) as producer:
            producer.send(b"late")
            producer.flush()
        time.sleep(3)
        with pytest.raises(ServerError, match=r"InvalidTxnStatus|TransactionNotFound"):
            txn.commit()
        assert _values(client, topic_name) == []


def test_we_read_the_java_clients_transactional_writes(apache_pulsar_txn, topic_name) -> None:
    url = apache_pulsar_txn.service_url
    java_produce_steps(
        url,
        topic_name,
        [
            send("a", "t1"),
            send("plain-1"),
            send("b", "t2"),
            send("c", "t1"),
            commit("t1"),
            commit("t2", abort=True),
            send("plain-2"),
        ],
    )
    with PulsarClient(url) as client:
        assert _values(client, topic_name) == ["a", "plain-1", "c", "plain-2"]


def test_a_java_transaction_left_open_holds_back_what_follows(
    apache_pulsar_txn, topic_name
) -> None:
    url = apache_pulsar_txn.service_url
    java_produce_steps(url, topic_name, [send("before"), send("held", "open"), send("after")])
    with PulsarClient(url) as client:
        # The batch read ends at the last readable message: before the open transaction.
        assert _values(client, topic_name) == ["before"]


def _swallow_receipt(sequence_id: int):
    swallowed: list[int] = []

    def hook(frame: Frame, raw: bytes) -> bytes:
        command = frame.command
        receipt = command.type == pb.BaseCommand.SEND_RECEIPT
        if receipt and not swallowed and command.send_receipt.sequence_id == sequence_id:
            swallowed.append(sequence_id)
            return b""
        return raw

    hook.swallowed = swallowed  # type: ignore[attr-defined]
    return hook


def test_a_send_in_doubt_fails_the_transaction_instead_of_sending_again(
    apache_pulsar_txn, topic_name, fault_proxy
) -> None:
    # Without deduplication a message sent again could be stored twice inside the
    # transaction. The producer sends nothing again: the transaction fails, aborts at
    # commit, and the rows go again in a new one: each once.
    hook = _swallow_receipt(3)
    proxy = fault_proxy(apache_pulsar_txn.service_url, frame_hook=hook)
    rows = [b"m%d" % i for i in range(8)]
    with PulsarClient(proxy.service_url, operation_timeout=10) as client:
        first = client.new_transaction(timeout=60)
        producer = client.create_producer(
            topic_name, transaction=first, batching=False, send_timeout=0
        )
        with pytest.raises(TransactionFailed, match="in doubt"):
            for value in rows:
                producer.send(value)
            producer.flush()
        with pytest.raises(TransactionFailed):
            producer.close()  # it says again why it failed
        assert hook.swallowed == [3]
        assert first.state is TransactionState.FAILED
        with pytest.raises(TransactionFailed, match="aborted"):
            first.commit()
        assert first.state is TransactionState.ABORTED
        second = client.new_transaction(timeout=60)
        with client.create_producer(topic_name, transaction=second) as again:
            for value in rows:
                again.send(value)
            again.flush()
        second.commit()
    with PulsarClient(apache_pulsar_txn.service_url) as client:
        assert _values(client, topic_name) == [v.decode() for v in rows]


def test_a_broker_restart_mid_transaction_leaves_each_row_once(
    fresh_apache_pulsar, topic_name, record_property
) -> None:
    # Part 1: every receipt in before the restart: the transaction lives on (its coordinator
    # and the topic's transaction buffer recover), the producer re-attaches, and the commit
    # after the restart shows all rows once. Part 2: a restart with sends in flight: in doubt,
    # so the transaction fails and the rows go again in a new one. Either way: once.
    broker = fresh_apache_pulsar(variant="txn")
    url = broker.service_url
    first = [b"a%03d" % i for i in range(200)]
    second = [b"b%03d" % i for i in range(200)]
    restarts = []
    with PulsarClient(url, operation_timeout=60) as client:
        txn = client.new_transaction(timeout=300)
        with client.create_producer(topic_name, transaction=txn, send_timeout=0) as producer:
            for value in first[:100]:
                producer.send(value)
            producer.flush()
            restarts.append(broker.restart())
            for value in first[100:]:
                producer.send(value)
            producer.flush()
        txn.commit()
        assert _values(client, topic_name) == [v.decode() for v in first]

        failed_over = False
        txn = client.new_transaction(timeout=300)
        producer = client.create_producer(topic_name, transaction=txn, send_timeout=0)
        try:
            for value in second:
                producer.send(value)
            restarts.append(broker.restart())
            producer.flush()
            producer.close()
            txn.commit()
        except PulsarError:  # in doubt (TransactionFailed), or a timeout: abort, write again
            failed_over = True
            with contextlib.suppress(PulsarError):
                producer.close()
            txn.abort()
            again = client.new_transaction(timeout=300)
            with client.create_producer(topic_name, transaction=again) as retry:
                for value in second:
                    retry.send(value)
                retry.flush()
            again.commit()
        got = _values(client, topic_name)
    record_property("restart_seconds", restarts)
    print(f"FIGURE txn_broker_restart: restarts={restarts} in_doubt_rewritten={failed_over}")
    assert got == [v.decode() for v in first + second]
