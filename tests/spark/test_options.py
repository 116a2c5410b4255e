"""Option parsing: names in any case, values parsed once, every error names its option."""

from __future__ import annotations

import pickle

import pytest

from pulsar_spark.protocol import PulsarError
from pulsar_spark.protocol.ids.position import Position
from pulsar_spark.spark import errors
from pulsar_spark.spark.compat import require_spark, spark_version
from pulsar_spark.spark.connect import authentication
from pulsar_spark.spark.errors import PulsarOptionError, SparkVersionError
from pulsar_spark.spark.options.parse import PulsarOptions, parse_options
from pulsar_spark.spark.options.table import OPTIONS, Scope
from pulsar_spark.spark.options.values import OffsetSpec, pattern_parts

URL = "pulsar://localhost:6650"
T = "persistent://public/default/t"


def _parse(**options: str):
    return parse_options({"service.url": URL, **options})


def _error(option: str, **options: str) -> PulsarOptionError:
    with pytest.raises(PulsarOptionError) as info:
        parse_options(options)
    assert info.value.option == option
    assert f"pulsar option {option!r}" in str(info.value)
    return info.value


def test_names_are_case_insensitive_and_aliases_work() -> None:
    parsed = parse_options(
        {
            "SERVICE.URL": URL,
            "Topic": "t",
            "STARTINGOFFSETS": "latest",
            "pulsar.CLIENT.tlsallowinsecureconnection": "TRUE",
            "authPluginClassName": "token",
            "AUTHPARAMS": "token:abc",
            "failondataloss": "False",
            "minpartitions": "8",
        }
    )
    assert parsed.topic == T
    assert parsed.starting_offsets == OffsetSpec(Position.latest())
    assert parsed.tls_allow_insecure is True
    assert parsed.fail_on_data_loss is False
    assert parsed.min_partitions == 8
    assert parsed.auth is not None and parsed.auth.kind == "token"
    assert "abc" not in repr(parsed)  # credentials stay out of reprs and logs
    assert pickle.loads(pickle.dumps(parsed)) == parsed
    assert _parse(path="t").topic == T  # load("t")
    assert _parse(pollTimeoutMs="5000").poll_timeout == 5.0
    defaults = _parse(topic="t")
    assert (str(defaults.starting_offsets.default), str(defaults.ending_offsets.default)) == (
        "earliest",
        "latest",
    )
    assert defaults.fail_on_data_loss and defaults.tls_validate_hostname


def test_unknown_options_list_the_valid_ones() -> None:
    error = _error("startingOffset", **{"service.url": URL, "startingOffset": "earliest"})
    assert "did you mean 'startingOffsets'" in str(error)
    for option in OPTIONS:
        assert option.name in str(error)


def test_required_exclusive_and_bad_values_name_the_option() -> None:
    _error("service.url", topic="t")
    _error("service.url", **{"service.url": "http://localhost:8080"})
    _error("topics", **{"service.url": URL, "topic": "a", "topics": "b"})
    _error("topic", **{"service.url": URL, "topic": "a,b"})
    _error("topicsPattern", **{"service.url": URL, "topicsPattern": "public/default/(("})
    _error(
        "startingTime", **{"service.url": URL, "startingOffsets": "earliest", "startingTime": "0"}
    )
    _error("endingTime", **{"service.url": URL, "endingOffsets": "latest", "endingTime": "0"})
    _error("endingTime", **{"service.url": URL, "startingTime": "10", "endingTime": "5"})
    _error("startingTime", **{"service.url": URL, "startingTime": "yesterday"})
    _error("endingOffsets", **{"service.url": URL, "endingOffsets": "earliest"})
    _error("endingOffsets", **{"service.url": URL, "endingOffsets": '{"t": -2}'})
    _error("startingOffsets", **{"service.url": URL, "startingOffsets": "{not json"})
    _error("startingOffsets", **{"service.url": URL, "startingOffsets": '{"t": "1:x"}'})
    _error("startingOffsets", **{"service.url": URL, "startingOffsets": '{"t": 5}'})
    _error("failOnDataLoss", **{"service.url": URL, "failOnDataLoss": "yes"})
    _error("minPartitions", **{"service.url": URL, "minPartitions": "0"})
    _error("pollTimeoutMs", **{"service.url": URL, "pollTimeoutMs": "soon"})
    _error("pulsar.producer.compressionType", **{"service.url": URL, "compressionType": "brotli"})
    _error("pulsar.client.authParams", **{"service.url": URL, "authParams": "token:x"})
    _error(
        "pulsar.client.authPluginClassName",
        **{"service.url": URL, "authPluginClassName": "com.example.Kerberos"},
    )
    _error(
        "pulsar.client.authParams",
        **{"service.url": URL, "authPluginClassName": "basic", "authParams": '{"userId": "u"}'},
    )
    _error(
        "pulsar.client.authParams",
        **{
            "service.url": URL,
            "pulsar.client.authPluginClassName": (
                "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2"
            ),
            "pulsar.client.authParams": '{"issuerUrl": "https://issuer"}',
        },
    )
    _error(
        "pulsar.client.authParams",
        **{"service.url": URL, "authParams": "x", "pulsar.client.authParams": "y"},
    )


