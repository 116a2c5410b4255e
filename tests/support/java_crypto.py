"""The Java client as an end-to-end encryption peer (``java/CryptoTool.java``): produce, consume.

The only official client that encrypts with EC keys (ECIES) is the Java one.
CryptoTool is compiled once against the distribution's ``lib/*`` into
``<cache>/java-crypto-<digest>/`` (a lock makes concurrent processes compile
it once), then each call runs one JVM with :data:`.java_client.JVM_FLAGS`:
:func:`java_produce_encrypted_many` produces to any number of topics, each with its own
key names, batching, codec and chunking, in one JVM (its start costs about 2 s).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .java_client import LOG_CONFIG, JavaClientError, compile_tool, run_tool

__all__ = ["java_consume_decrypted", "java_produce_encrypted", "java_produce_encrypted_many"]

SOURCE = Path(__file__).resolve().parent / "java" / "CryptoTool.java"


def _classes() -> Path:
    return compile_tool(SOURCE, "java-crypto")


def _run(
    args: list[str], stdin: str = "", timeout: float = 120.0, jars: Path | None = None
) -> list[dict[str, Any]]:
    assert LOG_CONFIG.exists()
    return run_tool(_classes(), "CryptoTool", args, stdin, timeout, jars=jars)


def java_produce_encrypted_many(
    service_url: str, jobs: Sequence[Mapping[str, Any]], *, jars: Path | None = None
) -> list[list[str]]:
    """Produce every job in one JVM (its start is the cost); the message ids of each job.

    A job: ``topic``, ``values`` (bytes, or dicts of ``value`` and optionally ``key``
    and ``properties``), ``public_keys`` (name -> URL: every name is an encryption key),
    and optionally ``batched`` (True), ``compression`` ("NONE") and ``chunk_max_size``
    (chunking on, at most that many bytes a chunk; needs ``batched=False``). ``jars``: the
    ``lib/`` of the Pulsar whose Java client produces (default: the distribution's).
    """
    lines = []
    for job in jobs:
        messages = [_message(v) for v in job["values"]]
        line = {
            "topic": job["topic"],
            "keys": dict(job["public_keys"]),
            "batched": bool(job.get("batched", True)),
            "compression": job.get("compression", "NONE"),
            "chunkMaxSize": job.get("chunk_max_size"),
            "messages": messages,
        }
        lines.append(json.dumps(line) + "\n")
    out = _run(["produce", service_url], "".join(lines), jars=jars)
    got: list[list[str]] = [[] for _ in jobs]
    for line in out:
        got[line["job"]].append(line["id"])
    for job, job_ids in zip(jobs, got, strict=True):
        if len(job_ids) != len(job["values"]):
            msg = f"CryptoTool sent {len(job_ids)} of {len(job['values'])} to {job['topic']}"
            raise JavaClientError(msg)
    return got


def _message(value: bytes | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, bytes):
        return {"value": base64.b64encode(value).decode()}
    return {
        "value": base64.b64encode(value["value"]).decode(),
        "key": value.get("key"),
        "properties": dict(value.get("properties") or {}),
    }


def java_produce_encrypted(
    service_url: str,
    topic: str,
    values: Sequence[bytes],
    public_keys: Mapping[str, str],
    *,
    batched: bool = True,
    compression: str = "NONE",
) -> list[str]:
    """Produce ``values`` encrypted for each key name of ``public_keys`` (name -> URL); ids."""
    job = {
        "topic": topic,
        "values": values,
        "public_keys": public_keys,
        "batched": batched,
        "compression": compression,
    }
    return java_produce_encrypted_many(service_url, [job])[0]


def java_consume_decrypted(
    service_url: str, topic: str, count: int, private_key_url: str, *, jars: Path | None = None
) -> list[tuple[bytes, list[str]]]:
    """The first ``count`` messages of ``topic`` the Java consumer decrypted: (value, keys);
    ``jars`` as for :func:`java_produce_encrypted_many`."""
    out = _run(["consume", service_url, topic, str(count), private_key_url], jars=jars)
    return [(base64.b64decode(line["value"]), line["keys"]) for line in out]
