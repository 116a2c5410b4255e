"""The Java client as an end-to-end encryption peer (``java/CryptoTool.java``): produce, consume.

The only official client that encrypts with EC keys (ECIES) is the Java one.
CryptoTool is compiled once against the distribution's ``lib/*`` into
``<cache>/java-crypto-<digest>/`` (a lock makes concurrent processes compile
it once), then each call runs one JVM with :data:`.java_client.JVM_FLAGS`.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .apache_dist import ensure_distribution, java
from .java_client import JVM_FLAGS, LOG_CONFIG, JavaClientError, compile_tool

__all__ = ["java_consume_decrypted", "java_produce_encrypted"]

SOURCE = Path(__file__).resolve().parent / "java" / "CryptoTool.java"


def _classes() -> Path:
    return compile_tool(SOURCE, "java-crypto")


def _run(args: list[str], stdin: str = "", timeout: float = 120.0) -> list[dict[str, Any]]:
    exe, _ = java()
    lib = ensure_distribution() / "lib"
    command = [exe, *JVM_FLAGS, "-cp", f"{_classes()}:{lib}/*", "CryptoTool", *args]
    assert LOG_CONFIG.exists()
    try:
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        msg = f"CryptoTool {args[:3]} did not finish in {timeout} s"
        raise JavaClientError(msg) from None
    if done.returncode != 0:
        msg = (
            f"CryptoTool {args[:3]} exited {done.returncode}:\n{done.stderr[-4000:]}"
            f"\nstdout: {done.stdout[-1000:]}"
        )
        raise JavaClientError(msg)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


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
    stdin = "".join(base64.b64encode(v).decode() + "\n" for v in values)
    args = ["produce", service_url, topic, str(batched).lower(), compression]
    out = _run([*args, json.dumps(dict(public_keys))], stdin)
    return [line["id"] for line in out]


def java_consume_decrypted(
    service_url: str, topic: str, count: int, private_key_url: str
) -> list[tuple[bytes, list[str]]]:
    """The first ``count`` messages of ``topic`` the Java consumer decrypted: (value, keys)."""
    out = _run(["consume", service_url, topic, str(count), private_key_url])
    return [(base64.b64decode(line["value"]), line["keys"]) for line in out]
