"""Spark over TLS with authentication, in the option spellings StreamNative users have
(Apache Pulsar with TLS, tokens and authorization: ``apache_pulsar_secure``)."""

from __future__ import annotations

import pytest

from tests.support.spark import assert_same_rows

JAVA_AUTH = "org.apache.pulsar.client.impl.auth."


def _options(broker, **extra: str) -> dict[str, str]:
    sec = broker.secure
    return {
        "service.url": broker.service_url,
        "pulsar.client.authPluginClassName": JAVA_AUTH + "AuthenticationToken",
        "pulsar.client.authParams": f"token:{sec.token}",
        "pulsar.client.tlsTrustCertsFilePath": sec.ca_cert,
        "pulsar.client.tlsHostnameVerificationEnable": "true",
        **extra,
    }


def test_token_and_tls_both_ways(spark, apache_pulsar_secure, topic_name, tmp_path) -> None:
    broker = apache_pulsar_secure
    df = spark.createDataFrame(
        [(f"v{i}", f"k{i % 3}") for i in range(50)], "value string, key string"
    )
    df.write.format("pulsar").options(**_options(broker, topic=topic_name)).mode("append").save()
    # Read back with the short spellings and the token in a file.
    token_file = tmp_path / "token"
    token_file.write_text(broker.secure.token)
    back = (
        spark.read.format("pulsar")
        .options(
            **{
                "service.url": broker.service_url,
                "topic": topic_name,
                "authPluginClassName": "token",
                "authParams": f"file://{token_file}",
                "tlsTrustCertsFilePath": broker.secure.ca_cert,
            }
        )
        .load()
    )
    assert_same_rows(back.selectExpr("cast(value as string) value", "cast(key as string) key"), df)


def test_a_bad_token_or_an_untrusted_certificate_fails(
    spark, apache_pulsar_secure, topic_name
) -> None:
    broker = apache_pulsar_secure
    bad = _options(broker, topic=topic_name, **{"pulsar.client.authParams": "token:nope"})
    with pytest.raises(Exception, match=r"(?i)authenticat"):
        spark.read.format("pulsar").options(**bad).load().count()
    untrusted = _options(
        broker,
        topic=topic_name,
        **{"pulsar.client.tlsTrustCertsFilePath": broker.secure.other_ca_cert},
    )
    with pytest.raises(Exception, match=r"(?i)certificate"):
        spark.read.format("pulsar").options(**untrusted).load().count()
