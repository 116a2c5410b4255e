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
opens with its long tests; the tests of a :data:`TOGETHER` file as one, and so are the
tests of each :data:`PINNED` session broker, so that one worker runs it rather than
every worker its own), and the other tests fill the shares in collected order. Every
worker builds the same list from the same collection, as xdist requires. One process (no
``-n``) keeps the collected order.
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

#: Seconds each long test took (setup, call and teardown, 8 s or more; parameters in the node id
#: where a test has them), start to end in a CI run from a cold cache, beside the other workers
#: (so inflated by their load). A renamed test
#: only loses its place.
SECONDS: dict[str, int] = {
    "tests/spark/test_soak.py::test_soak_produce_consume_and_unload": 327,
    "tests/spark/test_stock_broker.py::test_a_subscription_expired_while_the_query_"
    "was_stopped_is_reported_as_loss": 199,
    "tests/test_packaging.py::test_the_main_job_runs_from_the_wheel_with_its_extras_"
    "in_a_new_venv": 167,
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.1.4]": 151,
    "tests/spark/test_faults_stream.py::test_a_broker_restart_under_a_running_query_"
    "loses_and_duplicates_nothing": 147,
    "tests/spark/test_pipeline.py::test_the_example_pipeline_reads_a_topic_into_a_"
    "materialized_view": 142,
    "tests/spark/test_stock_broker.py::test_a_driver_killed_mid_batch_and_restarted_"
    "after_the_inactivity_window": 126,
    "tests/spark/test_exactly_once.py::test_a_speculative_copy_wins_and_the_"
    "stragglers_rows_never_show": 117,
    "tests/spark/test_cluster.py::test_two_executors_write_read_and_stream": 116,
    "tests/spark/test_exactly_once.py::test_a_broker_killed_under_an_exactly_once_"
    "stream_leaves_each_row_once": 115,
    "tests/test_notebooks.py::test_the_notebooks_run_over_spark_connect": 113,
    "tests/spark/test_exactly_once.py::test_a_broker_restarted_mid_write_leaves_each_row_once": 111,
    "tests/test_notebooks.py::test_the_auth_notebook_on_apache_pulsar_with_a_secret_scope": 92,
    "tests/spark/test_exactly_once.py::test_a_speculative_copy_in_a_stream_leaves_"
    "the_stragglers_rows_out": 87,
    "tests/client/test_transactions.py::test_a_broker_restart_mid_transaction_leaves_"
    "each_row_once": 80,
    "tests/test_notebooks.py::test_the_notebooks_run_on_pulsar_lite": 79,
    "tests/spark/test_faults_batch.py::test_a_killed_python_worker_is_retried_with_exact_rows": 78,
    "tests/spark/test_stream_task_retry.py::test_a_retried_sink_task_writes_each_row_"
    "once_with_deduplication": 75,
    "tests/spark/test_exactly_once.py::test_a_driver_killed_before_the_job_commits_"
    "leaves_nothing_visible": 72,
    "tests/versions/test_spark_versions.py::test_smoke_set_passes_on_older_pyspark[4.0.5]": 71,
    "tests/spark/test_exactly_once.py::test_a_python_worker_killed_mid_write_leaves_"
    "nothing_twice": 71,
    "tests/spark/test_exactly_once.py::test_a_python_worker_killed_in_a_stream_"
    "leaves_nothing_twice": 63,
    "tests/spark/test_exactly_once.py::test_a_driver_killed_between_the_commit_and_"
    "the_commit_log_writes_nothing_twice": 62,
    "tests/spark/test_faults_stream.py::test_a_driver_killed_between_offset_and_"
    "commit_logs_replays_into_a_dedup_sink": 57,
    "tests/client/test_apache_fixtures.py::test_restart_keeps_acknowledged_data_and_the_ports": 53,
    "tests/spark/test_stress.py::test_random_stress_of_a_pattern_stream": 51,
    "tests/spark/test_faults_stream.py::test_a_killed_python_worker_in_a_stream_is_"
    "retried_with_exact_rows": 49,
    "tests/protocol/test_fuzz.py::test_fuzz_truncated_frames": 47,
    "tests/spark/test_auto_registration.py::test_a_fresh_session_finds_the_pulsar_"
    "format_without_registering[classic]": 45,
    "tests/spark/test_exactly_once.py::test_a_commit_its_driver_left_midway_is_"
    "finished_by_the_next_job": 45,
    "tests/spark/test_auto_registration.py::test_a_fresh_session_finds_the_pulsar_"
    "format_without_registering[connect]": 43,
    "tests/spark/test_credentials.py::test_a_bare_jwt_is_shown_by_spark_in_stream_"
    "plans_unless_redaction_names_it": 43,
    "tests/spark/test_stock_broker.py::test_a_stream_stopped_while_producers_write_"
    "and_leave_finds_everything[nonDurable]": 42,
    "tests/protocol/test_fuzz.py::test_fuzz_valid_prefix_then_garbage": 42,
    "tests/spark/test_schema_java_write.py::test_spark_writes_read_by_java_typed_consumers": 42,
    "tests/spark/test_connect.py::test_read_and_write_over_spark_connect": 41,
    "tests/spark/test_listeners.py::test_spark_writes_and_reads_through_the_named_listener": 41,
    "tests/client/test_links.py::test_a_5_mb_message_over_a_1_mbit_link_goes_once": 40,
    "tests/spark/test_schema_proto_write.py::test_java_consumers_read_what_spark_wrote": 40,
    "tests/spark/test_credentials.py::test_a_rejected_token_is_not_echoed_anywhere": 38,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/streaming.md]": 37,
    "tests/protocol/test_fuzz.py::test_fuzz_mutated_frames": 35,
    "tests/spark/peers/test_kafka_micro_batch.py::test_max_offsets_per_trigger_and_"
    "trigger_once": 35,
    "tests/spark/peers/test_sn_micro_batch.py::test_input_row_metrics": 35,
    "tests/spark/test_exactly_once.py::test_a_batch_write_is_committed_once_and_whole": 34,
    "tests/spark/test_subscription_prefix.py::test_prefix_authorization_serves_batch_"
    "and_stream_reads": 33,
    "tests/client/test_read_memory.py::test_a_read_of_large_messages_stays_within_"
    "its_budget[default]": 33,
    "tests/spark/test_migration_secure.py::test_databricks_options_write_and_read_"
    "over_key_store_tls": 32,
    "tests/spark/test_credentials.py::test_tokens_are_in_no_plan_progress_or_ui": 31,
    "tests/spark/test_schema_java.py::test_java_primitives_read_as_typed_columns": 28,
    "tests/spark/test_listeners.py::test_an_unknown_listener_name_fails_naming_it": 27,
    "tests/spark/test_listeners.py::test_a_listener_name_connects_through_that_"
    "listener[pulsar.client.listenerName]": 27,
    "tests/spark/peers/test_kafka_micro_batch.py::test_positions_are_kept_for_a_"
    "source_without_new_data": 26,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/batch.md]": 26,
    "tests/client/test_java_schemas.py::test_java_primitives_read_and_written_back_"
    "by_our_client": 25,
    "tests/columnar/test_smm_columns.py::test_hand_built_metadata_like_upb[steps]": 25,
    "tests/spark/test_stock_broker.py::test_a_stream_stopped_while_producers_write_"
    "and_leave_finds_everything[durable]": 25,
    "tests/spark/test_pushdown.py::test_spark_queries_give_the_same_rows_with_"
    "pushdown_on_and_off[lite]": 25,
    "tests/client/test_json_java_times.py::test_json_time_fields_byte_equal_to_the_"
    "java_client_and_read_by_its_pojo": 24,
    "tests/spark/test_stream_admission.py::test_a_micro_batch_waits_for_the_minimum_"
    "or_the_delay": 23,
    "tests/client/test_read_memory.py::test_a_read_of_large_messages_stays_within_"
    "its_budget[64MiB]": 23,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribing_by_name_from_"
    "latest_across_restarts_and_added_partitions": 22,
    "tests/spark/test_stream.py::test_an_aggregation_into_pulsar_is_pointed_to_"
    "foreach_batch_which_works": 22,
    "tests/spark/peers/test_sn_available_now.py::test_assign_from_latest_offsets_available_now": 22,
    "tests/client/test_links.py::test_a_5_mb_message_over_a_2_mbit_link_is_read": 21,
    "tests/docs/test_examples.py::test_the_page_examples_run[README.md]": 21,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/sinks.md]": 21,
    "tests/protocol/test_fuzz.py::test_fuzz_mutated_frame_parts": 21,
    "tests/spark/test_encryption_java.py::test_spark_reads_a_java_ec_encrypted_topic_"
    "batches_and_chunks": 21,
    "tests/spark/test_read.py::test_min_partitions_split_returns_the_same_rows[lite]": 21,
    "tests/spark/test_schema_java.py::test_java_key_value_topics_read_as_typed_key_and_value": 20,
    "tests/spark/test_readme_quick_start.py::test_the_readme_quick_start_runs_as_written": 20,
    "tests/spark/test_stream.py::test_without_deduplication_a_replay_duplicates": 20,
    "tests/spark/test_read.py::test_min_partitions_split_returns_the_same_rows[apache]": 20,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/getting-started.md]": 19,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/operations.md]": 19,
    "tests/spark/test_read_compacted.py::test_streams_of_the_compacted_view": 19,
    "tests/protocol/test_fuzz.py::test_fuzz_lying_sizes": 19,
    "tests/spark/test_stream.py::test_restart_from_the_checkpoint_reads_each_message_once": 19,
    "tests/spark/test_stream.py::test_a_stream_leaves_its_durable_subscription_and_only_that": 19,
    "tests/spark/test_listeners.py::test_a_listener_name_connects_through_that_"
    "listener[listenerName]": 18,
    "tests/columnar/test_smm_columns.py::test_hand_built_metadata_like_upb[each]": 18,
    "tests/spark/peers/test_kafka_micro_batch.py::test_stream_stream_self_join": 18,
    "tests/columnar/test_avro_decode.py::test_bit_flips_decode_or_raise_a_decode_error": 18,
    "tests/spark/test_stream_compat.py::test_a_query_goes_on_from_a_checkpoint_of_"
    "the_earlier_version": 18,
    "tests/spark/test_stream.py::test_pulsar_to_pulsar_is_effectively_once_with_deduplication": 17,
    "tests/spark/test_schema_apache_read.py::test_a_stream_planned_before_its_topic_"
    "had_a_schema_fails_when_it_gains_one": 17,
    "tests/protocol/test_fuzz.py::test_fuzz_garbage": 17,
    "tests/client/test_transactions.py::test_committed_messages_appear_at_once_and_"
    "aborted_ones_never": 17,
    "tests/spark/peers/test_sn_available_now.py::test_subscribing_topic_by_name_from_"
    "earliest_offsets_available_now": 17,
    "tests/spark/peers/test_sn_source.py::test_assign_from_latest_offsets": 17,
    "tests/spark/test_schema_java_write.py::test_java_pojo_topics_both_ways": 17,
    "tests/spark/test_streamnative_layout.py::test_a_write_routes_by_topic_column_"
    "and_keys_rows": 17,
    "tests/client/test_schemas.py::test_key_value_schema_and_messages_of_the_java_"
    "client[inline]": 16,
    "tests/columnar/test_avro_decode.py::test_every_truncation_raises_a_decode_error": 16,
    "tests/spark/test_read.py::test_split_boundaries_inside_chunked_messages_lose_"
    "nothing[lite]": 16,
    "tests/spark/test_stock_broker.py::test_partitions_added_and_a_pattern_topic_"
    "created_while_stopped": 15,
    "tests/spark/peers/test_sn_sink.py::test_streaming_aggregation_in_update_mode_"
    "through_foreach_batch": 15,
    "tests/columnar/test_encode_proto.py::test_random_messages_round_trip_to_protobufs_bytes": 15,
    "tests/spark/test_stock_broker.py::test_a_topic_deleted_and_created_again_mid_"
    "stream[false]": 15,
    "tests/spark/test_stock_broker.py::test_a_caught_up_stream_survives_an_unload_"
    "that_moves_its_subscription": 15,
    "tests/spark/peers/test_kafka_sink.py::test_streaming_write_with_topic_field": 14,
    "tests/columnar/test_avro_decode.py::test_decodes_as_fastavro_reads": 14,
    "tests/spark/test_schema_apache_read.py::test_key_value_topics_of_the_java_client[inline]": 14,
    "tests/spark/test_schema_java_write.py::test_java_time_fields_of_pojos": 14,
    "tests/spark/test_schema_java_write.py::test_spark_writes_into_a_java_key_value_topic": 14,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribing_by_pattern_from_"
    "earliest_across_restarts_and_added_partitions": 13,
    "tests/spark/peers/test_kafka_dont_fail_on_data_loss.py::test_fail_on_data_loss_"
    "false_stream_returns_no_duplicates": 13,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/lakehouse.md]": 13,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/migrating.md]": 13,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/schemas.md]": 13,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribe_by_pattern_with_"
    "topic_recreation_between_batches_fails": 13,
    "tests/spark/test_stream.py::test_a_named_query_streams_into_pulsar_and_a_batch_"
    "load_takes_a_list_of_topics": 13,
    "tests/spark/test_pushdown.py::test_spark_queries_give_the_same_rows_with_"
    "pushdown_on_and_off[apache]": 13,
    "tests/spark/test_stream.py::test_min_partitions_splits_every_micro_batch_and_"
    "reads_each_message_once": 13,
    "tests/spark/test_read.py::test_split_boundaries_inside_chunked_messages_lose_"
    "nothing[apache]": 13,
    "tests/client/test_schemas.py::test_key_value_schema_and_messages_of_the_java_"
    "client[separated]": 12,
    "tests/spark/peers/test_kafka_micro_batch.py::test_assign_from_specific_offsets_"
    "per_partition": 12,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribing_by_name_from_a_"
    "global_timestamp": 12,
    "tests/spark/peers/test_kafka_micro_batch.py::test_min_offsets_per_trigger_with_"
    "max_trigger_delay": 12,
    "tests/spark/peers/test_kafka_micro_batch.py::test_trigger_available_now_reads_"
    "what_was_there_in_batches": 12,
    "tests/columnar/test_items.py::test_entries_from_the_strategies_read_alike": 12,
    "tests/spark/test_schema_java.py::test_java_avro_v1_then_v2_read_in_v2_shape": 12,
    "tests/spark/test_streamnative_layout.py::test_a_stream_reads_and_writes_"
    "streamnative_columns": 12,
    "tests/docs/test_examples.py::test_the_page_examples_run[docs/guides/security.md]": 11,
    "tests/docs/test_site.py::test_the_site_builds_strictly": 11,
    "tests/spark/peers/test_sn_available_now.py::test_assign_from_time_available_now": 11,
    "tests/columnar/test_avro_resolution.py::test_reads_evolved_schemas_as_fastavro_does": 11,
    "tests/spark/peers/test_sn_source.py::test_subscribing_topic_by_name_from_earliest_offsets": 11,
    "tests/columnar/test_items.py::test_any_mix_of_entries_reads_like_the_exact_split": 11,
    "tests/spark/peers/test_kafka_micro_batch.py::test_records_with_null_keys_and_values": 11,
    "tests/spark/test_read_compacted.py::test_a_compaction_between_triggers_is_no_data_loss": 11,
    "tests/client/test_apache_secure.py::test_tls_connections_survive_many_auth_"
    "challenges_while_busy": 11,
    "tests/client/test_brokers.py::test_failed_test_report_carries_broker_log": 11,
    "tests/spark/test_schema_apache_read.py::test_key_value_topics_of_the_java_"
    "client[separated]": 11,
    "tests/spark/test_schema_json_java.py::test_spark_time_types_into_a_pojo_json_"
    "topic_read_by_java": 11,
    "tests/spark/test_schema_lite.py::test_a_typed_stream_into_a_typed_sink": 11,
    "tests/spark/test_stock_broker.py::test_a_topic_deleted_and_created_again_mid_stream[true]": 11,
    "tests/spark/test_stream_admission.py::test_bytes_bound_micro_batches_of_an_"
    "encrypted_topic_as_of_a_plain_one": 11,
    "tests/client/test_links.py::test_a_stalled_write_fails_within_the_operation_timeout": 10,
    "tests/spark/test_stock_broker.py::test_a_stream_keeps_up_while_ledgers_roll_and_"
    "are_trimmed": 10,
    "tests/columnar/test_smm_columns.py::test_many_varints_like_upb[each]": 10,
    "tests/protocol/test_select_properties.py::test_select_matches_reference_model": 10,
    "tests/spark/peers/test_kafka_micro_batch.py::test_composite_read_limit": 10,
    "tests/spark/peers/test_sn_available_now.py::test_subscribing_topic_by_pattern_"
    "from_specific_offsets_available_now": 10,
    "tests/spark/peers/test_sn_micro_batch.py::test_stream_stream_self_join": 10,
    "tests/spark/peers/test_sn_source.py::test_subscribing_topic_by_pattern_from_"
    "specific_offsets": 10,
    "tests/spark/peers/test_sn_source.py::test_batched_non_batched_and_mixed_messages": 10,
    "tests/client/test_encryption_interop.py::test_the_java_consumer_decrypts_ours_"
    "with_ec_keys[single]": 10,
    "tests/spark/test_schema_proto_write.py::test_a_dataframe_that_does_not_fit_"
    "fails_before_sending": 10,
    "tests/spark/test_schema_proto_write.py::test_key_value_topics_with_a_protobuf_value_half": 10,
    "tests/spark/test_options.py::test_bad_options_through_spark_name_the_option": 10,
    "tests/spark/test_projection.py::test_a_read_with_some_columns_yields_those": 10,
    "tests/spark/test_stream_admission.py::test_bytes_and_rows_bound_each_micro_"
    "batch_and_available_now_ignores_the_minimum": 10,
    "tests/spark/test_stream_admission.py::test_lag_per_partition_and_in_total_shows_"
    "in_progress": 10,
    "tests/spark/test_subscription_prefix.py::test_every_subscription_of_a_query_"
    "carries_the_prefix": 10,
    "tests/spark/peers/test_kafka_micro_batch.py::test_subscribing_topics_from_topic_"
    "level_offsets": 9,
    "tests/spark/peers/test_kafka_micro_batch.py::test_min_partitions": 9,
    "tests/client/test_stock_lifecycle.py::test_a_durable_subscription_holds_the_"
    "data_while_away": 9,
    "tests/spark/peers/test_sn_source.py::test_typed_stream[boolean]": 9,
    "tests/columnar/test_json_decode_jackson.py::test_any_jackson_shaped_batch_reads_"
    "as_the_per_value_path": 9,
    "tests/spark/test_schema_java_write.py::test_spark_time_values_written_to_java_time_topics": 9,
    "tests/client/test_encryption_interop.py::test_the_java_consumer_decrypts_ours_"
    "with_ec_keys[batched]": 9,
    "tests/spark/test_schema_proto.py::test_a_user_given_protobuf_schema_on_pulsar_lite": 9,
    "tests/spark/test_schema_proto.py::test_a_stream_fails_on_a_version_that_retypes_a_field": 9,
    "tests/spark/test_stream.py::test_max_records_per_trigger_bounds_every_micro_batch": 9,
    "tests/spark/test_stream.py::test_new_partitions_join_the_stream": 9,
    "tests/client/test_reader.py::test_an_abandoned_chunked_message_does_not_stall_a_"
    "read_past_it[lite]": 9,
    "tests/spark/test_stream.py::test_truncated_messages_fail_the_stream": 9,
    "tests/client/test_reader.py::test_an_abandoned_chunked_message_does_not_stall_a_"
    "read_past_it[apache]": 9,
    "tests/spark/test_stream.py::test_truncated_messages_are_skipped_without_fail_on_data_loss": 9,
    "tests/spark/test_read.py::test_partitioned_topic_and_a_list_of_topics[lite]": 9,
    "tests/spark/test_read.py::test_offsets_per_partition[lite]": 9,
    "tests/spark/test_key_value_null_key.py::test_a_spark_separated_write_flags_null_keys": 9,
    "tests/spark/peers/test_kafka_dont_fail_on_data_loss.py::test_fail_on_data_loss_"
    "false_batch_returns_no_duplicates": 8,
    "tests/protocol/test_properties.py::test_frames_round_trip_through_messages": 8,
    "tests/spark/peers/test_kafka_micro_batch.py::test_watermark_on_the_publish_time": 8,
    "tests/spark/peers/test_kafka_sink.py::test_streaming_write_with_topic_option": 8,
    "tests/spark/peers/test_kafka_source_stress.py::test_stress_with_multiple_topics_"
    "and_partitions": 8,
    "tests/client/test_transactions.py::test_we_read_the_java_clients_transactional_writes": 8,
    "tests/spark/peers/test_sn_jobs.py::test_a_stream_of_keys_and_values_into_a_"
    "topic_named_by_the_option": 8,
    "tests/spark/peers/test_sn_micro_batch.py::test_subscribe_topic_by_pattern_with_"
    "topic_recreation_between_batches": 8,
    "tests/columnar/test_items.py::test_zero_heavy_payloads_and_long_metadata_read_"
    "like_the_exact_split": 8,
    "tests/columnar/test_schema_json.py::test_reads_what_the_avro_decoder_reads": 8,
    "tests/client/test_apache_only.py::test_a_read_under_an_unload_storm_loses_and_"
    "repeats_nothing": 8,
    "tests/client/test_apache_secure.py::test_expiring_tokens_are_refreshed_through_"
    "auth_challenge": 8,
    "tests/spark/test_schema_java_write.py::test_non_finite_doubles_in_json_values_read_by_java": 8,
    "tests/client/test_encryption_producer.py::test_the_java_consumer_decrypts_our_"
    "ec_encrypted_chunks_and_batches": 8,
    "tests/spark/test_schema_proto.py::test_a_stream_reads_the_struct": 8,
    "tests/client/test_links.py::test_a_slow_write_is_not_taken_for_a_lost_receipt": 8,
    "tests/spark/test_schema_proto_write.py::test_protobuf_schema_writes_and_reads_"
    "on_pulsar_lite": 8,
    "tests/client/test_null_partition_key.py::test_null_key_value_keys_reach_the_"
    "broker_flagged_and_java_reads_them_null[True]": 8,
    "tests/spark/test_read.py::test_partitioned_topic_and_a_list_of_topics[apache]": 8,
    "tests/spark/test_oauth2_oidc.py::test_streams_outlive_three_token_expiries_answering_"
    "each_challenge_in_place": 110,
    "tests/spark/test_kerberos.py::test_a_ticket_expired_mid_stream_is_obtained_again_"
    "from_the_keytab": 55,
    "tests/spark/test_oauth2_oidc.py::test_spark_writes_reads_and_streams_with_tokens_"
    "the_broker_checked": 30,
    "tests/spark/test_kerberos.py::test_spark_writes_reads_and_streams_as_a_kerberos_"
    "principal[keytab]": 15,
    "tests/spark/test_cluster_auth.py::test_the_driver_and_each_executor_authenticate_"
    "on_their_own": 60,
}

#: Files whose tests run in one worker, with the seconds all of them take (0: the sum of
#: their :data:`SECONDS`): the first version test starts the background smoke
#: runs that all of them wait for (``tests/versions/conftest.py``), in the worker it runs in;
#: the conformance set starts a broker of each Pulsar line (``apache_line``), once.
TOGETHER: dict[str, int] = {
    "tests/versions/test_spark_versions.py": 222,
    "tests/lines/test_conformance.py": 345,
    # A module-scoped fixture each worker would make again: a broker of its own, 1 GB of
    # messages, a matrix of Java-encrypted topics, key stores and their broker, a wheel.
    "tests/spark/test_listeners.py": 0,
    "tests/client/test_read_memory.py": 0,
    "tests/client/test_encryption_interop.py": 0,
    "tests/client/test_keystores.py": 0,
    "tests/test_packaging.py": 0,
}
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
        whole = TOGETHER.get(unit[0].nodeid.split("::", 1)[0], 0) if unit else 0
        return max(whole, sum(SECONDS.get(i.nodeid, UNMEASURED) for i in unit))

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
