"""End-to-end encryption in Spark: encrypted topics never read as data; errors reach the user."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from pulsar_spark.spark.compat import spark_version
from tests.support.keys import KeyPair
from tests.support.official import produce

NONE = serialization.NoEncryption()


@pytest.fixture(scope="module")
def rsa_files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(public, private) PEM files of one RSA-2048 key."""
    pair = KeyPair(tmp_path_factory.mktemp("spark-keys"), "app")
    return pair.pub, pair.priv


def _produce_encrypted(
    url: str, topic: str, values: list[bytes], files, *, key: str = "app.key", **options
) -> list[str]:
    import pulsar

    pub, priv = files
    reader = pulsar.CryptoKeyReader(str(pub), str(priv))
    return produce(url, topic, values, encryption_key=key, crypto_key_reader=reader, **options)


def test_an_encrypted_topic_read_without_a_key_fails_naming_message_keys_and_option(
    read_pulsar, pulsar_lite, topic_name, rsa_files
) -> None:
    url = pulsar_lite.service_url
    ids = _produce_encrypted(url, topic_name, [b"secret-1", b"secret-2"], rsa_files,
                             compression="LZ4")  # fmt: skip
    with pytest.raises(Exception) as info:  # Spark wraps the worker's error
        read_pulsar(url, topic=topic_name).collect()
    text = str(info.value)
    ledger, entry = re.findall(r"-?\d+", ids[0])[:2]  # the official id: (l,e,p,b)
    assert "MissingPrivateKey" in text and "no private key" in text
    assert f"topic {topic_name};" in text
    assert re.search(rf"message {ledger}:{entry}:-?\d+:-?\d+; key names 'app.key'\)", text)
    assert "privateKey (pulsar.reader.privateKey)" in text
    assert "secret-" not in text and "DecompressionError" not in text


def test_key_options_are_checked_for_form_and_never_shown(rsa_files) -> None:
    import base64
    import json
    import pickle

    from pulsar_spark.spark.errors import PulsarOptionError
    from pulsar_spark.spark.options.crypto import failure_action, key_names, private_key, public_key

    pub, priv = rsa_files
    inline = "data:application/x-pem-file;base64," + base64.b64encode(priv.read_bytes()).decode()
    source = private_key("privateKey", inline)
    assert source.spec == inline and "hidden" in repr(source) and inline[40:80] not in repr(source)
    assert pickle.loads(pickle.dumps(source)) == source
    mapped = public_key("publicKey", json.dumps({"b": pub.as_uri(), "a": pub.as_uri()}))
    assert repr(mapped) == "KeySource(map of a, b)"
    assert repr(private_key("privateKey", "/nowhere/x.pem".join(["file://", ""]))).startswith(
        "KeySource(file://"
    )  # files are read in the tasks, not here
    for parse, bad, expected in (
        (private_key, "https://h/k.pem", "file:... or data:..."),
        (
            private_key,
            "data:application/x-pem-file;base64," + base64.b64encode(b"junk").decode(),
            "no PEM",
        ),
        (public_key, inline, "no PEM public key"),  # a private key given as public
        (private_key, "{bad", "JSON"),
        (failure_action, "skip", "must be fail, discard or consume"),
        (key_names, "a,,b", "comma-separated key names"),
    ):
        with pytest.raises(PulsarOptionError, match=expected) as info:
            parse("theOption", bad)
        assert "theOption" in str(info.value) and inline[40:80] not in str(info.value)
    assert failure_action("x", "CONSUME") == "consume" and key_names("x", "a, b") == ("a", "b")


def _data_url(path: Path) -> str:
    import base64

    return "data:application/x-pem-file;base64," + base64.b64encode(path.read_bytes()).decode()


