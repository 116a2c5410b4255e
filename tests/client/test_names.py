"""Service URLs, topic names, positions and auth providers: no broker needed."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from pulsar_spark.client import (
    BasicAuthentication,
    ClientError,
    InvalidServiceUrl,
    InvalidTopicName,
    OAuth2ClientCredentials,
    TokenAuthentication,
    parse_position,
    parse_service_url,
    parse_topic,
)
from pulsar_spark.client.read.bounds import end_bound, start_bound
from pulsar_spark.protocol import EARLIEST, LATEST, MessageId, Position


@pytest.mark.parametrize(
    ("url", "scheme", "hosts"),
    [
        ("pulsar://localhost", "pulsar", (("localhost", 6650),)),
        ("pulsar://localhost:7000/", "pulsar", (("localhost", 7000),)),
        ("pulsar+ssl://broker", "pulsar+ssl", (("broker", 6651),)),
        ("pulsar://a:1,b,c:3", "pulsar", (("a", 1), ("b", 6650), ("c", 3))),
        ("PULSAR://[::1]:6650", "pulsar", (("::1", 6650),)),
    ],
)
def test_service_urls(url: str, scheme: str, hosts: tuple) -> None:
    parsed = parse_service_url(url)
    assert parsed.scheme == scheme
    assert parsed.hosts == hosts
    assert parsed.tls == (scheme == "pulsar+ssl")


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8080",
        "localhost:6650",
        "pulsar://",
        "pulsar://a:notaport",
        "pulsar://a/b",
        "",
        "pulsar://a:99999",
    ],
)
def test_bad_service_urls_name_the_url(url: str) -> None:
    with pytest.raises(InvalidServiceUrl) as info:
        parse_service_url(url)
    assert repr(url) in str(info.value)
    assert not info.value.retriable


@pytest.mark.parametrize(
    ("name", "full", "partition", "base"),
    [
        ("t", "persistent://public/default/t", -1, "persistent://public/default/t"),
        ("ten/ns/t", "persistent://ten/ns/t", -1, "persistent://ten/ns/t"),
        ("non-persistent://ten/ns/t", "non-persistent://ten/ns/t", -1, "non-persistent://ten/ns/t"),
        (
            "t-partition-3",
            "persistent://public/default/t-partition-3",
            3,
            "persistent://public/default/t",
        ),
        (
            "persistent://a/b/x-partition-00",
            "persistent://a/b/x-partition-00",
            0,
            "persistent://a/b/x",
        ),
        ("persistent://a/c/b/t", "persistent://a/c/b/t", -1, "persistent://a/c/b/t"),
        (
            "t-partition-x",
            "persistent://public/default/t-partition-x",
            -1,
            "persistent://public/default/t-partition-x",
        ),
    ],
)
def test_topic_names(name: str, full: str, partition: int, base: str) -> None:
    topic = parse_topic(name)
    assert str(topic) == full
    assert topic.partition == partition
    assert str(topic.base) == base


def test_partition_names_round_trip() -> None:
    base = parse_topic("ten/ns/t")
    part = base.partition_name(7)
    assert str(part) == "persistent://ten/ns/t-partition-7"
    assert parse_topic(str(part)) == part
    assert part.base == base


@pytest.mark.parametrize("name", ["", "  ", "a/b", "a/b/c/d", "kafka://a/b/c", "a//c"])
def test_bad_topic_names_name_the_topic(name: str) -> None:
    with pytest.raises(InvalidTopicName) as info:
        parse_topic(name)
    assert repr(name) in str(info.value)


def test_positions() -> None:
    assert parse_position("earliest", "start") == EARLIEST
    assert parse_position(" LATEST ", "end") == LATEST
    assert parse_position("1:2:3:4", "start") == MessageId(1, 2, 3, 4)
    assert parse_position(MessageId(5, 6), "start") == MessageId(5, 6)
    with pytest.raises(ClientError, match="start='yesterday'"):
        parse_position("yesterday", "start")


def test_positions_name_ids_for_the_client_api() -> None:
    mid = MessageId(1, 2, 3, 4)
    assert parse_position(Position.after(mid), "message_id") == mid
    assert parse_position("from:1:2:3:4", "message_id") == mid
    assert parse_position(Position.latest(), "start") == LATEST
    with pytest.raises(ClientError, match="not a publish time"):
        parse_position(Position.at_time(5), "message_id")
    with pytest.raises(ClientError, match="after:1:x"):
        parse_position("after:1:x", "start")


def test_bounds_from_positions_ids_and_times() -> None:
    mid = MessageId(1, 2, -1, 4)
    # A position says what it includes: an end at after:X includes X, from:X stops before.
    assert start_bound(Position.at(mid)) == Position.at(mid)
    assert start_bound(Position.after(mid)) == Position.after(mid)
    assert start_bound("after:1:2:-1:4", inclusive=True) == Position.after(mid)
    assert end_bound(Position.after(mid)) == Position.after(mid)
    assert end_bound(Position.at(mid), inclusive=True) == Position.at(mid)
    assert end_bound(Position.latest(), inclusive=False) == Position.latest()
    assert start_bound(Position.earliest()) == Position.earliest()
    # Bare ids and words keep the flags they come with: included as an end is after:X.
    assert start_bound("1:2:-1:4", inclusive=False) == Position.after(mid)
    assert end_bound(mid, inclusive=False) == Position.at(mid)
    assert end_bound(mid, inclusive=True) == Position.after(mid)
    assert end_bound("latest") == Position.latest()
    assert start_bound(EARLIEST) == Position.earliest()
    assert end_bound(LATEST, inclusive=False) == Position.latest()
    # Times: a position or a datetime, resolved per partition later.
    when = dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc)
    ms = int(when.timestamp() * 1000)
    assert start_bound(when) == start_bound(Position.at_time(ms)) == Position.at_time(ms)
    assert end_bound(when).time_ms == end_bound(f"time:{ms}").time_ms == ms
    assert start_bound(when.replace(tzinfo=None)).time_ms == ms  # naive = UTC
    with pytest.raises(ClientError, match="end="):
        end_bound("time:soon")
    with pytest.raises(ClientError, match="start=3"):
        start_bound(3)  # type: ignore[arg-type]


def test_token_from_file_is_read_on_every_use(tmp_path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    auth = TokenAuthentication(token_file=str(path))
    assert auth.auth_data() == b"first"
    path.write_text("second")
    assert auth.auth_data() == b"second"
    assert TokenAuthentication(token_file=f"file://{path}").auth_data() == b"second"
    assert TokenAuthentication(lambda: "fresh").auth_data() == b"fresh"
    assert auth.method_name == "token"


def test_auth_misconfiguration_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ClientError, match="token file"):
        TokenAuthentication(token_file=str(tmp_path / "missing"))
    with pytest.raises(ClientError, match="exactly one"):
        TokenAuthentication()
    with pytest.raises(ClientError, match="user id"):
        BasicAuthentication("a:b", "pw")
    assert BasicAuthentication("user", "pw").auth_data() == b"user:pw"
    with pytest.raises(ClientError, match="client_id and client_secret"):
        OAuth2ClientCredentials("https://issuer.invalid")
    key = tmp_path / "key.json"
    key.write_text(json.dumps({"client_id": "id", "client_secret": "secret"}))
    assert OAuth2ClientCredentials("https://issuer.invalid", private_key=str(key)).method_name == (
        "token"
    )


def test_oauth2_key_files_as_data_urls_never_show_the_key() -> None:
    import base64

    body = json.dumps({"client_id": "id", "client_secret": "s3cr3t-value"}).encode()
    url = "data:application/json;base64," + base64.b64encode(body).decode()
    assert OAuth2ClientCredentials("https://issuer.invalid", private_key=url).method_name == "token"
    # Percent-encoded too, as the data: scheme allows.
    from urllib.parse import quote

    plain = "data:application/json," + quote(body.decode())
    assert OAuth2ClientCredentials("https://issuer.invalid", private_key=plain).method_name == (
        "token"
    )
    broken = url[:-6]
    with pytest.raises(ClientError, match=r"given as a data: URL \(not shown\)") as caught:
        OAuth2ClientCredentials("https://issuer.invalid", private_key=broken)
    assert broken[30:] not in str(caught.value)
    assert "s3cr3t" not in repr(caught.value)


def test_oauth2_discovers_the_endpoint_and_caches_the_token() -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qs

    calls: list[tuple[str, dict]] = []

    class Issuer(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _json(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            calls.append((self.path, {}))
            port = self.server.server_address[1]
            self._json({"token_endpoint": f"http://127.0.0.1:{port}/token"})

        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            calls.append((self.path, form))
            self._json({"access_token": f"tok-{len(calls)}", "expires_in": 3600})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Issuer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        issuer = f"http://127.0.0.1:{server.server_address[1]}"
        auth = OAuth2ClientCredentials(
            issuer, client_id="id", client_secret="s3cret", audience="urn:pulsar"
        )
        assert auth.auth_data() == b"tok-2"
        assert auth.auth_data() == b"tok-2"  # cached until it expires
        assert [path for path, _ in calls] == ["/.well-known/openid-configuration", "/token"]
        form = calls[1][1]
        assert form["grant_type"] == ["client_credentials"]
        assert form["client_id"] == ["id"] and form["audience"] == ["urn:pulsar"]
        auth._expires_at = 0  # expired: the next use fetches a new token
        assert auth.auth_data() == b"tok-3"
    finally:
        server.shutdown()
