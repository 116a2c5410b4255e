"""Credentials (tokens, passwords, client secrets) never shown: not in option errors, reprs,
Spark plans (``explain()``, the SQL executions the UI lists, stream progress), driver and
worker logs or broker errors; and the secure broker's refusals said clearly at the Spark
level (no token; a certificate whose names do not match the host, default verification).

Spark redacts option values in plans by key (``spark.sql.redaction.options.regex`` and
``spark.redaction.regex``); what these tests pin is what a user sees, whatever the key.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import pickle
import re
import time

import pytest

from pulsar_spark.spark.connect import authentication, open_client
from pulsar_spark.spark.errors import PulsarOptionError
from pulsar_spark.spark.options.parse import parse_options
from tests.support.apache_tls import make_token
from tests.support.identity import AUDIENCE, CLIENT
from tests.support.spark_faults import Driver, figure

JAVA_TOKEN = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
#: A JWT of the shape a real one has (header.payload.signature), signed with a key no
#: broker knows, and a password: neither may appear anywhere.
FOREIGN_JWT = make_token(b"k" * 32, "client")
SECRET = "pa55-W0rd-never-shown"


def _no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        for part in [secret, *secret.split(".")]:  # a JWT's pieces too
            if len(part) >= 8:
                assert part not in text, f"credential shown: ...{part[:6]}... in {text[:400]!r}"


def _data_url(key: dict[str, str]) -> str:
    """An OAuth2 key file inlined as the Java client takes it: the key itself, base64."""
    encoded = base64.b64encode(json.dumps(key).encode()).decode("ascii")
    return f"data:application/json;base64,{encoded}"


INLINE_KEY = _data_url({"client_id": "c", "client_secret": SECRET})

AUTH_CASES = {
    "bare jwt": ("token", FOREIGN_JWT),
    "token: prefix": (JAVA_TOKEN, f"token:{FOREIGN_JWT}"),
    "json token": ("token", json.dumps({"token": FOREIGN_JWT})),
    "basic json": ("basic", json.dumps({"userId": "u", "password": SECRET})),
    "basic pairs": ("basic", f"userId:u,password:{SECRET}"),
    "oauth2 secret": (
        "oauth2",
        json.dumps({"issuerUrl": "https://127.0.0.1:1", "clientId": "c", "clientSecret": SECRET}),
    ),
    "oauth2 inline key": (
        "oauth2",
        json.dumps({"issuerUrl": "https://127.0.0.1:1", "privateKey": INLINE_KEY}),
    ),
}


@pytest.mark.parametrize("case", sorted(AUTH_CASES))
def test_parsed_options_clients_and_pickles_do_not_show_credentials(case: str) -> None:
    plugin, params = AUTH_CASES[case]
    raw = {
        "service.url": "pulsar://127.0.0.1:6650",
        "topic": "t",
        "pulsar.client.authPluginClassName": plugin,
        "pulsar.client.authParams": params,
    }
    parsed = parse_options(raw)
    auth = authentication(parsed.auth)
    with open_client(parsed) as client:
        shown = [repr(parsed), str(parsed), repr(parsed.auth), repr(auth), repr(client.config)]
    _no_secret("\n".join(shown), FOREIGN_JWT, SECRET, INLINE_KEY.split(",")[1])
    assert pickle.loads(pickle.dumps(parsed)) == parsed  # still travels to tasks


def test_a_bare_token_is_accepted_with_a_warning_that_does_not_show_it(caplog) -> None:
    from pulsar_spark.spark.options import auth as option_auth

    option_auth._warned.clear()
    raw = {"service.url": "pulsar://127.0.0.1:6650", "topic": "t"}
    raw |= {"authPluginClassName": "token", "authParams": FOREIGN_JWT}
    with caplog.at_level("WARNING", logger="pulsar_spark.spark.options.auth"):
        parsed = parse_options(raw)
        parse_options(raw)
    assert dict(parsed.auth.params) == {"token": FOREIGN_JWT}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1  # once per process
    assert "bare token" in warnings[0]
    assert "spark.sql.redaction.options.regex" in warnings[0]
    _no_secret(warnings[0], FOREIGN_JWT)


def test_an_inline_oauth2_key_becomes_client_id_and_secret() -> None:
    raw = {"service.url": "pulsar://127.0.0.1:6650", "topic": "t"}
    raw |= {
        "pulsar.client.authPluginClassName": "oauth2",
        "pulsar.client.authParams": json.dumps(
            {"issuerUrl": "https://h", "privateKey": INLINE_KEY, "audience": "a"}
        ),
    }
    params = dict(parse_options(raw).auth.params)
    assert params == {
        "issuerUrl": "https://h",
        "audience": "a",
        "clientId": "c",
        "clientSecret": SECRET,
    }


BAD_PARAMS = {
    "basic, JSON cut short": ("basic", '{"userId": "u", "password": "' + SECRET + '"'),
    "basic without userId": ("basic", json.dumps({"password": SECRET})),
    "basic, pairs without ':'": ("basic", f"password={SECRET}"),
    "oauth2 without issuerUrl": ("oauth2", json.dumps({"clientId": "c", "clientSecret": SECRET})),
    "json token under another key": ("token", json.dumps({"jwt": FOREIGN_JWT})),
    "params without a plugin": (None, FOREIGN_JWT),
    "the token given as the plugin": (FOREIGN_JWT, JAVA_TOKEN),
    "a password given as the plugin": (f"basic:{SECRET}", "userId:u"),
    "token file that does not exist": ("token", "file:///nonexistent/token"),
    "oauth2 inline key that is not JSON": (
        "oauth2",
        json.dumps({"issuerUrl": "https://h", "privateKey": INLINE_KEY[:-8] + "!"}),
    ),
    "sasl, a misspelled parameter holding a password": (
        "sasl",
        json.dumps({"principal": "p@R", "password": SECRET}),
    ),
    "sasl, JSON cut short": ("sasl", '{"principal": "p@R", "keyTab": "' + SECRET + '"'),
    "oauth2 inline key without client_id": (
        "oauth2",
        json.dumps({"issuerUrl": "https://h", "privateKey": _data_url({"client_secret": SECRET})}),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_PARAMS))
def test_option_errors_name_the_option_and_never_the_credential(case: str) -> None:
    plugin, params = BAD_PARAMS[case]
    raw = {"service.url": "pulsar://127.0.0.1:6650", "topic": "t"}
    if plugin is not None:
        raw["pulsar.client.authPluginClassName"] = plugin
    raw["pulsar.client.authParams"] = params
    with pytest.raises(PulsarOptionError) as info:
        authentication(parse_options(raw).auth)
    assert info.value.option.startswith("pulsar.client.auth")
    hidden = (FOREIGN_JWT, SECRET, INLINE_KEY.split(",")[1][:40])
    _no_secret(str(info.value), *hidden)
    _no_secret(repr(info.value), *hidden)
    _no_secret(repr(pickle.loads(pickle.dumps(info.value))), *hidden)


def _secure(broker, **extra: str) -> dict[str, str]:
    return {
        "service.url": broker.service_url,
        "pulsar.client.tlsTrustCertsFilePath": broker.secure.ca_cert,
        **extra,
    }


def _explained(df) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for mode in ("simple", "extended", "codegen", "cost", "formatted"):
            df.explain(mode)
    return out.getvalue()


def _ui_plans(spark) -> str:
    """What the SQL tab of the UI shows: every execution's description and plans."""
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    texts = []
    for i in range(executions.size()):
        e = executions.apply(i)
        texts += [e.description(), e.details(), e.physicalPlanDescription()]
    return "\n".join(texts)


