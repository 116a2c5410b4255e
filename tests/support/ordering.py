"""How the xdist workers share the 2-core machine: the order they run the suite in, and the
CPU slots they take turns in.

**Slots.** The README runs ``pytest -n 3`` on 2 cores. A test takes one of
:func:`slot_count` slots for its whole run, setup and teardown included, and a worker whose
test finds them all taken waits for one, in turn; a test marked ``waits`` (a subscription to
expire on the stock broker's clock, a throttled link, the soak's paced producer) takes none.
There is one slot more than cores: sampled, the process tree of a test that computes (a
Spark query, a broker's start, Hypothesis) keeps 0.75 to 0.95 of a core busy, not a whole
one (brokers' round trips, Spark's scheduling). With a slot per core a fifth of the CPU
idled (20% of 10 s samples over a run) and the run took 1,638 s; with one more, 9% and
1,151 s. ``PULSAR_SPARK_TEST_SLOTS`` sets the count.
The slots (and the queue for them) are file locks in a folder named by the run (xdist's
``PYTEST_XDIST_TESTRUNUID``): a worker that dies lets go of its locks with its process.
Without xdist nothing is locked.

**Order.** ``--dist worksteal`` hands worker *i* of *k* the next ``len(left) // (k - i)``
tests of the collected list (contiguous shares), then lets a worker that runs dry take half
of the longest queue's tail. A test of minutes at the end of a share keeps one worker busy
while the others have nothing left to take. So, under xdist, the collected list is built
as *k* shares of exactly those sizes: the ``waits`` tests open the first share, the tests
in :data:`SECONDS` go to the share with the least work so far, longest first (each share
opens with its long tests; the tests of a :data:`TOGETHER` file as one), and the other
tests fill the shares in collected order. Every worker builds the same list from the same
collection, as xdist requires. One process (no ``-n``) keeps the collected order.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

__all__ = ["SECONDS", "slot_count"]

#: Seconds each long test took (setup and call, 12 s or more; parameters in the node id
#: where a test has them), measured with ``--durations=0`` in a CI run. A renamed test
#: only loses its place.
SECONDS: dict[str, int] = {
    "tests/spark/test_soak.py::test_soak_produce_consume_and_unload": 316,
    "tests/test_packaging.py::test_the_main_job_runs_from_the_wheel_with_its_extras_in_a_new_"
    "venv": 120,
    "tests/spark/test_auto_registration.py::test_a_fresh_session_finds_the_pulsar_format_"
    "without_registering[classic]": 60,
    "tests/spark/test_auto_registration.py::test_a_fresh_session_finds_the_pulsar_format_"
    "without_registering[connect]": 60,
    "tests/spark/test_pipeline.py::test_the_example_pipeline_reads_a_topic_into_a_"
    "materialized_view": 50,
    "tests/spark/test_stock_broker.py::test_a_driver_killed_mid_batch_and_restarted_after_the_"
    "inactivity_window": 142,
    "tests/test_notebooks.py::test_the_notebooks_run_over_spark_connect": 114,
    "tests/spark/test_stock_broker.py::test_a_subscription_expired_while_the_query_was_stopped_is_"
    "reported_as_loss": 114,
    "tests/spark/test_faults_stream.py::test_a_broker_restart_under_a_running_query_loses_and_"
    "duplicates_nothing": 110,
    "tests/test_notebooks.py::test_the_notebooks_run_on_pulsar_lite": 101,
    "tests/spark/test_stream_task_retry.py::test_a_retried_sink_task_writes_each_row_once_with_"
    "deduplication": 96,
    "tests/spark/test_cluster.py::test_two_executors_write_read_and_stream": 93,
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.0.5]": 73,
    "tests/spark/test_faults_stream.py::test_a_driver_killed_between_offset_and_commit_logs_"
    "replays_into_a_dedup_sink": 66,
    "tests/test_notebooks.py::test_the_auth_notebook_on_apache_pulsar_with_a_secret_scope": 60,
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.2.1]": 60,
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.1.4]": 57,
    "tests/spark/test_listeners.py::test_spark_writes_and_reads_through_the_named_listener": 56,
    "tests/spark/test_faults_stream.py::test_a_killed_python_worker_in_a_stream_is_retried_with_"
    "exact_rows": 51,
    "tests/spark/peers/test_kafka_dont_fail_on_data_loss.py::test_fail_on_data_loss_false_batch_"
    "returns_no_duplicates": 49,
    "tests/protocol/test_fuzz.py::test_fuzz_mutated_frames": 48,
    "tests/client/test_apache_fixtures.py::test_restart_keeps_acknowledged_data_and_the_ports": 44,
    "tests/spark/test_stress.py::test_random_stress_of_a_pattern_stream": 42,
    "tests/spark/test_connect.py::test_read_and_write_over_spark_connect": 41,
    "tests/client/test_links.py::test_a_5_mb_message_over_a_1_mbit_link_goes_once": 40,
    "tests/spark/test_credentials.py::test_a_bare_jwt_is_shown_by_spark_in_stream_plans_unless_"
    "redaction_names_it": 32,
    "tests/protocol/test_fuzz.py::test_fuzz_truncated_frames": 32,
    "tests/spark/test_faults_batch.py::test_a_killed_python_worker_is_retried_with_exact_rows": 31,
    "tests/spark/test_stock_broker.py::test_a_stream_keeps_up_while_ledgers_roll_and_are_"
    "trimmed": 26,
    "tests/spark/test_credentials.py::test_a_rejected_token_is_not_echoed_anywhere": 26,
    "tests/client/test_apache_secure.py::test_the_system_trust_store_does_not_know_the_test_ca": 25,
    "tests/spark/test_stream_admission.py::test_a_micro_batch_waits_for_the_minimum_or_the_"
    "delay": 23,
    "tests/spark/test_subscription_prefix.py::test_prefix_authorization_serves_batch_and_stream_"
    "reads": 22,
    "tests/spark/test_stream.py::test_pulsar_to_pulsar_is_effectively_once_with_deduplication": 22,
    "tests/spark/test_credentials.py::test_tokens_are_in_no_plan_progress_or_ui": 20,
    "tests/client/test_links.py::test_a_5_mb_message_over_a_2_mbit_link_is_read": 20,
    "tests/spark/peers/test_kafka_micro_batch.py::test_positions_are_kept_for_a_source_without_"
    "new_data": 19,
    "tests/spark/peers/test_kafka_micro_batch.py::test_max_offsets_per_trigger_and_trigger_"
    "once": 19,
    "tests/spark/test_stock_broker.py::test_a_stream_stopped_while_producers_write_and_leave_"
    "finds_everything[nonDurable]": 18,
    "tests/spark/test_stock_broker.py::test_a_stream_stopped_while_producers_write_and_leave_"
    "finds_everything[durable]": 18,
    "tests/spark/test_schema_java.py::test_java_primitives_read_as_typed_columns": 18,
    "tests/protocol/test_fuzz.py::test_fuzz_mutated_frame_parts": 18,
    "tests/spark/test_schema_proto_write.py::test_java_consumers_read_what_spark_wrote": 17,
    "tests/spark/test_read_compacted.py::test_streams_of_the_compacted_view": 17,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribing_by_name_from_latest_across_"
    "restarts_and_added_partitions": 17,
    "tests/spark/test_schema_java_write.py::test_spark_writes_read_by_java_typed_consumers": 16,
    "tests/spark/test_listeners.py::test_a_listener_name_connects_through_that_"
    "listener[listenerName]": 16,
    "tests/spark/test_schema_java_write.py::test_java_pojo_topics_both_ways": 15,
    "tests/spark/test_schema_java.py::test_java_key_value_topics_read_as_typed_key_and_value": 15,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribing_by_pattern_from_earliest_"
    "across_restarts_and_added_partitions": 15,
    "tests/protocol/test_fuzz.py::test_fuzz_valid_prefix_then_garbage": 15,
    "tests/spark/test_stream.py::test_an_aggregation_into_pulsar_is_pointed_to_foreach_batch_"
    "which_works": 14,
    "tests/spark/peers/test_kafka_micro_batch.py::test_records_with_null_keys_and_values": 13,
    "tests/client/test_schemas.py::test_key_value_schema_and_messages_of_the_java_"
    "client[separated]": 13,
    "tests/spark/test_stock_broker.py::test_partitions_added_and_a_pattern_topic_created_while_"
    "stopped": 12,
    "tests/spark/test_schema_java.py::test_java_avro_v1_then_v2_read_in_v2_shape": 12,
    "tests/spark/test_schema_apache_read.py::test_a_stream_planned_before_its_topic_had_a_schema_"
    "fails_when_it_gains_one": 12,
    "tests/spark/peers/test_sn_available_now.py::test_assign_from_latest_offsets_available_now": 12,
    "tests/protocol/test_fuzz.py::test_fuzz_lying_sizes": 12,
    "tests/client/test_read_memory.py::test_a_read_of_large_messages_stays_within_its_"
    "budget[64MiB]": 12,
    "tests/client/test_java_schemas.py::test_java_primitives_read_and_written_back_by_our_"
    "client": 12,
}

#: Files whose tests run in one worker: the first version test starts the background smoke
#: runs that all of them wait for (``tests/versions/conftest.py``), in the worker it runs in;
#: the conformance set starts a broker of each Pulsar line (``apache_line``), once.
TOGETHER = ("tests/versions/test_spark_versions.py", "tests/lines/test_conformance.py")
#: Session brokers run by one worker only: every test that uses one is in the same share
#: (a broker per worker would cost a start, ~10 s of CPU, and its idle load for the run).
#: The plain broker, which most Apache tests use, runs in every worker.
PINNED = ("apache_pulsar_txn", "apache_pulsar_stock", "apache_pulsar_dedup", "apache_pulsar_secure")
#: Seconds a test not in :data:`SECONDS` counts for (most take well under one).
UNMEASURED = 1
#: The marker of a test that mostly waits (registered in ``pyproject.toml``).
WAITS = "waits"
#: Seconds between two tries for a slot.
POLL = 0.05


def slot_count() -> int:
    """How many tests not marked ``waits`` run at once: ``PULSAR_SPARK_TEST_SLOTS``, or
    one more than the machine's cores (see the module docstring)."""
    configured = os.environ.get("PULSAR_SPARK_TEST_SLOTS")
    return max(1, int(configured) if configured else (os.cpu_count() or 1) + 1)


