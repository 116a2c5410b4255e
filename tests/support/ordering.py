"""The order two xdist workers run the suite in: the longest tests first.

``pytest -n 2 --dist worksteal`` hands each worker half of the collected list and lets a
worker that runs dry take the tail of the other's. A test of minutes left for the end
keeps one worker busy while the other has nothing left to take, so the run lasts that
much longer. Under xdist, the tests in :data:`LONGEST` (each took 40 s or more on the
2-core CI machine; longest first) go to the front, where one worker runs them while the
other takes the short ones, and the last tests of the run are short on both. One process
(no ``-n``) keeps the collected order.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["LONGEST"]

#: Node ids (parameters included where a test has them), longest first; measured with
#: ``--durations=0`` on the CI machine. A renamed test only loses its place.
LONGEST: tuple[str, ...] = (
    "tests/spark/test_faults_stream.py::test_a_broker_restart_under_a_running_query_loses_"
    "and_duplicates_nothing",
    "tests/spark/test_stock_broker.py::test_a_driver_killed_mid_batch_and_restarted_after_"
    "the_inactivity_window",
    "tests/test_notebooks.py::test_the_notebooks_run_over_spark_connect",
    "tests/spark/test_soak.py::test_soak_produce_consume_and_unload",
    "tests/spark/test_cluster.py::test_two_executors_write_read_and_stream",
    "tests/test_notebooks.py::test_the_notebooks_run_on_pulsar_lite",
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.0.5]",
    "tests/spark/test_listeners.py::test_spark_writes_and_reads_through_the_named_listener",
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.1.4]",
    "tests/spark/test_stream_task_retry.py::test_a_retried_sink_task_writes_each_row_once_"
    "with_deduplication",
    "tests/spark/test_faults_stream.py::test_a_driver_killed_between_offset_and_commit_logs_"
    "replays_into_a_dedup_sink",
    "tests/test_notebooks.py::test_the_auth_notebook_on_apache_pulsar_with_a_secret_scope",
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.2.1]",
    "tests/spark/test_stock_broker.py::test_a_subscription_expired_while_the_query_was_"
    "stopped_is_reported_as_loss",
    "tests/spark/peers/test_kafka_dont_fail_on_data_loss.py::test_fail_on_data_loss_false_"
    "stream_returns_no_duplicates",
    "tests/spark/test_connect.py::test_read_and_write_over_spark_connect",
    "tests/protocol/test_fuzz.py::test_fuzz_mutated_frames",
    "tests/protocol/test_fuzz.py::test_fuzz_truncated_frames",
    "tests/spark/test_faults_batch.py::test_a_killed_python_worker_is_retried_with_exact_rows",
    "tests/spark/test_options.py::test_bad_options_through_spark_name_the_option",
    "tests/spark/test_stress.py::test_random_stress_of_a_pattern_stream",
    "tests/spark/test_credentials.py::test_tokens_are_in_no_plan_progress_or_ui",
    "tests/client/test_apache_fixtures.py::test_restart_keeps_acknowledged_data_and_the_ports",
    "tests/spark/test_credentials.py::test_a_rejected_token_is_not_echoed_anywhere",
    "tests/spark/test_faults_stream.py::test_a_killed_python_worker_in_a_stream_is_retried_"
    "with_exact_rows",
    "tests/spark/test_subscription_prefix.py::test_prefix_authorization_serves_batch_and_"
    "stream_reads",
    "tests/spark/test_readme_quick_start.py::test_the_readme_quick_start_runs_as_written",
    "tests/spark/test_schema_java_write.py::test_spark_writes_read_by_java_typed_consumers",
    "tests/protocol/test_fuzz.py::test_fuzz_mutated_frame_parts",
    "tests/spark/test_stock_broker.py::test_partitions_added_and_a_pattern_topic_created_"
    "while_stopped",
    "tests/client/test_links.py::test_a_5_mb_message_over_a_1_mbit_link_goes_once",
)

_RANK = {node: rank for rank, node in enumerate(LONGEST)}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under xdist, the :data:`LONGEST` tests first, longest first; the rest as collected
    (every worker sorts the same list the same way, as xdist requires)."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    last = len(LONGEST)
    items.sort(key=lambda item: _RANK.get(item.nodeid, last))
