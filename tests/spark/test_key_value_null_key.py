"""A Spark KEY_VALUE write with keyValueEncoding=separated sends a null key as the Java
client does: no message key and ``null_partition_key`` set (the broker's stored entry)."""

from __future__ import annotations

from tests.support.admin import batch_items, examine_message
from tests.support.java_client import java_consume, key_value


def test_a_spark_separated_write_flags_null_keys(spark, apache_pulsar, topic_name) -> None:
    url = apache_pulsar.service_url
    rows = [("k1", "v1"), (None, "v2"), ("k3", "v3")]
    df = spark.createDataFrame(rows, "key string, value string")
    (
        df.coalesce(1).write.format("pulsar").mode("append").option("service.url", url)
        .option("topic", topic_name).option("keyValueEncoding", "separated").save()
    )  # fmt: skip
    headers, payload = examine_message(apache_pulsar.http_url, topic_name, 1)
    assert headers.get("X-Pulsar-num-batch-message") == "3"
    items = batch_items(payload)
    assert [i.null_partition_key for i in items] == [False, True, False]
    assert [i.partition_key_b64_encoded for i in items] == [True, False, True]
    got = java_consume(url, topic_name, key_value("STRING", "STRING", "SEPARATED"), 3)
    assert [m["value"] for m in got] == [
        {"key": "k1", "value": "v1"},
        {"key": None, "value": "v2"},
        {"key": "k3", "value": "v3"},
    ]
