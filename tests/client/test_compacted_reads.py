"""Compacted reads (``read_compacted``) on Apache Pulsar after a compaction triggered
through the admin API: the latest message per key up to the compaction horizon,
then every message after it; bounds, gaps and last ids on a compacted topic."""

from __future__ import annotations

import time

import pytest

from pulsar_spark.client import PulsarClient
from pulsar_spark.client.errors import ClientError
from tests.support.faults import unload
from tests.support.official import produce

KEYS = 6


def compact(admin, topic: str, attempts: int = 3, timeout: float = 40.0) -> None:
    """Trigger compaction of ``topic`` (persistent://public/default/...) and wait for it.

    The topic gets the stock retention (none) first: the fixture's brokers keep closed
    ledgers, and these tests are about a compacted topic whose trimmed ledgers the
    compacted one stands for.

    The broker compacts with its own Java consumer; once in a few thousand runs that
    consumer's seek between the two phases never completes and the compaction stays
    RUNNING for good. Compacting a few dozen messages takes well under a second, so a
    compaction still running after ``timeout`` is unloaded (a fresh topic object
    forgets it) and triggered again, ``attempts`` times in all."""
    admin.apply_retention(topic, minutes=0, size_mb=0)
    path = "persistent/" + topic.split("://", 1)[-1] + "/compaction"
    for attempt in range(attempts):
        if attempt:
            unload(admin, topic)
        admin.request("PUT", path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = admin.request("GET", path)
            if status["status"] == "SUCCESS":
                return
            if status["status"] == "ERROR":
                pytest.fail(f"compaction of {topic} failed: {status}")
            time.sleep(0.5)
    pytest.fail(
        f"compaction of {topic} did not finish within {timeout:g} s, {attempts} times "
        "(each retried after unloading the topic)"
    )


def keyed_history(rounds: int = 3) -> list[dict]:
    """``rounds`` values for each of KEYS keys, interleaved; key k5's last is a
    tombstone (an empty value: compaction deletes the key)."""
    out: list[dict] = []
    for r in range(rounds):
        for k in range(KEYS):
            value = f"k{k}-v{r}".encode()
            if k == KEYS - 1 and r == rounds - 1:
                value = b""
            out.append({"key": f"k{k}", "value": value})
    return out


def _rows(client: PulsarClient, topic: str) -> list[tuple[str | None, bytes]]:
    rows: list[tuple[str | None, bytes]] = []
    for batch in client.read_batches(topic):
        data = batch.to_pydict()
        rows += list(zip(data["key"], data["value"], strict=True))
    return [(None if k is None else bytes(k).decode(), bytes(v)) for k, v in rows]


@pytest.mark.parametrize("batching", [False, True])
def test_latest_per_key_then_everything_after(apache_pulsar, topic_name, batching) -> None:
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    history = [*keyed_history(), b"no-key-before"]
    produce(url, topic_name, history, batching=batching, batching_max_messages=4)
    compact(admin, topic_name)
    after = [{"key": "k0", "value": b"k0-after"}, b"no-key-after", {"key": "k9", "value": b"k9"}]
    produce(url, topic_name, after, batching=False)
    with PulsarClient(url, read_compacted=True) as client:
        got = _rows(client, topic_name)
        scanned = list(client.scan_ids(topic_name))
    with PulsarClient(url) as client:
        everything = _rows(client, topic_name)
    # Up to the horizon: each key's latest, no keyless message; after it: every message.
    # k5's last value is empty: a tombstone in a batch (Apache Pulsar 4.0 deletes the
    # key); alone, without the null_value flag (the Python client's empty value), the
    # broker counts the metadata as its size and keeps it as the key's latest.
    latest = [(f"k{k}", f"k{k}-v2".encode()) for k in range(KEYS - 1)]
    latest += [] if batching else [("k5", b"")]
    assert got == [*latest, ("k0", b"k0-after"), (None, b"no-key-after"), ("k9", b"k9")]
    assert len(scanned) == len(got)  # the id-level scan (admission control) counts the same
    assert len(everything) == len(history) + len(after)


def test_last_id_and_an_end_compaction_removed(apache_pulsar, topic_name) -> None:
    """The topic's last messages are keyless (compaction drops them): a compacted
    reader's last id is the compacted view's, and reads end there at once."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    ids = produce(url, topic_name, [*keyed_history(), b"no-key-1", b"no-key-2"], batching=False)
    compact(admin, topic_name)
    with PulsarClient(url, read_compacted=True, operation_timeout=60) as client:
        last = client.get_last_message_id(topic_name)
        assert str(last).startswith(ids[-3].rsplit(":", 2)[0])  # k5's tombstone
        began = time.monotonic()
        got = _rows(client, topic_name)
        assert time.monotonic() - began < 20  # no wait for an end that never comes
        assert [k for k, _ in got] == [f"k{k}" for k in range(KEYS)]
        # An explicit end at an id compaction removed (k0-v1) stops before what follows.
        upto = list(client.read_batches(topic_name, end=ids[KEYS]))
        assert sum(b.num_rows for b in upto) == 0  # k0..k5's latest all lie after it
    with PulsarClient(url) as client:
        assert str(client.get_last_message_id(topic_name)) == ids[-1]


def test_pulsar_lite_refuses_compacted_reads(pulsar_lite, topic_name) -> None:
    produce(pulsar_lite.service_url, topic_name, [{"key": "k", "value": b"v"}] * 3)
    with PulsarClient(pulsar_lite.service_url, read_compacted=True) as client:
        with pytest.raises(ClientError, match="no topic compaction") as caught:
            list(client.read_batches(topic_name))
        assert topic_name in str(caught.value)


def test_compaction_skips_are_not_losses(apache_pulsar, topic_name) -> None:
    """After compaction the original ledger is trimmed (retention 0): the compacted
    view still has its keys' latest values; a compacted read from an id in that
    ledger reports no loss, while a plain read rightly does."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    ids = produce(url, topic_name, [*keyed_history(), b"tail-1", b"tail-2"], batching=False)
    compact(admin, topic_name)  # drops the keyless tail
    path = "persistent/" + topic_name.split("://", 1)[-1]
    admin.unload(topic_name)  # a new ledger for what comes next
    later = produce(url, topic_name, [{"key": "k0", "value": b"k0-after"}], batching=False)
    first_ledger = int(ids[0].split(":")[0])
    assert int(later[0].split(":")[0]) > first_ledger
    admin.request("POST", f"{path}/trim")
    deadline = time.monotonic() + 60
    while any(
        ledger["ledgerId"] == first_ledger for ledger in admin.internal_stats(topic_name)["ledgers"]
    ):
        assert time.monotonic() < deadline, "the compacted ledger was not trimmed"
        time.sleep(0.5)
        admin.request("POST", f"{path}/trim")
    losses: list[tuple] = []
    start = ids[-4]  # k4-v2, the last value kept in the trimmed ledger but one
    with PulsarClient(url, read_compacted=True) as client:
        got = [
            (bytes(k).decode(), bytes(v))
            for b in client.read_batches(
                topic_name, start, missing_start=lambda *a: losses.append(a)
            )
            for k, v in zip(b.column("key").to_pylist(), b.column("value").to_pylist(), strict=True)
        ]
        assert got == [("k4", b"k4-v2"), ("k5", b""), ("k0", b"k0-after")]
        assert len(_rows(client, topic_name)) == KEYS + 1
        # From the keyless tail compaction dropped: the next entry lies in a later ledger.
        after = client.read_batches(topic_name, ids[-2], missing_start=lambda *a: losses.append(a))
        assert [bytes(v) for b in after for v in b.column("value").to_pylist()] == [b"k0-after"]
        # A stream resuming after the dropped tail finds the compacted view going on.
        assert client.entry_exists(topic_name, ids[-2])
    assert losses == []
    with PulsarClient(url) as client:
        plain = list(
            client.read_batches(topic_name, start, missing_start=lambda *a: losses.append(a))
        )
    assert sum(b.num_rows for b in plain) == 1 and len(losses) == 1  # k0-after; the rest is gone
    with PulsarClient(url) as client:
        assert not client.entry_exists(topic_name, ids[-2])  # gone from the plain view
