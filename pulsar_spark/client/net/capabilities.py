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
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["BrokerKind", "Capabilities"]

#: The first protocol version with GET_OR_CREATE_SCHEMA.
_GET_OR_CREATE_SCHEMA_SINCE = 15


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
    def get_or_create_schema(self) -> bool:
        """Whether the broker answers GET_OR_CREATE_SCHEMA."""
        return self.schema_registry and self.protocol_version >= _GET_OR_CREATE_SCHEMA_SINCE