def _shown_everywhere(spark, broker, topic: str, auth: dict[str, str], checkpoint) -> dict:
    """Write, read and stream ``topic`` with ``auth``; every text Spark shows of it."""
    rows = spark.createDataFrame([(f"v{i}",) for i in range(20)], "value string")
    options = _secure(broker, topic=topic, **auth)
    rows.write.format("pulsar").options(**options).mode("append").save()
    df = spark.read.format("pulsar").options(**options).load()
    assert df.count() == 20
    stream = spark.readStream.format("pulsar").options(**options, startingOffsets="earliest").load()
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None, query.exception()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        query.explain(True)
    return {
        "batch explain": _explained(df),
        "stream explain": _explained(stream),
        "query explain": out.getvalue(),
        "progress": json.dumps([p.json for p in query.recentProgress]),
        "ui sql executions": _ui_plans(spark),
    }


def _leaks(shown: dict[str, str], token: str) -> list[str]:
    return [where for where, text in shown.items() if token in text]


#: How users may give the token; Spark redacts an option in plans when its key or value
#: matches spark.redaction.regex ("token", "secret", "password", ...) or its key matches
#: spark.sql.redaction.options.regex ("url").
TOKEN_FORMS = {
    "token: prefix": lambda t, _: f"token:{t}",
    "json token": lambda t, _: json.dumps({"token": t}),
    "token file": lambda _, path: f"file://{path}",
}


