"""Official-client helpers for tests: produce, read back and list partitions with ``pulsar``.

:func:`produce`, :func:`read_all`, :func:`topic_partitions` and :func:`official_client` use
the official ``pulsar`` package (pulsar-client), imported lazily; :func:`mixed_messages`
makes messages that vary what they carry. Message ids are strings in the connector's
``messageId`` column format, ``ledgerId:entryId:partition:batchIndex``.

pulsar-lite 0.2.0 behaviours that shape :func:`read_all` (more in its docstring):

- GetLastMessageId answers without ``batch_index``.
- It sometimes dispatches entries to a consumer twice, and a reconnecting reader is served
  from its subscription's original start, not from the ``start_message_id`` it sends.
- Reading ~100k messages, a FLOW now and then fails with ``Flow-triggered dispatch failed:
  out of range integral type conversion attempted`` (or ``Error handling command: ...``,
  closing the connection); after that the consumer gets nothing more (about 1 read of
  100k in 10). Keep official-client reads in tests small.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pulsar_spark.protocol.topics import base_topic

if TYPE_CHECKING:
    import pulsar

__all__ = [
    "CODECS",
    "compression_type",
    "message_id_str",
    "mixed_messages",
    "official_client",
    "produce",
    "read_all",
    "topic_partitions",
]

#: Codec names as the connector spells them.
CODECS = ("NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY")


def _pulsar() -> Any:
    import pulsar

    return pulsar


def compression_type(codec: str | Any) -> Any:
    """``pulsar.CompressionType`` for a codec name (NONE, LZ4, ZLIB, ZSTD, SNAPPY) or enum."""
    ct = _pulsar().CompressionType
    if not isinstance(codec, str):
        return codec
    table = {
        "NONE": ct.NONE,
        "LZ4": ct.LZ4,
        "ZLIB": ct.ZLib,
        "ZSTD": ct.ZSTD,
        "SNAPPY": ct.SNAPPY,
    }
    try:
        return table[codec.upper()]
    except KeyError:
        msg = f"unknown codec {codec!r}; expected one of {CODECS}"
        raise ValueError(msg) from None


def message_id_str(mid: Any) -> str:
    """An official ``MessageId`` as ``ledgerId:entryId:partition:batchIndex``."""
    return f"{mid.ledger_id()}:{mid.entry_id()}:{mid.partition()}:{mid.batch_index()}"


@contextlib.contextmanager
def official_client(
    service_url: str, *, operation_timeout_seconds: int = 15, **kwargs: Any
) -> Iterator[pulsar.Client]:
    """A ``pulsar.Client`` logging warnings and errors only (to stdout), closed on exit."""
    pulsar = _pulsar()
    kwargs.setdefault("logger", pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn))
    client = pulsar.Client(
        service_url, operation_timeout_seconds=operation_timeout_seconds, **kwargs
    )
    try:
        yield client
    finally:
        # Closing fails when the connection broke at the wrong moment (a FaultProxy drop
        # during CLOSE_PRODUCER): nothing to do about it, and every send was confirmed.
        with contextlib.suppress(pulsar.PulsarException):
            client.close()


def _as_message(item: Mapping[str, Any] | bytes | str) -> dict[str, Any]:
    if isinstance(item, Mapping):
        return dict(item)
    return {"value": item}


def mixed_messages(n: int, *, start: int = 0) -> list[dict[str, Any]]:
    """Messages numbered ``start``.. that vary what they carry, for :func:`produce`: a
    value of varying length always; a key on 3 of 4; properties (one non-ASCII) on 2 of 3;
    an event time on every other one."""
    out = []
    for i in range(start, start + n):
        message: dict[str, Any] = {"value": f"value-{i}".encode() * (1 + i % 3)}
        if i % 4:
            message["key"] = f"key-{i % 5}"
        if i % 3:
            message["properties"] = {"i": str(i), "ü": "ñ"}
        if i % 2:
            message["event_time"] = 1_700_000_000_000 + i
        out.append(message)
    return out


def produce(
    service_url: str,
    topic: str,
    messages: Iterable[Mapping[str, Any] | bytes | str],
    *,
    batching: bool = True,
    compression: str | Any = "NONE",
    batching_max_messages: int = 1000,
    batching_max_publish_delay_ms: int = 10,
    batching_max_allowed_size_in_bytes: int = 128 * 1024,
    producer_name: str | None = None,
    send_timeout_millis: int = 30_000,
    max_pending_messages: int = 1000,
    timeout: float = 120.0,
    client_options: Mapping[str, Any] | None = None,
    **producer_options: Any,
) -> list[str]:
    """Produce ``messages`` with the official client; return their ids, in order.

    Each message is a dict with ``value`` (bytes or str) and optionally ``key`` (str),
    ``properties`` (dict of str) and ``event_time`` (ms), or just the value. Messages are
    sent asynchronously and flushed, so with ``batching`` they really share batches.
    Raises ``RuntimeError`` if any send fails.
    """
    pulsar = _pulsar()
    items = [_as_message(m) for m in messages]
    ids: list[str | None] = [None] * len(items)
    failures: list[str] = []
    done = threading.Semaphore(0)

    def callback_for(i: int) -> Callable[[Any, Any], None]:
        def callback(result: Any, mid: Any) -> None:
            if result == pulsar.Result.Ok:
                ids[i] = message_id_str(mid)
            else:
                failures.append(f"message {i}: {result}")
            done.release()

        return callback

    with official_client(service_url, **(client_options or {})) as client:
        _refuse_double_partition(client, topic)
        producer = client.create_producer(
            topic,
            producer_name=producer_name,
            batching_enabled=batching,
            batching_max_messages=batching_max_messages,
            batching_max_publish_delay_ms=batching_max_publish_delay_ms,
            batching_max_allowed_size_in_bytes=batching_max_allowed_size_in_bytes,
            compression_type=compression_type(compression),
            send_timeout_millis=send_timeout_millis,
            max_pending_messages=max_pending_messages,
            block_if_queue_full=True,
            **producer_options,
        )
        try:
            for i, m in enumerate(items):
                value = m["value"]
                if isinstance(value, str):
                    value = value.encode("utf-8")
                kwargs: dict[str, Any] = {}
                if m.get("key") is not None:
                    kwargs["partition_key"] = m["key"]
                if m.get("properties"):
                    kwargs["properties"] = dict(m["properties"])
                if m.get("event_time") is not None:
                    kwargs["event_timestamp"] = int(m["event_time"])
                producer.send_async(value, callback_for(i), **kwargs)
            producer.flush()
            deadline = time.monotonic() + timeout
            for _ in items:
                if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    missing = sum(1 for x in ids if x is None) - len(failures)
                    msg = f"{missing} sends to {topic} unconfirmed after {timeout} s"
                    raise RuntimeError(msg)
        finally:
            with contextlib.suppress(pulsar.PulsarException):
                producer.close()
    if failures:
        msg = f"{len(failures)} sends to {topic} failed: " + "; ".join(failures[:10])
        raise RuntimeError(msg)
    return [x for x in ids if x is not None]


def _refuse_double_partition(client: Any, topic: str) -> None:
    """Stop before the official client aborts the process (brokers.md, quirk 3).

    On a pulsar-lite with ``default_partitions > 0``, ``t-partition-1`` is itself
    partitioned, the client goes for ``t-partition-1-partition-K`` and a Reader there dies
    with ``std::future_error`` (``terminate called``), taking pytest down with it.
    """
    if base_topic(topic)[1] < 0:  # not a partition's name
        return
    parts = list(client.get_topic_partitions(topic))
    if parts != [topic]:
        msg = (
            f"{topic} names a partition, yet the broker says it has partitions of its own "
            f"({parts[0]}, ...): a pulsar-lite with default_partitions > 0 (brokers.md, "
            "quirk 3). Use the base topic name with the official client."
        )
        raise ValueError(msg)


def _message_dict(msg: Any) -> dict[str, Any]:
    mid = msg.message_id()
    key = msg.partition_key()
    event_time = msg.event_timestamp()
    return {
        "value": msg.data(),
        "key": key or None,
        "properties": dict(msg.properties()),
        "event_time": event_time or None,
        "publish_time": msg.publish_timestamp(),
        "message_id": message_id_str(mid),
        "partition": mid.partition(),
        "topic": msg.topic_name(),
        "producer_name": msg.producer_name(),
    }


def read_all(
    service_url: str,
    topic: str,
    *,
    start: Any = None,
    start_inclusive: bool = False,
    at_least: int = 0,
    dedupe: bool = True,
    read_timeout_ms: int = 10_000,
    batch_drain_ms: int = 300,
    receiver_queue_size: int = 1000,
    empty_ok: bool = True,
    client_options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Read ``topic`` with an official Reader from ``start`` (earliest) to the end.

    Reads until ``has_message_available()`` is false, and in any case until ``at_least``
    (distinct) messages have come. Each message becomes a dict: ``value`` (bytes), ``key``
    (str or None), ``properties``, ``event_time`` (ms or None), ``publish_time``,
    ``message_id``, ``partition``, ``topic``, ``producer_name``.

    Behaviours to know (pulsar-lite 0.2.0, pulsar-client 3.13):

    - pulsar-lite sometimes dispatches entries to a consumer twice (seen past the first
      ~700 of a few thousand messages, once FLOW permits follow one another; its debug
      log shows the repeated ``Sent message L:E``). With ``dedupe`` (the default) a
      message id seen before is dropped, so the result is what the topic holds.
    - pulsar-lite answers GetLastMessageId on a topic without messages with an error
      (brokers.md, quirk 2), which the client raises as ``UnknownError`` from the first
      ``has_message_available()``; with ``empty_ok`` (the default) that reads as an empty
      topic.
    - pulsar-lite's GetLastMessageId response carries no ``batch_index`` (the last entry's
      id only), so the official reader's ``has_message_available()`` turns False as soon
      as its queue runs dry while still inside the topic's last batch (seen under CPU
      load: 1 to 44 of a 100-message batch, then "no more"). When it says False right
      after a batched message, this keeps reading until nothing comes for
      ``batch_drain_ms`` (the rest of the batch is already in the client's memory).
    - Under CPU load, after many resent messages, ``has_message_available()`` has said
      True with nothing coming for ``read_timeout_ms``: once ``at_least`` messages came,
      that ends the read (without ``at_least`` it is still a ``TimeoutError``).
    - When the connection breaks while ``has_message_available()`` waits for
      GetLastMessageId, the official client logs ``Failed to getLastMessageId:
      ResultDisconnected`` and returns **False** instead of raising; ``at_least`` (the
      number of messages known to be there) keeps reading regardless.
    - A reader that reconnects re-subscribes (same non-durable subscription name) with
      ``start_message_id`` = the last message it got, but pulsar-lite keeps the old
      subscription and dispatches from its original start again; the client drops what
      it has seen. Through a :class:`FaultProxy` that drops every K frames, a reader thus
      never gets past the first ~K messages: read the result from the broker directly.
    """
    pulsar = _pulsar()
    start = pulsar.MessageId.earliest if start is None else start
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    with official_client(service_url, **(client_options or {})) as client:
        _refuse_double_partition(client, topic)
        reader = client.create_reader(
            topic,
            start,
            start_message_id_inclusive=start_inclusive,
            receiver_queue_size=receiver_queue_size,
        )
        try:
            if at_least <= 0:
                try:
                    if not reader.has_message_available():
                        return out
                except pulsar.UnknownError:
                    if not empty_ok:
                        raise
                    return out
            in_batch = False  # the last message came from a batch
            while True:
                if len(out) < at_least or reader.has_message_available():
                    try:
                        msg = reader.read_next(read_timeout_ms)
                    except pulsar.Timeout:
                        if at_least and len(out) >= at_least:
                            # has_message_available() said more, and nothing came: seen
                            # under CPU load after many resends; what is needed is here.
                            break
                        err = (
                            f"{topic}: no message within {read_timeout_ms} ms after "
                            f"{len(out)} (expected at least {at_least})"
                        )
                        raise TimeoutError(err) from None
                elif in_batch and batch_drain_ms > 0:
                    # GetLastMessageId said "end" but may be in the middle of the last batch.
                    try:
                        msg = reader.read_next(batch_drain_ms)
                    except pulsar.Timeout:
                        break
                else:
                    break
                in_batch = msg.message_id().batch_index() >= 0
                item = _message_dict(msg)
                if dedupe:
                    if item["message_id"] in seen:
                        continue
                    seen.add(item["message_id"])
                out.append(item)
        finally:
            with contextlib.suppress(pulsar.PulsarException):
                reader.close()
    return out


def topic_partitions(service_url: str, topic: str) -> list[str]:
    """``client.get_topic_partitions(topic)``: the partition topic names (or the topic)."""
    with official_client(service_url) as client:
        return list(client.get_topic_partitions(topic))
