"""What a broker can do, decided once from its CONNECTED answer: :class:`BrokerKind`
and :class:`Capabilities`.

Brokers that speak the Pulsar protocol differ in what they implement, and a
request the broker ignores waits for the whole operation timeout. The one
decision on what to ask of a broker is made here, from the ``server_version``
and ``protocol_version`` it sends in CONNECTED::

    broker          server_version (seen)     schema registry   GetOrCreateSchema
    Apache Pulsar   "Pulsar Server4.0.8"      yes               protocol >= 15
    pulsar-lite     "Pulsar-Lite-0.1.0"       no (never answers GET_SCHEMA)

Any broker that does not call itself pulsar-lite is taken for Apache Pulsar
(or a broker compatible with it, as StreamNative's are).

What differs between Apache Pulsar lines is decided from the release in
``server_version`` (:attr:`Capabilities.release`):

    behaviour                                   lines that have it
    GetLastMessageId may answer a marker        before 3.0.5, 3.1.x, 3.2 before 3.2.3
    (a transaction's commit or abort, a         (2.10.1 seen: a topic written in a
    replicated subscription's snapshot),        transaction answers its commit marker)
    which is never dispatched

Protocol features (transactions' TC_CLIENT_CONNECT, GET_OR_CREATE_SCHEMA) are decided
from ``protocol_version``.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

__all__ = ["BrokerKind", "Capabilities"]

#: The first protocol version with GET_OR_CREATE_SCHEMA.
_GET_OR_CREATE_SCHEMA_SINCE = 15
#: ``Pulsar Server2.10.1``, ``Pulsar Server4.0.8``: the release after the product name.
_RELEASE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
#: The first release of each line whose GetLastMessageId answers the last message a
#: consumer can be sent, never a marker; every line from 3.3 on does.
_LAST_ID_DISPATCHABLE_SINCE = {(3, 0): (3, 0, 5), (3, 2): (3, 2, 3)}
_LAST_ID_DISPATCHABLE_LINES = (3, 3)


class BrokerKind(enum.Enum):
    """Which broker implementation answered CONNECTED."""

    PULSAR = "pulsar"
    LITE = "pulsar-lite"

    @classmethod
    def of(cls, server_version: str) -> BrokerKind:
        """The kind of broker that sent ``server_version`` in CONNECTED."""
        if server_version.strip().lower().startswith("pulsar-lite"):
            return cls.LITE
        return cls.PULSAR


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What the broker of one connection implements (see the module's table)."""

    kind: BrokerKind
    server_version: str = ""
    protocol_version: int = 0

    @classmethod
    def of(cls, server_version: str, protocol_version: int) -> Capabilities:
        return cls(BrokerKind.of(server_version), server_version, protocol_version)

    @property
    def schema_registry(self) -> bool:
        """Whether the broker stores schemas and answers GET_SCHEMA: pulsar-lite
        does neither (it accepts any producer schema and stores no version)."""
        return self.kind is not BrokerKind.LITE

    @property
    def release(self) -> tuple[int, int, int] | None:
        """The Apache Pulsar release of the broker, from ``server_version``
        (``Pulsar Server2.10.1`` is ``(2, 10, 1)``); None for pulsar-lite and for a
        version string without one."""
        if self.kind is BrokerKind.LITE:
            return None
        found = _RELEASE.search(self.server_version)
        if found is None:
            return None
        major, minor, patch = found.groups()
        return (int(major), int(minor), int(patch or 0))

    @property
    def last_id_may_be_marker(self) -> bool:
        """Whether GetLastMessageId may answer the position of a marker (a
        transaction's commit or abort, a replicated subscription's snapshot) that no
        consumer is ever sent: a read up to that id cannot see its end arrive. Apache
        Pulsar fixed it in 3.0.5, 3.2.3 and 3.3; an unknown release is taken as fixed."""
        release = self.release
        if release is None or release[:2] >= _LAST_ID_DISPATCHABLE_LINES:
            return False
        since = _LAST_ID_DISPATCHABLE_SINCE.get(release[:2])
        return since is None or release < since

    @property
    def get_or_create_schema(self) -> bool:
        """Whether the broker answers GET_OR_CREATE_SCHEMA."""
        return self.schema_registry and self.protocol_version >= _GET_OR_CREATE_SCHEMA_SINCE