def test_times_and_offsets() -> None:
    def ms(spec: OffsetSpec | None) -> int | None:
        assert spec is not None and not spec.is_json and spec.default.kind == "time"
        return spec.default.time_ms

    assert ms(_parse(startingTime="1700000000000").starting_time) == 1_700_000_000_000
    assert ms(_parse(startingTime="2023-11-14T22:13:20Z").starting_time) == 1_700_000_000_000
    assert ms(_parse(startingTime="2023-11-14T23:13:20.5+01:00").starting_time) == (
        1_700_000_000_500
    )
    assert ms(_parse(endingTime="2023-11-14 22:13:20").ending_time) == 1_700_000_000_000
    # Before 1970: before every message, so a read from the start (as before the redesign).
    assert ms(_parse(startingTime="-5").starting_time) == -5
    assert ms(_parse(startingTime="1969-12-31T23:59:59Z").starting_time) == -1000
    assert ms(_parse(endingTime="1969-12-31T00:00:00Z").ending_time) == -86_400_000
    spec = _parse(
        startingOffsets='{"t": "1:2:-1:3", "u-partition-2": -1, "v": {"0": -2, "1": "4:5"}}'
    ).starting_offsets
    assert spec.by_topic == ((T, Position.parse("1:2:-1:3")),)
    assert {k: str(p) for k, p in spec.by_partition} == {
        ("persistent://public/default/u", 2): "latest",
        ("persistent://public/default/v", 0): "earliest",
        ("persistent://public/default/v", 1): "from:4:5:-1:-1",
    }
    assert pattern_parts("orders-.*") == ("public/default", "persistent://public/default/orders-.*")
    assert pattern_parts("persistent://acme/sales/o.*")[0] == "acme/sales"


def test_scope_checks() -> None:
    with pytest.raises(PulsarOptionError, match="applies to writes only"):
        _parse(topic="t", compressionType="LZ4").check_scope(Scope.READ)
    with pytest.raises(PulsarOptionError, match="applies to reads only"):
        _parse(topic="t", startingOffsets="earliest").check_scope(Scope.WRITE)
    _parse(topic="t", authPluginClassName="token", authParams="x").check_scope(Scope.WRITE)
    # Batch and stream reads: the same table says which options each takes.
    with pytest.raises(
        PulsarOptionError,
        match=r"'maxRecordsPerTrigger': applies to "
        r"streaming reads only \(spark\.readStream\)",
    ):
        _parse(topic="t", maxOffsetsPerTrigger="5").check_scope(Scope.BATCH_READ)
    with pytest.raises(PulsarOptionError, match="'endingTime': applies to batch reads only"):
        _parse(topic="t", endingTime="5").check_scope(Scope.STREAM_READ)
    with pytest.raises(PulsarOptionError, match="applies to reads only"):
        _parse(topic="t", subscriptionName="s").check_scope(Scope.STREAM_WRITE)
    _parse(topic="t", maxRecordsPerTrigger="5", endingOffsets="latest").check_scope(Scope.READ)
    _parse(topic="t", subscriptionName="s").check_scope(Scope.STREAM_READ)


