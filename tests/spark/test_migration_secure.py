"""A job copied from Databricks' or StreamNative's documentation runs unchanged on the secure
Apache broker: key-store TLS (a JKS trust store, a PKCS12 client key store), the token in
``pulsar.client.authParams``, ``admin.url`` and ``pulsar.admin.*`` (accepted, no effect),
Databricks' ``read_pulsar`` spellings (``serviceUrl``, ``pulsarClient...``)."""

from __future__ import annotations

import pytest

from tests.client.test_keystores import KEY_PASSWORD, TRUST_PASSWORD, make_stores
from tests.support.spark import assert_same_rows

JAVA_AUTH = "org.apache.pulsar.client.impl.auth."


@pytest.fixture(scope="module")
def stores(apache_pulsar_secure, tmp_path_factory):
    return make_stores(apache_pulsar_secure.secure, tmp_path_factory.mktemp("spark-stores"))


def test_databricks_options_write_and_read_over_key_store_tls(
    spark, apache_pulsar_secure, stores, topic_name
) -> None:
    broker = apache_pulsar_secure
    df = spark.createDataFrame(
        [(f"v{i}", f"k{i % 4}") for i in range(40)], "value string, key string"
    )
    write_options = {
        "service.url": broker.service_url,
        "topic": topic_name,
        "admin.url": broker.http_url,
        "pulsar.admin.authPluginClassName": JAVA_AUTH + "AuthenticationToken",
        "pulsar.admin.authParams": f"token:{broker.secure.superuser_token}",
        "pulsar.client.authPluginClassName": JAVA_AUTH + "AuthenticationKeyStoreTls",
        "pulsar.client.authParams": (
            f"keyStoreType:PKCS12,keyStorePath:{stores.client_p12},keyStorePassword:{KEY_PASSWORD}"
        ),
        "pulsar.client.useKeyStoreTls": "true",
        "pulsar.client.tlsTrustStoreType": "JKS",
        "pulsar.client.tlsTrustStorePath": stores.trust_jks,
        "pulsar.client.tlsTrustStorePassword": TRUST_PASSWORD,
        "pulsar.producer.blockIfQueueFull": "true",
    }
    df.write.format("pulsar").options(**write_options).mode("append").save()
    read_options = {
        "serviceUrl": broker.service_url,
        "topic": topic_name,
        "startingOffsets": "earliest",
        "failOnDataLoss": "true",
        "allowDifferentTopicSchemas": "false",
        "pulsarClientAuthPluginClassName": JAVA_AUTH + "AuthenticationToken",
        "pulsarClientAuthParams": f"token:{broker.secure.token}",
        "pulsarClientUseKeyStoreTls": "true",
        "pulsarClientTlsTrustStoreType": "PKCS12",
        "pulsarClientTlsTrustStorePath": stores.trust_p12,
        "pulsarClientTlsTrustStorePassword": TRUST_PASSWORD,
    }
    back = spark.read.format("pulsar").options(**read_options).load()
    assert_same_rows(back.selectExpr("cast(value as string) value", "cast(key as string) key"), df)
