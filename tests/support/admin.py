"""A small Apache Pulsar admin client over the REST API (``/admin/v2``), standard library only.

Used by the Apache Pulsar fixtures (:mod:`tests.support.apache`) and by tests that need
partitioned-topic admin, deduplication, retention, unload, terminate or stats::

    admin = PulsarAdmin("http://127.0.0.1:8080")
    admin.create_partitioned_topic("persistent://public/default/t", 2)
    admin.update_partitions("persistent://public/default/t", 4)
    admin.unload("persistent://public/default/t-partition-0")
    admin.stats("persistent://public/default/t-partition-0")["msgInCounter"]

Topics are full names (``persistent://tenant/ns/name``) or short ones (``name``, taken as
``persistent://public/default/name``). Every failure raises :class:`AdminError`, whose
message names the method, the URL, the HTTP status and the body the broker sent.
"""

from __future__ import annotations

import json
import ssl
import struct
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any

from .net import poll_until

__all__ = ["AdminError", "PulsarAdmin", "batch_items", "examine_message", "topic_path"]


class AdminError(RuntimeError):
    """An admin request failed: ``status`` is None when no HTTP answer came at all."""

    def __init__(self, method: str, url: str, status: int | None, body: str) -> None:
        what = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{method} {url}: {what}: {body}")
        self.method = method
        self.url = url
        self.status = status
        self.body = body


def topic_path(topic: str) -> str:
    """``persistent://t/ns/name`` -> ``persistent/t/ns/name`` (URL-quoted), as the API wants."""
    if "://" in topic:
        domain, rest = topic.split("://", 1)
    else:
        domain, rest = "persistent", topic
    parts = rest.split("/")
    if len(parts) == 1:
        parts = ["public", "default", parts[0]]
    if len(parts) != 3 or not all(parts) or domain not in ("persistent", "non-persistent"):
        msg = f"not a topic name: {topic!r} (expected [persistent://]tenant/namespace/name)"
        raise ValueError(msg)
    tenant, namespace, name = parts
    return f"{domain}/{tenant}/{namespace}/{urllib.parse.quote(name, safe='')}"


def examine_message(http_url: str, topic: str, position: int) -> tuple[dict[str, str], bytes]:
    """The broker's stored entry of ``topic`` at ``position`` (1 = earliest), through its
    ``examinemessage`` endpoint: the entry's headers (``X-Pulsar-*``) and payload."""
    url = (
        f"{http_url}/admin/v2/{topic_path(topic)}/examinemessage"
        f"?initialPosition=earliest&messagePosition={position}"
    )
    with urllib.request.urlopen(url, timeout=30) as response:
        return dict(response.headers.items()), response.read()


def batch_items(payload: bytes) -> list[Any]:
    """The items' SingleMessageMetadata of a stored batch entry's payload (uncompressed,
    as :func:`examine_message` returns it)."""
    from pulsar_spark.protocol import PulsarApi_pb2 as pb

    out, at = [], 0
    while at < len(payload):
        (size,) = struct.unpack_from(">I", payload, at)
        item = pb.SingleMessageMetadata.FromString(payload[at + 4 : at + 4 + size])
        out.append(item)
        at += 4 + size + item.payload_size
    return out


def _namespace_path(namespace: str) -> str:
    parts = namespace.split("/")
    if len(parts) != 2 or not all(parts):
        msg = f"not a namespace: {namespace!r} (expected tenant/namespace)"
        raise ValueError(msg)
    return "/".join(urllib.parse.quote(p, safe="") for p in parts)