def test_streams_default_to_latest_unless_told() -> None:
    assert str(_parse(topic="t").for_stream_read().starting_offsets.default) == "latest"
    given = _parse(topic="t", startingOffsets="earliest").for_stream_read()
    assert str(given.starting_offsets.default) == "earliest"
    assert _parse(topic="t").starting_offsets.default == Position.earliest()  # batch reads


def test_each_option_is_one_row_of_the_table() -> None:
    import dataclasses

    fields = [o.field for o in OPTIONS if o.field is not None]
    assert len(fields) == len(set(fields))
    parsed = {f.name for f in dataclasses.fields(PulsarOptions)} - {"given", "auth"}
    assert set(fields) == parsed  # no field outside the table, no default repeated
    spellings = [s.lower() for o in OPTIONS for s in (o.name, *o.aliases)]
    assert len(spellings) == len(set(spellings))
    defaults = _parse()
    for option in OPTIONS:
        assert option.scope.label  # every scope has its reference wording
        if option.field is not None and not option.required:  # the default: its text parsed
            text = option.default
            assert getattr(defaults, option.field) == (
                None if text is None else option.parse(option.name, text)
            )


def test_errors_are_pulsar_errors_and_say_they_are_not_retriable() -> None:
    import inspect

    classes = [
        c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__
    ]
    assert len(classes) == 9  # TopicSchemaError, SchemaChangedError: issue 13
    for cls in classes:
        assert issubclass(cls, PulsarError) and cls.retriable is False
    assert issubclass(errors.PulsarOptionError, ValueError)
    assert issubclass(errors.PulsarWriteError, ValueError)
    assert issubclass(errors.DataLossError, RuntimeError)
    assert SparkVersionError is errors.SparkVersionError
    error = pickle.loads(pickle.dumps(PulsarOptionError("topic", "is empty")))
    assert (error.option, str(error)) == ("topic", "pulsar option 'topic': is empty")