def test_spark_reads_decrypt_with_a_file_or_data_url_across_split_partitions(
    read_pulsar, pulsar_lite, topic_name, rsa_files
) -> None:
    url, (_, priv) = pulsar_lite.service_url, rsa_files
    sent = [f"row-{i:03d}".encode() for i in range(120)]
    _produce_encrypted(url, topic_name, sent[:100], rsa_files, compression="ZSTD",
                       batching_max_messages=10)  # fmt: skip
    _produce_encrypted(url, topic_name, sent[100:], rsa_files, batching=False)
    got = read_pulsar(url, topic=topic_name, privateKey=priv.as_uri()).collect()
    assert sorted(bytes(r.value) for r in got) == sent
    inline = _data_url(priv)
    df = read_pulsar(
        url, topic=topic_name, minPartitions="4", **{"pulsar.reader.privateKey": inline}
    )
    assert sorted(bytes(r.value) for r in df.collect()) == sent
    assert df.rdd.getNumPartitions() >= 2
    assert inline[60:120] not in df._jdf.queryExecution().toString()


def test_spark_failure_actions_and_a_wrong_key_named_without_the_key(
    read_pulsar, pulsar_lite, topic_name, rsa_files, tmp_path
) -> None:
    url = pulsar_lite.service_url
    _produce_encrypted(url, topic_name, [b"s1", b"s2"], rsa_files)
    produce(url, topic_name, [b"clear"])
    discard = read_pulsar(url, topic=topic_name, cryptoFailureAction="discard").collect()
    assert [bytes(r.value) for r in discard] == [b"clear"]
    consumed = read_pulsar(url, topic=topic_name, cryptoFailureAction="consume").collect()
    assert bytes(consumed[-1].value) == b"clear"
    for row in consumed[:-1]:
        assert dict(row.properties)["pulsar.encryption.keys"] == "app.key"
        assert bytes(row.value) not in (b"s1", b"s2")
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    wrong = tmp_path / "wrong.pem"
    wrong.write_bytes(
        other.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, NONE)
    )
    inline = _data_url(wrong)
    with pytest.raises(Exception) as info:  # Spark wraps the worker's error
        read_pulsar(url, topic=topic_name, privateKey=inline).collect()
    text = str(info.value)
    assert "DataKeyError" in text and "'app.key'" in text and inline[60:120] not in text


def test_a_stream_decrypts(spark, pulsar_lite, topic_name, rsa_files, tmp_path) -> None:
    url, (_, priv) = pulsar_lite.service_url, rsa_files
    sent = [f"s-{i:02d}".encode() for i in range(40)]
    _produce_encrypted(url, topic_name, sent, rsa_files, compression="LZ4", batching_max_messages=8)
    reader = spark.readStream.format("pulsar").option("service.url", url)
    options = {"topic": topic_name, "startingOffsets": "earliest", "privateKey": priv.as_uri()}
    if spark_version() >= (4, 2):
        options["maxRecordsPerTrigger"] = "12"  # never ends inside an encrypted batch
    for name, value in options.items():
        reader = reader.option(name, value)
    batches: list = []

    def collect(frame, batch_id: int) -> None:
        batches.append([bytes(r.value) for r in frame.collect()])

    query = (
        reader.load().writeStream.option("checkpointLocation", str(tmp_path / "c"))
        .trigger(availableNow=True).foreachBatch(collect).start()
    )  # fmt: skip
    query.awaitTermination(180)
    assert not query.isActive and query.exception() is None
    assert sorted(v for rows in batches for v in rows) == sent


