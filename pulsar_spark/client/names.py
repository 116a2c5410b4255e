"""Service URLs and topic names.

Service URL::

    pulsar://host[:port][,host[:port]...][/]        port 6650 by default
    pulsar+ssl://host[:port][,host[:port]...][/]    port 6651 by default, TLS

Topic names::

    name                              -> persistent://public/default/name
    tenant/namespace/name             -> persistent://tenant/namespace/name
    domain://tenant/namespace/name       (domain: persistent | non-persistent)
    domain://tenant/cluster/namespace/name   (legacy V1 form)

A partition of a partitioned topic is the topic ``<name>-partition-<N>``
(:mod:`..protocol.topics` parses and builds those names).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from pulsar_spark.protocol.topics import base_topic, partition_name

from .errors import InvalidServiceUrl, InvalidTopicName

__all__ = ["ServiceUrl", "TopicName", "parse_service_url", "parse_topic"]

_DEFAULT_PORTS = {"pulsar": 6650, "pulsar+ssl": 6651}
_DOMAINS = ("persistent", "non-persistent")


@dataclass(frozen=True, slots=True)
class ServiceUrl:
    """A parsed service URL: scheme and one or more (host, port) pairs."""

    scheme: str
    hosts: tuple[tuple[str, int], ...]

    @property
    def tls(self) -> bool:
        return self.scheme == "pulsar+ssl"

    def __str__(self) -> str:
        hosts = ",".join(f"{h}:{p}" for h, p in self.hosts)
        return f"{self.scheme}://{hosts}"


def parse_service_url(url: str) -> ServiceUrl:
    """Parse a service URL.

    Raises:
        InvalidServiceUrl: with the URL and what is wrong with it.
    """
    text = url.strip() if isinstance(url, str) else ""
    scheme, sep, rest = text.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in _DEFAULT_PORTS:
        msg = (
            f"service URL {url!r} must start with pulsar:// or pulsar+ssl:// "
            "(HTTP admin URLs are not service URLs)"
        )
        raise InvalidServiceUrl(msg)
    rest = rest.rstrip("/")
    if not rest or "/" in rest:
        msg = f"service URL {url!r} must be scheme://host[:port][,host[:port]...]"
        raise InvalidServiceUrl(msg)
    hosts = []
    for part in rest.split(","):
        parsed = urlsplit(f"//{part.strip()}")
        try:
            port = parsed.port
        except ValueError:
            port = -1
        host = parsed.hostname
        if not host or port == -1:
            msg = f"service URL {url!r} has a bad host:port {part!r}"
            raise InvalidServiceUrl(msg)
        hosts.append((host, port or _DEFAULT_PORTS[scheme]))
    return ServiceUrl(scheme, tuple(hosts))


@dataclass(frozen=True, slots=True)
class TopicName:
    """A fully qualified topic name, split into its parts."""

    domain: str
    namespace: str  # tenant/namespace (or tenant/cluster/namespace)
    local: str  # the name, with any -partition-N suffix
    partition: int = -1

    def __str__(self) -> str:
        return f"{self.domain}://{self.namespace}/{self.local}"

    @property
    def base(self) -> TopicName:
        """The partitioned topic this partition belongs to (itself if none)."""
        if self.partition < 0:
            return self
        local, _ = base_topic(self.local)
        return TopicName(self.domain, self.namespace, local)

    def partition_name(self, index: int) -> TopicName:
        """The topic of partition ``index`` of this (base) topic."""
        return TopicName(self.domain, self.namespace, partition_name(self.local, index), index)

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"


def parse_topic(name: str) -> TopicName:
    """Normalise a topic name to its full form.

    Raises:
        InvalidTopicName: with the name and what is wrong with it.
    """
    if not isinstance(name, str) or not name.strip():
        msg = f"topic name {name!r} is empty"
        raise InvalidTopicName(msg)
    text = name.strip()
    domain, sep, rest = text.partition("://")
    if not sep:
        domain, rest = "persistent", text
        parts = rest.split("/")
        if len(parts) == 1:
            parts = ["public", "default", parts[0]]
        elif len(parts) != 3:
            msg = (
                f"topic name {name!r} must be 'name', 'tenant/namespace/name' or "
                "'persistent://tenant/namespace/name'"
            )
            raise InvalidTopicName(msg)
    else:
        if domain not in _DOMAINS:
            msg = f"topic name {name!r} has domain {domain!r}; expected one of {_DOMAINS}"
            raise InvalidTopicName(msg)
        parts = rest.split("/")
        if len(parts) not in (3, 4):
            msg = f"topic name {name!r} must be {domain}://tenant/namespace/name"
            raise InvalidTopicName(msg)
    if any(not p for p in parts):
        msg = f"topic name {name!r} has an empty part"
        raise InvalidTopicName(msg)
    local = parts[-1]
    _, partition = base_topic(local)
    return TopicName(domain, "/".join(parts[:-1]), local, partition)
