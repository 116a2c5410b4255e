"""The Java client of the Apache Pulsar distribution as a test peer: typed produce and consume.

``tests/support/java/SchemaTool.java`` is compiled once against the distribution's
``lib/*`` (the Java client 4.0.8 and its dependencies) into
``<cache>/java-<SHA-256 of the source>/``, so later runs skip ``javac``; a
lock makes concurrent test processes compile it once. Each call runs one JVM
(C1 only, class-data sharing, a small heap; the client is not closed, whose
event loops take 2 s to stop: about 2 s a call), which produces to or consumes
from any number of topics, each with its typed schema, values as JSON lines
(the Java file says how each type is written in JSON). :func:`java_produce_many`
and :func:`java_consume_many` take several topics; :func:`java_produce` and
:func:`java_consume` one.

A *schema spec* is a primitive's name (``"INT64"``, ``"INSTANT"``...),
``"AUTO_CONSUME"``, ``"PROTOBUF_NATIVE"``, or a dict: :func:`avro`, :func:`json_schema`,
:func:`key_value`, ``{"type": "AVRO"|"JSON", "pojo": "Order"}`` (``Schema.AVRO(Order.class)``
of SchemaTool's ``Order`` class: id, note, amount, tags, item {sku, qty}; or ``"Event"``: name
and the java.time fields at (Instant), day (LocalDate), local (LocalDateTime); or ``"Times"``:
at, day, local, name and time (LocalTime), declared in the schema's order), ``{"type":
"STRING", "charset": "UTF-16"}`` (``new StringSchema(charset)``). The PROTOBUF_NATIVE message
is built in Java from a ``FileDescriptorProto`` (no ``.proto`` file): :data:`PROTOBUF_ORDER`
describes it.

:data:`PRIMITIVE_EDGES` holds the edge values of every primitive type, as sent and as a
typed read gives them back; :func:`from_java` reads what a Java consumer printed.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import json
import math
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from .apache_dist import cache_dir, ensure_distribution, java

__all__ = [
    "PROTOBUF_ORDER",
    "LOCAL_TIME_NANOS",
    "PRIMITIVE_EDGES",
    "TEXTS",
    "JavaClientError",
    "avro",
    "from_java",
    "java_consume",
    "java_consume_many",
    "java_produce",
    "java_produce_many",
    "java_produce_protobuf_native",
    "json_schema",
    "key_value",
    "run_tool",
    "same_values",
    "tool_classes",
]

SOURCE_DIR = Path(__file__).resolve().parent / "java"
SOURCE = SOURCE_DIR / "SchemaTool.java"
LOG_CONFIG = SOURCE_DIR / "log4j2.properties"

#: The JVM of each call: C1 only and class-data sharing (start cost), a small heap.
JVM_FLAGS = (
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:+UseSerialGC",
    "-Xms32m",
    "-Xmx256m",
    "-Djava.net.preferIPv4Stack=true",
    f"-Dlog4j2.configurationFile={LOG_CONFIG}",
)

#: The PROTOBUF_NATIVE message of SchemaTool (package ``pulsar_spark.test``, file
#: ``pulsar_spark/order.proto``, proto3, importing ``google/protobuf/timestamp.proto``).
PROTOBUF_ORDER = """\
enum Status { NEW = 0; DONE = 1; }
message Item { string sku = 1; int32 qty = 2; }
message Order {
  int64 id = 1; string name = 2; double score = 3; repeated int32 tags = 4; Item item = 5;
  Status status = 6; bool ok = 7; bytes blob = 8; google.protobuf.Timestamp at = 9;
}"""

Spec = str | dict[str, Any]


class JavaClientError(RuntimeError):
    """SchemaTool failed: its exit code and the tail of its stderr."""


def avro(definition: dict[str, Any]) -> dict[str, Any]:
    """The spec of ``Schema.AVRO`` with an Avro schema (a JSON definition)."""
    return {"type": "AVRO", "schema": definition}


def json_schema(definition: dict[str, Any]) -> dict[str, Any]:
    """The spec of ``Schema.JSON`` with an Avro schema describing the JSON values."""
    return {"type": "JSON", "schema": definition}


def key_value(key: Spec, value: Spec, encoding: str) -> dict[str, Any]:
    """The spec of ``Schema.KeyValue(key, value, KeyValueEncodingType.<encoding>)``."""
    return {"type": "KEY_VALUE", "key": key, "value": value, "encoding": encoding.upper()}


def tool_classes() -> Path:
    """The directory of the compiled SchemaTool, compiled on the first call of any process."""
    return compile_tool(SOURCE, "java", extra=LOG_CONFIG.read_bytes())


def compile_tool(source: Path, prefix: str, *, extra: bytes = b"") -> Path:
    """``source`` compiled against the distribution's jars into
    ``<cache>/<prefix>-<hash of source + extra>`` (once: later calls, in any process, find
    the classes; a file lock keeps two processes from compiling at once)."""
    digest = hashlib.sha256(source.read_bytes() + extra).hexdigest()[:16]
    cache = cache_dir()
    classes = cache / f"{prefix}-{digest}"
    compiled = classes / source.with_suffix(".class").name
    if compiled.exists():
        return classes
    lib = ensure_distribution() / "lib"
    exe, _ = java()
    javac = str(Path(exe).with_name("javac"))
    if not Path(javac).exists():
        javac = shutil.which("javac") or javac
    with (cache / f".{prefix}-lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if compiled.exists():
            return classes
        staging = cache / f".{prefix}-{digest}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        done = subprocess.run(
            [javac, "-nowarn", "-d", str(staging), "-cp", f"{lib}/*", str(source)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            msg = f"javac {source} failed ({done.returncode}):\n{done.stderr[-4000:]}"
            raise JavaClientError(msg)
        staging.replace(classes)
    return classes


def run_tool(
    classes: Path,
    main: str,
    args: list[str],
    stdin: str,
    timeout: float,
    *,
    jars: Path | None = None,
) -> list[dict[str, Any]]:
    """Runs class ``main`` of ``classes`` with ``args`` and ``stdin``, on the jars of
    ``jars`` (a Pulsar's ``lib/``: another line's Java client) or of the distribution; the
    JSON objects it printed, one per line.

    Raises:
        JavaClientError: it did not finish within ``timeout`` or exited non-zero.
    """
    exe, _ = java()
    lib = jars or ensure_distribution() / "lib"
    command = [exe, *JVM_FLAGS, "-cp", f"{classes}:{lib}/*", main, *args]
    try:
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
        msg = f"{main} {args[:3]} did not finish in {timeout} s:\n{err[-3000:]}"
        raise JavaClientError(msg) from None
    if done.returncode != 0:
        msg = (
            f"{main} {args[:4]} exited {done.returncode}:\n{done.stderr[-4000:]}"
            f"\nstdout: {done.stdout[-1000:]}"
        )
        raise JavaClientError(msg)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def _run(
    args: list[str], stdin: str, timeout: float, jars: Path | None = None
) -> list[dict[str, Any]]:
    return run_tool(tool_classes(), "SchemaTool", args, stdin, timeout, jars=jars)


def java_produce_many(
    service_url: str,
    jobs: dict[str, tuple[Spec, list[Any]]],
    *,
    message_keys: dict[str, list[str | None]] | None = None,
    batching: bool = True,
    timeout: float = 120.0,
    jars: Path | None = None,
) -> None:
    """Sends, in one JVM, ``values`` to each ``topic`` of ``jobs`` (``{topic: (schema,
    values)}``; values as SchemaTool reads them in JSON; for KEY_VALUE, ``(key, value)``
    pairs) with one Java producer of ``schema`` per topic: sent asynchronously, then
    flushed, so they travel in batches unless ``batching`` is false.
    ``message_keys[topic]`` gives the message keys of a topic's values; ``jars``: the
    ``lib/`` of the Pulsar whose Java client sends (default: the distribution's)."""
    rows = []
    for topic, (schema, values) in jobs.items():
        kv = isinstance(schema, dict) and schema["type"] == "KEY_VALUE"
        keys = (message_keys or {}).get(topic)
        for i, value in enumerate(values):
            row: dict[str, Any] = {"topic": topic, "schema": schema}
            if kv:
                row["key"], row["value"] = value
            else:
                row["value"] = value
            if keys is not None:
                row["messageKey"] = keys[i]
            rows.append(json.dumps(row))
    mode = "batch" if batching else "nobatch"
    out = _run(["produce", service_url, mode], "\n".join(rows), timeout, jars)
    assert out == [{"sent": len(rows)}], out


def java_produce(
    service_url: str,
    topic: str,
    schema: Spec,
    values: list[Any],
    *,
    message_keys: list[str | None] | None = None,
    batching: bool = True,
    jars: Path | None = None,
) -> None:
    """:func:`java_produce_many` of one topic."""
    keys = None if message_keys is None else {topic: message_keys}
    java_produce_many(
        service_url, {topic: (schema, values)}, message_keys=keys, batching=batching, jars=jars
    )


def java_consume_many(
    service_url: str, jobs: dict[str, tuple[Spec, int]], *, timeout: float = 30.0
) -> dict[str, list[dict[str, Any]]]:
    """Per topic of ``jobs`` (``{topic: (schema, count)}``), ``count`` messages read from
    the earliest by a Java consumer of ``schema`` (a new subscription), in one JVM: each
    ``{"value", "messageKey", "schemaVersion"}``, the value in JSON as SchemaTool writes it
    (KEY_VALUE: ``{"key", "value"}``)."""
    spec = [{"topic": t, "schema": s, "count": n} for t, (s, n) in jobs.items()]
    out = _run(
        ["consume", service_url, json.dumps(spec), str(int(timeout))],
        "",
        timeout * len(spec) + 60.0,
    )
    got: dict[str, list[dict[str, Any]]] = {topic: [] for topic in jobs}
    for row in out:
        got[row.pop("topic")].append(row)
    return got


def java_consume(
    service_url: str, topic: str, schema: Spec, count: int, *, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """:func:`java_consume_many` of one topic."""
    return java_consume_many(service_url, {topic: (schema, count)}, timeout=timeout)[topic]


def java_produce_protobuf_native(
    service_url: str,
    topic: str,
    messages: list[dict[str, Any]],
    *,
    batching: bool = True,
    jars: Path | None = None,
) -> None:
    """Sends ``messages`` (protobuf's JSON mapping of :data:`PROTOBUF_ORDER`'s ``Order``) as
    PROTOBUF_NATIVE: SchemaTool builds the descriptor, registers its SchemaInfo (the Java
    client's layout: a FileDescriptorSet with the timestamp.proto dependency) through
    ``AUTO_PRODUCE_BYTES`` and sends each ``DynamicMessage``'s bytes."""
    java_produce(service_url, topic, "PROTOBUF_NATIVE", messages, batching=batching, jars=jars)


def _naive(text: str) -> dt.datetime:
    """An ISO-8601 instant or local date-time (up to nanoseconds) as a naive UTC datetime,
    rounded down to the microsecond."""
    text = text.removesuffix("Z")
    whole, _, fraction = text.partition(".")
    micros = int((fraction + "000000")[:6]) if fraction else 0
    return dt.datetime.fromisoformat(whole).replace(microsecond=micros)


def _day_ms(ms: int) -> dt.date:
    return dt.date(1970, 1, 1) + dt.timedelta(days=ms // 86_400_000)


def _time_ms(ms: int) -> dt.time:
    ms %= 86_400_000
    return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)).time()


_EPOCH = dt.datetime(1970, 1, 1)
_MS = {
    "epoch": 0,
    "just before": -1,
    "2023": 1_700_000_000_123,
    "1900": -2_208_988_800_000,
    "Gregorian cutover": -12_219_292_800_000,
    "9999": 253_402_300_799_999,
}
_INSTANTS = [
    "1970-01-01T00:00:00Z",
    "1969-12-31T23:59:59.999999999Z",
    "2024-02-29T12:34:56.123456789Z",
    "1970-01-01T00:00:00.000000001Z",
    "1900-01-01T00:00:00.000001Z",
    "0001-01-01T00:00:00Z",
    "9999-12-31T23:59:59.999999999Z",
]
_LOCAL_TIMES = ["00:00:00", "23:59:59.999999999", "12:00:00.000001", "00:00:00.000000001"]
_LOCAL_DATE_TIMES = [
    "1970-01-01T00:00:00",
    "1969-12-31T23:59:59.999999",
    "2024-02-29T01:02:03.123456789",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59.999999",
]
_LOCAL_DATES = ["1970-01-01", "1969-12-31", "0001-01-01", "9999-12-31", "1582-10-10"]
_FLOATS: list[Any] = [1.5, -0.0, "NaN", "Infinity", "-Infinity", 3.4028234663852886e38]
_FLOATS.append(1.401298464324817e-45)
_DOUBLES: list[Any] = [2.5, -1e308, 5e-324, "NaN", "-Infinity", 1.7976931348623157e308, -0.0]
#: Text edge values: empty, accents, CJK and an emoji (a surrogate pair in UTF-16), NUL.
TEXTS = ["", "héllo", "日本語 🎉", "a\x00b"]
_BLOBS = [b"", b"\x00\xff\x10", bytes(range(256))]


def _number(value: Any) -> float:
    return float(value)  # "NaN", "Infinity", "-Infinity" included


def _nanos_of_day(text: str) -> int:
    whole, _, fraction = text.partition(".")
    t = dt.time.fromisoformat(whole)
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 10**9 + int((fraction + "0" * 9)[:9])


#: Per primitive schema type: the values SchemaTool sends (in JSON; None: a null value,
#: sent with ``null_value``) and what a typed read gives back as Python values (naive UTC
#: datetimes for TIMESTAMP and INSTANT; INSTANT, LOCAL_TIME and LOCAL_DATE_TIME rounded
#: down to the microsecond, as Spark holds them). Edge values: min/max, negative, NaN and
#: infinities, -0.0, subnormals, times before 1970, years 1 and 9999.
PRIMITIVE_EDGES: dict[str, tuple[list[Any], list[Any]]] = {
    "INT8": ([0, -1, 127, -128, None], [0, -1, 127, -128, None]),
    "INT16": ([-32768, 32767, -1, None], [-32768, 32767, -1, None]),
    "INT32": ([-(2**31), 2**31 - 1, 0, None], [-(2**31), 2**31 - 1, 0, None]),
    "INT64": ([-(2**63), 2**63 - 1, -5, None], [-(2**63), 2**63 - 1, -5, None]),
    "FLOAT": ([*_FLOATS, None], [*(_number(v) for v in _FLOATS), None]),
    "DOUBLE": ([*_DOUBLES, None], [*(_number(v) for v in _DOUBLES), None]),
    "BOOLEAN": ([True, False, None], [True, False, None]),
    "STRING": ([*TEXTS, None], [*TEXTS, None]),
    "BYTES": (
        [*(base64.b64encode(b).decode() for b in _BLOBS), None],
        [*_BLOBS, None],
    ),
    "DATE": ([*_MS.values(), None], [*(_day_ms(v) for v in _MS.values()), None]),
    "TIME": (
        [0, 45_296_789, 86_399_999, -1, None],
        [*(_time_ms(v) for v in (0, 45_296_789, 86_399_999, -1)), None],
    ),
    "TIMESTAMP": (
        [*_MS.values(), None],
        [*(_EPOCH + dt.timedelta(milliseconds=v) for v in _MS.values()), None],
    ),
    "INSTANT": ([*_INSTANTS, None], [*(_naive(v) for v in _INSTANTS), None]),
    "LOCAL_DATE": (
        [*_LOCAL_DATES, None],
        [*(dt.date.fromisoformat(v) for v in _LOCAL_DATES), None],
    ),
    "LOCAL_TIME": (
        [*_LOCAL_TIMES, None],
        [*(dt.time.fromisoformat(v[:15]) for v in _LOCAL_TIMES), None],
    ),
    "LOCAL_DATE_TIME": (
        [*_LOCAL_DATE_TIMES, None],
        [*(_naive(v) for v in _LOCAL_DATE_TIMES), None],
    ),
}

#: LOCAL_TIME as our client's Arrow column holds it (time64 ns): nanoseconds of the day.
LOCAL_TIME_NANOS = [*(_nanos_of_day(v) for v in _LOCAL_TIMES), None]


def same_values(got: list[Any], expected: list[Any]) -> bool:
    """Equal lists, of the same Python types, NaN equal to NaN and -0.0 told from 0.0."""
    if len(got) != len(expected):
        return False
    for a, b in zip(got, expected, strict=True):
        if isinstance(a, float) and isinstance(b, float):
            if not (math.isnan(a) and math.isnan(b)) and repr(a) != repr(b):
                return False
        elif a != b or type(a) is not type(b):
            return False
    return True


def from_java(kind: str, value: Any) -> Any:
    """A value of primitive type ``kind`` as a Java consumer printed it (SchemaTool's JSON),
    as :data:`PRIMITIVE_EDGES` holds it (LOCAL_TIME: nanoseconds of the day)."""
    if value is None:
        return None
    if kind in ("FLOAT", "DOUBLE"):
        return float(value)
    if kind == "BYTES":
        return base64.b64decode(value)
    if kind == "DATE":
        return dt.date(1970, 1, 1) + dt.timedelta(days=value // 86_400_000)
    if kind == "TIME":
        return (dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=value % 86_400_000)).time()
    if kind == "TIMESTAMP":
        return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=value)
    if kind in ("INSTANT", "LOCAL_DATE_TIME"):
        whole, _, fraction = value.removesuffix("Z").partition(".")
        base = dt.datetime.fromisoformat(whole)
        return base.replace(microsecond=int((fraction + "000000")[:6]) if fraction else 0)
    if kind == "LOCAL_DATE":
        return dt.date.fromisoformat(value)
    if kind == "LOCAL_TIME":
        whole, _, fraction = value.partition(".")
        t = dt.time.fromisoformat(whole if whole.count(":") == 2 else whole + ":00")
        return ((t.hour * 60 + t.minute) * 60 + t.second) * 10**9 + int((fraction + "0" * 9)[:9])
    return value