class PulsarAdmin:
    """Admin calls on one broker's web service.

    Args:
        http_url: ``http://host:port`` or ``https://host:port``.
        token: a JWT sent as ``Authorization: Bearer``.
        ca_file: CA bundle that signs an ``https`` broker's certificate.
        cert_file, key_file: a client certificate for mutual TLS.
        timeout: seconds per request.
    """

    def __init__(
        self,
        http_url: str,
        *,
        token: str | Callable[[], str] | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.http_url = http_url.rstrip("/")
        self._token = token
        self.timeout = timeout
        self._context: ssl.SSLContext | None = None
        if self.http_url.startswith("https://"):
            self._context = ssl.create_default_context(cafile=ca_file)
            if cert_file:
                self._context.load_cert_chain(cert_file, key_file)

    def __repr__(self) -> str:
        return f"<PulsarAdmin {self.http_url}>"

    # -- plumbing ------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """``method`` on ``/admin/v2/<path>``; the decoded JSON answer (None when empty).

        ``body`` is sent as JSON. Any status outside 2xx raises :class:`AdminError`.
        """
        url = f"{self.http_url}/admin/v2/{path.lstrip('/')}"
        if params:
            url += "?" + urllib.parse.urlencode(
                {k: str(v).lower() if isinstance(v, bool) else v for k, v in params.items()}
            )
        data = None if body is None else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            token = self._token() if callable(self._token) else self._token
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(
                req, timeout=self.timeout if timeout is None else timeout, context=self._context
            ) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            text = exc.read()[:2000].decode("utf-8", "replace")
            raise AdminError(method, url, exc.code, text or exc.reason) from None
        except (OSError, ValueError) as exc:
            raise AdminError(method, url, None, str(getattr(exc, "reason", exc))) from exc
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    # -- cluster, tenants, namespaces -------------------------------------------------

    def clusters(self) -> list[str]:
        return self.request("GET", "clusters")

    def namespaces(self, tenant: str) -> list[str]:
        return self.request("GET", f"namespaces/{urllib.parse.quote(tenant, safe='')}")

    def create_namespace(self, namespace: str, clusters: Iterable[str] = ("standalone",)) -> None:
        self.request(
            "PUT",
            f"namespaces/{_namespace_path(namespace)}",
            {"replication_clusters": list(clusters)},
        )

    def grant_permission(self, namespace: str, role: str, actions: Iterable[str]) -> None:
        """Grant ``role`` the ``actions`` (``produce``, ``consume``, ...) on ``namespace``."""
        self.request(
            "POST",
            f"namespaces/{_namespace_path(namespace)}/permissions/"
            f"{urllib.parse.quote(role, safe='')}",
            list(actions),
        )

    def set_namespace_deduplication(self, namespace: str, enabled: bool) -> None:
        self.request("POST", f"namespaces/{_namespace_path(namespace)}/deduplication", enabled)

    def set_namespace_retention(self, namespace: str, minutes: int = -1, size_mb: int = -1) -> None:
        """Retention of acknowledged messages (``-1`` = unlimited)."""
        self.request(
            "POST",
            f"namespaces/{_namespace_path(namespace)}/retention",
            {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb},
        )

    def set_subscription_expiration(self, namespace: str, minutes: int) -> None:
        """Delete subscriptions with no consumer for ``minutes`` (the namespace policy)."""
        self.request(
            "POST", f"namespaces/{_namespace_path(namespace)}/subscriptionExpirationTime", minutes
        )

    def unload_namespace(self, namespace: str) -> None:
        self.request("PUT", f"namespaces/{_namespace_path(namespace)}/unload")

    # -- topics ------------------------------------------------------------------------

    def create_topic(self, topic: str) -> None:
        """Create a non-partitioned topic."""
        self.request("PUT", topic_path(topic))

    def create_partitioned_topic(self, topic: str, partitions: int) -> None:
        self.request("PUT", f"{topic_path(topic)}/partitions", partitions)

    def update_partitions(self, topic: str, partitions: int) -> None:
        """Grow a partitioned topic to ``partitions`` (the broker refuses to shrink one)."""
        self.request("POST", f"{topic_path(topic)}/partitions", partitions)

    def partitions(self, topic: str) -> int:
        """The partition count (0 for a topic that is not partitioned)."""
        return int(self.request("GET", f"{topic_path(topic)}/partitions")["partitions"])

    def list_topics(self, namespace: str = "public/default") -> list[str]:
        return self.request("GET", f"persistent/{_namespace_path(namespace)}")

    def set_deduplication(self, topic: str, enabled: bool) -> None:
        """Topic-level deduplication policy (needs ``topicLevelPoliciesEnabled``)."""
        self.request("POST", f"{topic_path(topic)}/deduplicationEnabled", enabled)

    def get_deduplication(self, topic: str, applied: bool = True) -> bool | None:
        """The deduplication setting in force (``applied``) or set on the topic itself."""
        return self.request(
            "GET", f"{topic_path(topic)}/deduplicationEnabled", params={"applied": applied}
        )

    def set_retention(self, topic: str, minutes: int = -1, size_mb: int = -1) -> None:
        """Topic-level retention (``-1`` = unlimited)."""
        self.request(
            "POST",
            f"{topic_path(topic)}/retention",
            {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb},
        )

    def get_retention(self, topic: str, applied: bool = True) -> dict[str, int] | None:
        return self.request("GET", f"{topic_path(topic)}/retention", params={"applied": applied})

    def apply_retention(
        self, topic: str, minutes: int = -1, size_mb: int = -1, timeout: float = 30.0
    ) -> None:
        """:meth:`set_retention`, then wait until the broker applies it (topic policies
        travel through a system topic)."""
        self.set_retention(topic, minutes, size_mb)
        wanted = {"retentionTimeInMinutes": minutes, "retentionSizeInMB": size_mb}
        self.wait_until(
            lambda: all((self.get_retention(topic) or {}).get(k) == v for k, v in wanted.items()),
            timeout,
            f"retention {minutes} min / {size_mb} MB on {topic}",
        )

    def unload(self, topic: str) -> None:
        """Unload a topic (or, for a partitioned one, every partition): clients reconnect."""
        self.request("PUT", f"{topic_path(topic)}/unload")

    def terminate(self, topic: str) -> str:
        """Terminate a non-partitioned topic (or one partition); returns its last message
        id as ``ledger:entry``."""
        answer = self.request("POST", f"{topic_path(topic)}/terminate")
        if isinstance(answer, dict):
            return f"{answer.get('ledgerId')}:{answer.get('entryId')}"
        return str(answer)

    def terminate_partitioned_topic(self, topic: str) -> Any:
        return self.request("POST", f"{topic_path(topic)}/terminate/partitions")

    def delete(self, topic: str, force: bool = True) -> None:
        """Delete a non-partitioned topic or one partition."""
        self.request("DELETE", topic_path(topic), params={"force": force})

    def delete_partitioned_topic(self, topic: str, force: bool = True) -> None:
        self.request("DELETE", f"{topic_path(topic)}/partitions", params={"force": force})

    def stats(self, topic: str) -> dict[str, Any]:
        """Topic stats (``msgInCounter``, ``publishers``, ``subscriptions``, ...)."""
        return self.request("GET", f"{topic_path(topic)}/stats")

    def partitioned_stats(self, topic: str, per_partition: bool = True) -> dict[str, Any]:
        return self.request(
            "GET",
            f"{topic_path(topic)}/partitioned-stats",
            params={"perPartition": per_partition},
        )

    def internal_stats(self, topic: str) -> dict[str, Any]:
        """Managed-ledger stats (``entriesAddedCounter``, ``ledgers``, ``cursors``, ...)."""
        return self.request("GET", f"{topic_path(topic)}/internalStats")

    def wait_until(
        self, check: Callable[[], bool], timeout: float = 10.0, what: str = "condition"
    ) -> None:
        """Poll ``check`` every 0.1 s until it returns true; ``TimeoutError`` naming ``what``."""
        if not poll_until(check, timeout):
            msg = f"{what}: not reached within {timeout:g} s on {self.http_url}"
            raise TimeoutError(msg)
