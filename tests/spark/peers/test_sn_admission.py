"""StreamNative pulsar-spark's ``PulsarAdmissionControlSuite`` (release 3.4.1.3), translated:
``maxBytesPerTrigger`` counts payload bytes here (theirs: stored entry sizes through the admin
API, ~50 bytes for a small integer), so each message here is an integer padded to 50 bytes
and a budget of ``k * 50`` bytes admits ``k`` messages. Their helper's unit tests (the first
entry of a ledger, an entry in the middle, an invalid admin config for the helper) test an
admin-API class this connector does not have.
"""

from __future__ import annotations

from tests.spark.peers.support import byte_budget, check, send, send_to_partitions, wait_until

SIZE = 50


def _padded(values) -> list[str]:
    return [f"{v:0{SIZE}d}" for v in values]


def test_last_batch_where_a_message_is_larger_than_max_bytes(pulsar_lite, topic_name, streams):
    """StreamNative PulsarAdmissionControlSuite: 'Check last batch where message size is
    greater than maxBytesPerTrigger': at most 3 messages a micro-batch, and the larger one
    in a micro-batch of its own."""
    url = pulsar_lite.service_url
    send(url, topic_name, _padded([1, 2, 3]))
    send(url, topic_name, [*_padded([4, 5, 6, 7, 8]), f"{9:0{4 * SIZE}d}"])
    stream = byte_budget(streams, url, 3 * SIZE, topic=topic_name, failOnDataLoss="true")
    stream.run()
    sizes = stream.batch_sizes()
    assert all(size <= 3 for size in sizes) and sizes[-1] == 1, sizes
    assert stream.batches[max(stream.batches)] == [(9,)]  # the large one, alone
    check(stream, range(1, 10))


def test_admission_control_for_multiple_topics(pulsar_lite, topic_name, streams) -> None:
    """StreamNative PulsarAdmissionControlSuite: 'Admission Control for multiple topics'."""
    url = pulsar_lite.service_url
    first, second = f"{topic_name}-1", f"{topic_name}-2"
    send(url, first, _padded([1, 2, 3]))
    send(url, second, _padded(range(4, 10)))
    stream = byte_budget(streams, url, 4 * SIZE, topics=f"{first},{second}")
    stream.run()
    assert all(size <= 4 for size in stream.batch_sizes()), stream.batch_sizes()
    check(stream, range(1, 10))


def test_admission_control_for_concurrent_topic_writes(pulsar_lite, topic_name, streams):
    """StreamNative PulsarAdmissionControlSuite: 'Admission Control for concurrent topic
    writes': the same messages written to both topics while the query runs."""
    url = pulsar_lite.service_url
    first, second = f"{topic_name}-1", f"{topic_name}-2"
    stream = byte_budget(streams, url, 4 * SIZE, topics=f"{first},{second}")
    send(url, first, _padded([0]))
    send(url, second, _padded([0]))
    stream.start(processingTime="100 milliseconds")
    for values in ([1, 2, 3], range(4, 10)):
        send(url, first, _padded(values))
        send(url, second, _padded(values))
    wait_until(lambda: len(stream.values()) == 20, 60, "every message")
    stream.stop()
    assert all(size <= 4 for size in stream.batch_sizes()), stream.batch_sizes()
    check(stream, [*range(10), *range(10)])


def test_admission_control_with_topic_partitions_and_one_added(
    apache_pulsar, topic_name, streams
) -> None:
    """StreamNative PulsarAdmissionControlSuite: 'Admission Control with one
    topic-partition', 'Admission Control with multiple topic-partitions' and 'Add
    topic-partition after starting stream': a topic of one partition, grown to two while the
    query runs; no micro-batch beyond the budget."""
    url, admin = apache_pulsar.service_url, apache_pulsar.admin
    admin.create_partitioned_topic(topic_name, 1)
    stream = byte_budget(streams, url, 3 * SIZE, topic=topic_name, failOnDataLoss="true")
    stream.start(processingTime="100 milliseconds")
    send_to_partitions(url, topic_name, {0: _padded([1, 2, 3, 4])})
    wait_until(lambda: len(stream.values()) == 4, 60, "partition 0's messages")
    admin.update_partitions(topic_name, 2)
    send_to_partitions(url, topic_name, {0: _padded([9]), 1: _padded([5, 6, 7, 8])})
    wait_until(lambda: len(stream.values()) == 9, 60, "partition 1's messages")
    stream.stop()
    assert all(size <= 3 for size in stream.batch_sizes()), stream.batch_sizes()
    check(stream, range(1, 10))


def test_admin_configuration_is_accepted_and_needs_no_admin(pulsar_lite, topic_name, streams):
    """StreamNative PulsarAdmissionControlSuite: 'Set invalid configuration for PulsarAdmin in
    stream options': theirs refuses an unknown ``pulsar.admin.*`` key; here every
    ``pulsar.admin.*`` key and ``admin.url`` are accepted with a warning, since the connector
    needs no admin API, and the limit holds without one."""
    url = pulsar_lite.service_url
    send(url, topic_name, _padded(range(6)))
    stream = byte_budget(
        streams,
        url,
        3 * SIZE,
        topic=topic_name,
        **{"admin.url": "http://localhost:1", "pulsar.admin.INVALID": "INVALID"},
    )
    stream.run()
    assert stream.batch_sizes() == [3, 3]
    check(stream, range(6))