def test_spark_writes_encrypted_for_the_official_consumer_and_spark_reads(
    spark, read_pulsar, pulsar_lite, topic_name, rsa_files
) -> None:
    import pulsar

    from tests.support.official import official_client

    url, (pub, priv) = pulsar_lite.service_url, rsa_files
    rows = [(f"v-{i:03d}".encode(),) for i in range(60)]
    df = spark.createDataFrame(rows, "value binary").repartition(2)
    writer = df.write.format("pulsar").option("service.url", url).option("topic", topic_name)
    writer = writer.option("pulsar.producer.encryptionKeys", "app.key,other")
    writer = writer.option("publicKey", _data_url(pub)).option("compressionType", "LZ4")
    writer.mode("append").save()
    sent = sorted(v for (v,) in rows)
    back = read_pulsar(url, topic=topic_name, privateKey=priv.as_uri()).collect()
    assert sorted(bytes(r.value) for r in back) == sent
    with official_client(url) as client:
        consumer = client.subscribe(
            topic_name, "d", initial_position=pulsar.InitialPosition.Earliest,
            crypto_key_reader=pulsar.CryptoKeyReader(str(pub), str(priv)),
        )  # fmt: skip
        got = []
        for _ in sent:
            message = consumer.receive(timeout_millis=20_000)
            context = message.encryption_context()
            assert sorted(k.key for k in context.keys()) == ["app.key", "other"]  # noqa: SIM118
            got.append(message.data())
        consumer.close()
    assert sorted(got) == sent
    with pytest.raises(Exception, match=r"'encryptionKeys'.*(writes only|not to reads)"):
        read_pulsar(url, topic=topic_name, encryptionKeys="a").collect()


#: Spark's default redaction (spark.sql.redaction.options.regex, spark.redaction.regex):
#: an option whose name *or value* matches is hidden.
_REDACTED = re.compile(r"(?i)url|secret|password|token|access[.]?key|credential")


def _unredacted_data_key(tmp_path: Path) -> str:
    """A private key's data: URL that Spark's default regexes do not match by chance
    (a random key's base64 holds "url" about once in 15)."""
    for attempt in range(50):
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path = tmp_path / f"k{attempt}.pem"
        path.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, NONE)
        )
        inline = _data_url(path)
        if not _REDACTED.search(inline):
            return inline
    msg = "no key without a redaction match in 50 tries"
    raise AssertionError(msg)


def test_a_data_key_given_as_private_key_url_stays_out_of_a_streams_plan(
    spark, tmp_path, caplog
) -> None:
    from pulsar_spark.spark.options import redaction

    inline = _unredacted_data_key(tmp_path)

    def plan(name: str) -> str:
        reader = spark.readStream.format("pulsar").option("service.url", "pulsar://127.0.0.1:1")
        df = reader.option("topic", "t").option(name, inline).load()
        return df._jdf.queryExecution().toString()

    assert inline[60:120] not in plan("privateKeyUrl")  # redacted by Spark's default regex
    # Under the name the issue asks for, Spark shows it (hence the documented advice and
    # the WARNING, which Spark's Python worker logs; checked here in this process).
    assert inline[60:120] in plan("privateKey")
    caplog.set_level(logging.WARNING, logger=redaction.__name__)
    redaction._warned.clear()
    options = {"privatekey": inline, "topic": "t"}  # Spark hands the names in lower case
    assert redaction.warn_unredacted_keys(options) == ["privateKey"]
    assert redaction.warn_unredacted_keys(options) == []  # once per process and name
    (record,) = caplog.records
    text = record.getMessage()
    assert "privateKeyUrl" in text and "spark.sql.redaction.options.regex" in text
    assert inline[40:] not in text and "base64" not in text
    assert redaction.warn_unredacted_keys(
        {"pulsar.reader.privatekey": json.dumps({"a": inline})}  # in a JSON map too
    ) == ["pulsar.reader.privateKey"]
    quiet = [
        {"privatekeyurl": inline},  # hidden by Spark: no warning
        {"privatekey": "file:///keys/k.pem"},  # a path is no secret
        {"publickey": inline.replace("PRIVATE", "PUBLIC")},  # nor is a public key
        {"privatekey": inline + "url"},  # a value Spark's regex matches is hidden too
    ]
    for given in quiet:
        redaction._warned.clear()
        assert redaction.warn_unredacted_keys(given) == [], given