def test_tokens_are_in_no_plan_progress_or_ui(
    spark, apache_pulsar_secure, topic_name, tmp_path, record_property
) -> None:
    broker = apache_pulsar_secure
    token = broker.secure.token
    (tmp_path / "token").write_text(token)
    places = 0
    for n, (form, params) in enumerate(sorted(TOKEN_FORMS.items())):
        auth = {"authPluginClassName": "token", "authParams": params(token, tmp_path / "token")}
        shown = _shown_everywhere(spark, broker, f"{topic_name}-{n}", auth, tmp_path / f"c{n}")
        assert _leaks(shown, token) == [], form
        assert all(shown.values()), form
        places += len(shown)
    figure(record_property, "credentials_in_plans", forms=len(TOKEN_FORMS), places=places)


def test_oauth2_secrets_are_in_no_plan_progress_or_ui(
    spark, apache_pulsar_secure, topic_name, tmp_path, record_property
) -> None:
    """The client secret given directly (``clientSecret``) or inside a ``data:`` URL of the
    key file (``privateKey``), against the secure broker's OpenID Connect issuer."""
    broker = apache_pulsar_secure
    identity = broker.identity
    key = {"client_id": CLIENT, "client_secret": identity.client_secret}
    inline = _data_url(key)
    forms = {
        "clientSecret": {"clientId": CLIENT, "clientSecret": identity.client_secret},
        "data: URL": {"privateKey": inline},
    }
    places = 0
    for n, (form, params) in enumerate(sorted(forms.items())):
        auth = {
            "authPluginClassName": "oauth2",
            "authParams": json.dumps(
                {"issuerUrl": identity.oidc.url, "audience": AUDIENCE, **params}
            ),
        }
        shown = _shown_everywhere(spark, broker, f"{topic_name}-{n}", auth, tmp_path / f"c{n}")
        for hidden in (identity.client_secret, inline.split(",")[1][:40]):
            assert _leaks(shown, hidden) == [], form
        places += len(shown)
    figure(record_property, "oauth2_secrets_in_plans", forms=len(forms), places=places)


def test_basic_authentication_writes_reads_and_streams_and_shows_no_password(
    spark, apache_pulsar_secure, topic_name, tmp_path, record_property
) -> None:
    # The broker checks the password against its htpasswd file (AuthenticationProviderBasic)
    # and authorizes the user id as a role; the options as Java client users write them
    # (class name, JSON) and in the short form (basic, key:value pairs).
    broker = apache_pulsar_secure
    sec = broker.secure
    user, password = sec.basic_user, sec.basic_password
    forms = {
        "java class, json": (
            "org.apache.pulsar.client.impl.auth.AuthenticationBasic",
            json.dumps({"userId": user, "password": password}),
        ),
        "short name, pairs": ("basic", f"userId:{user},password:{password}"),
    }
    places = 0
    for n, (form, (plugin, params)) in enumerate(sorted(forms.items())):
        auth = {"pulsar.client.authPluginClassName": plugin, "pulsar.client.authParams": params}
        shown = _shown_everywhere(spark, broker, f"{topic_name}-{n}", auth, tmp_path / f"c{n}")
        assert _leaks(shown, password) == [], form
        places += len(shown)
    wrong = {"authPluginClassName": "basic", "authParams": f"userId:{user},password:x{password}"}
    with pytest.raises(Exception) as info:
        spark.read.format("pulsar").options(
            **_secure(broker, topic=topic_name, **wrong)
        ).load().count()
    text = str(info.value)
    assert re.search(r"(?i)AuthenticationError: .*authenticat", text), text[:2000]
    assert broker.service_url.split("//")[1] in text, text[:2000]
    _no_secret(text, password)
    figure(record_property, "basic_auth", forms=len(forms), places=places, wrong_password="refused")


def test_a_bare_jwt_is_shown_by_spark_in_stream_plans_unless_redaction_names_it(
    spark, apache_pulsar_secure, topic_name, tmp_path, record_property
) -> None:
    """A bare JWT matches neither of Spark's redaction patterns: Spark prints it in
    streaming plans (our code never does). Adding ``authParams`` to
    ``spark.sql.redaction.options.regex`` hides it everywhere."""
    broker = apache_pulsar_secure
    token = broker.secure.token
    auth = {"authPluginClassName": "token", "authParams": token}
    shown = _shown_everywhere(spark, broker, f"{topic_name}-a", auth, tmp_path / "c1")
    by_default = _leaks(shown, token)
    assert set(by_default) <= {"stream explain", "query explain"}, by_default
    key = "spark.sql.redaction.options.regex"
    before = spark.conf.get(key)
    spark.conf.set(key, f"{before}|(?i)authParams")
    try:
        shown = _shown_everywhere(spark, broker, f"{topic_name}-b", auth, tmp_path / "c2")
    finally:
        spark.conf.set(key, before)
    assert _leaks(shown, token) == []
    figure(
        record_property,
        "bare_jwt",
        shown_by_spark_by_default_in="+".join(by_default) or "nowhere",
        shown_with_authParams_in_redaction_regex="nowhere",
    )