def test_auth_plugins_become_client_providers(tmp_path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("jwt-from-file\n")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("c")
    key.write_text("k")
    java = "org.apache.pulsar.client.impl.auth."
    cases = [
        (java + "AuthenticationToken", "token:abc", b"abc"),
        (java + "AuthenticationToken", f"file://{token_file}", b"jwt-from-file"),
        ("token", '{"token": "def"}', b"def"),
        (java + "AuthenticationBasic", '{"userId": "u", "password": "p"}', b"u:p"),
        ("basic", "userId:u,password:p", b"u:p"),
    ]
    for plugin, params, data in cases:
        auth = authentication(_parse(authPluginClassName=plugin, authParams=params).auth)
        assert auth is not None and auth.auth_data() == data
    tls = authentication(
        _parse(
            authPluginClassName=java + "AuthenticationTls",
            authParams=f"tlsCertFile:{cert},tlsKeyFile:{key}",
        ).auth
    )
    assert tls is not None and tls.tls_cert_file == str(cert)
    with pytest.raises(PulsarOptionError, match=r"pulsar\.client\.authParams"):
        authentication(
            _parse(authPluginClassName="tls", authParams="tlsCertFile:/nope,tlsKeyFile:/nope").auth
        )


def test_features_needing_a_newer_spark_say_so() -> None:
    assert spark_version() >= (4, 0)
    require_spark("anything", (4, 0))
    with pytest.raises(SparkVersionError, match=r"needs Spark 4\.1 or newer; this is pyspark"):
        require_spark("streaming admission control", (4, 1), installed=(4, 0))


def test_bad_options_through_spark_name_the_option(spark, pulsar_lite) -> None:
    reader = spark.read.format("pulsar").option("service.url", pulsar_lite.service_url)
    with pytest.raises(Exception, match=r"pulsar option 'minPartitions': must be at least 1"):
        reader.option("topic", "t").option("minPartitions", "0").load()
    with pytest.raises(Exception, match=r"pulsar option 'topic': reads need one of"):
        spark.read.format("pulsar").option("service.url", pulsar_lite.service_url).load().count()
    with pytest.raises(Exception, match=r"pulsar option 'nonsense': unknown option"):
        spark.read.format("pulsar").option("nonsense", "1").load()
    with pytest.raises(Exception, match=r"pulsar option 'startingOffsets'.*does not include"):
        spark.read.format("pulsar").option("service.url", pulsar_lite.service_url).option(
            "topic", "a"
        ).option("startingOffsets", '{"b": -2}').load().count()


def test_the_options_reference_table_is_the_generated_one() -> None:
    from pathlib import Path

    from pulsar_spark.spark.options.table import markdown_table

    page = Path(__file__).resolve().parents[2] / "docs" / "reference" / "options.md"
    text = page.read_text("utf-8")
    start, end = "<!-- options -->\n", "\n<!-- /options -->"
    table = text[text.index(start) + len(start) : text.index(end)]
    assert table == markdown_table(), (
        "docs/reference/options.md's table differs from the option definitions: paste "
        "pulsar_spark.spark.options.table.markdown_table() between its <!-- options --> markers"
    )
    for option in OPTIONS:
        assert f"| `{option.name}`" in table


def test_the_client_does_not_import_pyspark() -> None:
    import subprocess
    import sys

    code = (
        "import sys, pulsar_spark, pulsar_spark.client, pulsar_spark.spark.options.parse; "
        "assert 'pyspark' not in sys.modules, 'pyspark imported'; "
        "from pulsar_spark import PulsarDataSource; assert 'pyspark' in sys.modules; "
        "print(PulsarDataSource.name())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "pulsar"


def test_read_buffer_bytes_reaches_the_client() -> None:
    from pulsar_spark.spark.connect import open_client

    options = parse_options(
        {"service.url": "pulsar://localhost:6650", "topic": "t", "readBufferBytes": "2097152"}
    )
    with open_client(options) as client:
        assert client.config.read_buffer_bytes == 2 << 20
    default = parse_options({"service.url": "pulsar://localhost:6650", "topic": "t"})
    assert default.read_buffer_bytes == 256 << 20
    with pytest.raises(PulsarOptionError, match=r"readBufferBytes.*at least 1048576"):
        given = {"service.url": "pulsar://x:6650", "topic": "t"}
        parse_options({**given, "pulsar.reader.readBufferBytes": "1000"})


def test_producer_windows_and_an_unlimited_send_timeout() -> None:
    given = {"service.url": "pulsar://localhost:6650", "topic": "t"}
    options = parse_options(
        {**given, "pulsar.producer.maxPendingBytes": "1048576", "sendTimeoutMs": "0"}
    )
    assert options.max_pending_bytes == 1 << 20
    assert options.send_timeout == 0  # no limit: the producer takes 0 as none
    assert parse_options(given).max_pending_bytes == 32 << 20
    with pytest.raises(PulsarOptionError, match="maxPendingBytes"):
        parse_options({**given, "maxPendingBytes": "0"})


def test_the_options_spark_itself_adds_are_accepted() -> None:
    """Spark's Python worker hands over its own keys, lower case: ``queryName`` (a
    named stream query), ``checkpointLocation``, asynchronous progress tracking, and
    ``paths`` (``load([t1, t2])``: a JSON array, here the topics)."""
    base = {"service.url": "pulsar://localhost:6650", "topic": "t"}
    for key, value in {
        "queryname": "orders",
        "checkpointlocation": "/tmp/c",
        "asyncprogresstrackingenabled": "false",
        "asyncprogresstrackingcheckpointintervalms": "1000",
    }.items():
        assert parse_options({**base, key: value}).topic == "persistent://public/default/t"
    both = parse_options({"service.url": "pulsar://localhost:6650", "paths": '["a", "b"]'})
    assert both.topics == ("persistent://public/default/a", "persistent://public/default/b")
    with pytest.raises(PulsarOptionError, match=r"'paths'.*JSON array"):
        parse_options({"service.url": "pulsar://localhost:6650", "paths": "a,b"})
    with pytest.raises(PulsarOptionError, match="topic"):  # a selector given twice
        parse_options({**base, "paths": '["a", "b"]'})