def test_consume_refuses_a_projection_without_properties(
    spark, read_pulsar, pulsar_lite, topic_name, rsa_files
) -> None:
    """consume hands ciphertext on, marked only in `properties`: a `.schema(...)` that
    leaves that column out is refused at planning, naming the option and the column."""
    url = pulsar_lite.service_url
    _produce_encrypted(url, topic_name, [b"s1"], rsa_files)
    produce(url, topic_name, [b"clear"])

    def read(ddl: str, **options: str):
        reader = spark.read.format("pulsar").option("service.url", url).schema(ddl)
        return reader.options(topic=topic_name, **options).load()

    with pytest.raises(Exception) as info:
        read("value binary", cryptoFailureAction="consume").collect()
    text = str(info.value)
    assert "pulsar option 'cryptoFailureAction'" in text and "`properties`" in text
    assert "ciphertext" in text and "value" in text
    rows = read("value binary, properties map<string,string>",
                cryptoFailureAction="consume").collect()  # fmt: skip
    assert [bytes(r.value) for r in rows][-1] == b"clear"
    assert rows[0].properties["pulsar.encryption.keys"] == "app.key"
    # discard and fail hand no ciphertext on: any projection goes
    kept = read("value binary", cryptoFailureAction="discard").collect()
    assert [bytes(r.value) for r in kept] == [b"clear"]


def test_consume_refuses_a_read_that_decodes_values(
    spark, read_pulsar, pulsar_lite, topic_name, rsa_files
) -> None:
    """A typed read (here a user's jsonSchema) cannot decode ciphertext: consume is refused
    at planning, naming the option and saying to use schemaMode=raw; raw mode takes it."""
    url = pulsar_lite.service_url
    _produce_encrypted(url, topic_name, [b'{"n": 1}'], rsa_files)
    options = {"topic": topic_name, "cryptoFailureAction": "consume", "jsonSchema": "n int"}
    with pytest.raises(Exception) as info:
        read_pulsar(url, **options).collect()
    text = str(info.value)
    assert "pulsar option 'cryptoFailureAction'" in text and "schemaMode=raw" in text
    assert "jsonSchema" in text
    del options["jsonSchema"]  # (it has no use in raw mode)
    rows = read_pulsar(url, schemaMode="raw", **options).collect()
    assert len(rows) == 1 and rows[0].properties["pulsar.encryption.keys"] == "app.key"


def test_spark_reads_a_topic_whose_key_changed_with_a_map_of_both(
    read_pulsar, pulsar_lite, topic_name, rsa_files, tmp_path
) -> None:
    """Key rotation: the official producer with key name 'old', then ours (Spark's
    writer path's client) with 'new', read in one Spark job with a JSON map."""
    from pulsar_spark.client import PulsarClient

    url, (_, old_priv) = pulsar_lite.service_url, rsa_files
    new = KeyPair(tmp_path, "new")
    new_priv, new_pub = new.priv, new.pub
    before = [f"old-{i:02d}".encode() for i in range(30)]
    after = [f"new-{i:02d}".encode() for i in range(30)]
    _produce_encrypted(url, topic_name, before, rsa_files, key="old", compression="LZ4",
                       batching_max_messages=7)  # fmt: skip
    with (
        PulsarClient(url) as client,
        client.create_producer(
            topic_name, compression="zstd", encryption_keys="new", public_key=_data_url(new_pub)
        ) as producer,
    ):
        for value in after:
            producer.send(value)
        producer.flush()
    keys = json.dumps({"old": old_priv.as_uri(), "new": _data_url(new_priv)})
    df = read_pulsar(url, topic=topic_name, privateKey=keys, minPartitions="3")
    assert sorted(bytes(r.value) for r in df.collect()) == sorted(before + after)
    with pytest.raises(Exception) as info:  # only the old key: the first new message fails
        read_pulsar(
            url, topic=topic_name, privateKey=json.dumps({"old": old_priv.as_uri()})
        ).collect()
    assert "MissingPrivateKey" in str(info.value) and "key names 'new'" in str(info.value)