def test_no_token_on_a_token_broker_is_a_clear_error(
    spark, apache_pulsar_secure, topic_name, record_property
) -> None:
    options = _secure(apache_pulsar_secure, topic=topic_name)
    rows = spark.createDataFrame([("v",)], "value string")
    seconds: dict[str, float] = {}
    for what, action in (
        ("read", lambda: spark.read.format("pulsar").options(**options).load().count()),
        ("write", lambda: rows.write.format("pulsar").options(**options).mode("append").save()),
    ):
        started = time.monotonic()
        with pytest.raises(Exception) as info:
            action()
        seconds[what] = round(time.monotonic() - started, 1)
        text = str(info.value)
        print(f"no token, {what}: ...{text[-300:]}")
        assert re.search(r"(?i)AuthenticationError: .*Failed to authenticate", text), text[:2000]
        assert apache_pulsar_secure.service_url.split("//")[1] in text, text[:2000]  # where
    figure(
        record_property,
        "no_token",
        read_error_s=seconds["read"],
        write_error_s=seconds["write"],
        error="AuthenticationError naming the broker",
    )


def test_client_logs_at_debug_never_show_the_token(apache_pulsar_secure, topic_name, caplog):
    """The client's own logs, at DEBUG, over an accepted and a rejected token."""
    broker = apache_pulsar_secure
    good = broker.secure.token
    errors: list[str] = []
    for token in (good, FOREIGN_JWT):
        raw = _secure(broker, topic=topic_name, authPluginClassName="token", authParams=token)
        with caplog.at_level("DEBUG", logger="pulsar_spark"), open_client(parse_options(raw)) as c:
            try:
                c.get_partitions(topic_name)
                list(c.read_batches(topic_name))
            except Exception as exc:
                errors.append(f"{exc!r} {exc}")
    assert len(errors) == 1, errors  # the rejected token only
    assert re.search(r"(?i)authenticat", errors[0]), errors[0]
    records = [*errors, caplog.text]
    _no_secret("\n".join(records), good, FOREIGN_JWT)


def test_a_rejected_token_is_not_echoed_anywhere(
    apache_pulsar_secure, topic_name, tmp_path, record_property
) -> None:
    """A token signed with another key: refused, in an error and logs (driver, JVM,
    workers: one driver of its own, its whole output) that never show it."""
    broker = apache_pulsar_secure
    job = {
        "mode": "batch",
        "source_format": "pulsar",
        "source_options": _secure(
            broker,
            topic=topic_name,
            **{"pulsar.client.authPluginClassName": "token", "authParams": FOREIGN_JWT},
        ),
    }
    with Driver(job, tmp_path / "control") as driver:
        result = driver.wait(240)
    error = result.get("error") or ""
    assert re.search(r"(?i)authenticat", error), error[:2000]
    log = driver.tail(10_000_000)
    _no_secret(error, FOREIGN_JWT)
    _no_secret(log, FOREIGN_JWT)
    figure(record_property, "rejected_token", log_bytes=len(log), error_chars=len(error))


def test_default_hostname_verification_through_spark(
    spark, apache_pulsar_secure, topic_name, record_property
) -> None:
    """The broker's certificate names ``localhost`` only: ``127.0.0.1`` is refused by
    default, accepted with verification turned off, and ``localhost`` works."""
    broker = apache_pulsar_secure
    auth = {"authPluginClassName": "token", "authParams": f"token:{broker.secure.token}"}
    by_ip = broker.service_url.replace("localhost", "127.0.0.1")
    assert by_ip != broker.service_url
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        spark.read.format("pulsar").options(
            **_secure(broker, topic=topic_name, **auth, **{"service.url": by_ip})
        ).load().count()
    refused = round(time.monotonic() - started, 1)
    text = str(info.value)
    print(f"hostname mismatch: {text[:600]}")
    assert re.search(r"(?i)hostname|IP address mismatch|doesn't match", text), text[:2000]
    assert "127.0.0.1" in text, text[:2000]
    _no_secret(text, broker.secure.token)
    relaxed = {"service.url": by_ip, "tlsHostnameVerificationEnable": "false"}
    assert (
        spark.read.format("pulsar")
        .options(**_secure(broker, topic=topic_name, **auth, **relaxed))
        .load()
        .count()
        == 0
    )
    assert (
        spark.read.format("pulsar")
        .options(**_secure(broker, topic=topic_name, **auth))
        .load()
        .count()
        == 0
    )
    figure(
        record_property,
        "hostname_mismatch",
        refused_s=refused,
        refused_by="default verification",
        accepted_with="tlsHostnameVerificationEnable=false",
    )
