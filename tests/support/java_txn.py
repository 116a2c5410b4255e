"""The Java client as a transactions peer (``java/TxnTool.java``): transactional produce,
and a consumer with the default isolation (committed messages only).

Neither pulsar-lite nor the official Python client has transactions, so the Java client
of the distribution (4.0.8) is the peer: :func:`java_produce_steps` writes values in
named transactions it commits, aborts or leaves open, and plain ones, in order, on one
non-batching producer; :func:`java_consume_all` reads a topic from the earliest until it
stays idle. Each call runs one JVM (about 2 s).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .java_client import compile_tool, run_tool

__all__ = ["commit", "java_consume_all", "java_produce_steps", "send"]

SOURCE = Path(__file__).resolve().parent / "java" / "TxnTool.java"


def send(value: str, txn: str | None = None) -> dict[str, Any]:
    """A step: ``value`` sent in transaction ``txn`` (opened on its first use), or in none."""
    return {"value": value, "txn": txn}


def commit(txn: str, *, abort: bool = False) -> dict[str, Any]:
    """A step: transaction ``txn`` committed (or aborted)."""
    return {"end": txn, "action": "abort" if abort else "commit"}


def java_produce_steps(service_url: str, topic: str, steps: list[dict[str, Any]]) -> None:
    """Runs ``steps`` (:func:`send` and :func:`commit`) in order with a Java producer."""
    classes = compile_tool(SOURCE, "java-txn")
    stdin = "\n".join(json.dumps(step) for step in steps)
    out = run_tool(classes, "TxnTool", ["produce", service_url, topic], stdin, 180.0)
    sent = sum(1 for step in steps if "value" in step)
    assert out == [{"sent": sent}], out


def java_consume_all(service_url: str, topic: str, *, idle: int = 5) -> list[str]:
    """What a Java consumer with the default isolation reads of ``topic`` from the
    earliest, until nothing comes for ``idle`` seconds."""
    classes = compile_tool(SOURCE, "java-txn")
    out = run_tool(classes, "TxnTool", ["consume", service_url, topic, str(idle)], "", 120.0)
    return [row["value"] for row in out]