def _waits(item: pytest.Item) -> bool:
    return item.get_closest_marker(WAITS) is not None


def _pinned(item: pytest.Item) -> str | None:
    """The first :data:`PINNED` broker fixture ``item`` uses, if any: by name, or through
    ``request.getfixturevalue`` of a parameter (a fixture's name, or an object whose
    ``broker`` is a kind such as ``apache-txn``: a documentation page)."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec is not None else ():
        kind = getattr(value, "broker", None)
        if isinstance(value, str):
            names.add(value)
        elif isinstance(kind, str) and kind.startswith("apache-"):
            names.add("apache_pulsar_" + kind.split("-", 1)[1])
    return next((name for name in PINNED if name in names), None)


def _share_sizes(total: int, workers: int) -> list[int]:
    sizes = []
    for i in range(workers):
        sizes.append(total // (workers - i))
        total -= sizes[-1]
    return sizes


def _shares(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    sizes = _share_sizes(len(items), workers)
    waiting = sorted((i for i in items if _waits(i)), key=lambda i: -SECONDS.get(i.nodeid, 0))
    # Units placed whole: the tests of a TOGETHER file, in their order; the tests of each
    # PINNED broker (in the waits share when a waits test needs it too); long tests.
    units: dict[str, list[pytest.Item]] = {}
    for item in items:
        if _waits(item):
            continue
        path = item.nodeid.split("::", 1)[0]
        pinned = _pinned(item)
        if path in TOGETHER:
            units.setdefault(path, []).append(item)
        elif pinned is not None:
            units.setdefault(pinned, []).append(item)
        elif item.nodeid in SECONDS:
            units[item.nodeid] = [item]
    with_waits = {_pinned(i) for i in waiting} - {None}

    def cost(unit: list[pytest.Item]) -> int:
        return sum(SECONDS.get(i.nodeid, UNMEASURED) for i in unit)

    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    shares[0].extend(waiting)
    # The waits share's worker is busy with them, but they hold no slot: half their time.
    work = [cost(waiting) // 2] + [0] * (workers - 1)
    for key, unit in sorted(units.items(), key=lambda u: -cost(u[1])):
        roomy = [s for s in range(workers) if len(shares[s]) + len(unit) <= sizes[s]]
        share = 0 if key in with_waits and 0 in roomy else min(roomy, key=lambda s: work[s])
        shares[share].extend(unit)
        work[share] += cost(unit)
    placed = {id(i) for share in shares for i in share}
    rest = iter(i for i in items if id(i) not in placed)
    for share, size in zip(shares, sizes, strict=True):
        while len(share) < size:
            share.append(next(rest))
    return [item for share in shares for item in share]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist, the shares described in the module docstring."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if "PYTEST_XDIST_WORKER" not in os.environ or workers < 1:
        return
    items[:] = _shares(items, workers)


@contextlib.contextmanager
def _slot(folder: Path, count: int) -> Iterator[None]:
    """Hold one of ``count`` slots. Workers wanting one queue on a lock first: without it, a
    worker that just let go of its slot takes it back for its next test within a
    millisecond, and a worker polling for one could wait for the whole run."""
    folder.mkdir(parents=True, exist_ok=True)
    queue = os.open(folder / "queue", os.O_CREAT | os.O_RDWR, 0o600)
    held = None
    try:
        fcntl.flock(queue, fcntl.LOCK_EX)  # blocks: the next in line
        while held is None:
            for n in range(count):
                fd = os.open(folder / f"slot-{n}", os.O_CREAT | os.O_RDWR, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                held = fd
                break
            else:
                time.sleep(POLL)
    finally:
        os.close(queue)  # and its lock: the next in line polls now
    try:
        yield
    finally:
        os.close(held)  # and its lock


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """A test not marked ``waits`` runs holding a slot (under xdist)."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or _waits(item):
        return (yield)
    folder = Path(tempfile.gettempdir()) / f"pulsar-spark-slots-{run}"
    with _slot(folder, slot_count()):
        return (yield)
