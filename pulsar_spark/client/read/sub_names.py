"""Names of the subscriptions the connector makes for itself (readers, last-id probes).

Every non-durable subscription the client creates is named ``reader-<10 hex>``,
or ``<prefix>-reader-<10 hex>`` when the client has a ``subscription_prefix``
(:class:`~.config.ClientConfig`): a fresh name on every SUBSCRIBE. (The Java
reader names its subscriptions the same way, with its ``subscriptionRolePrefix``.)

Why a prefix: a namespace whose policy has ``subscriptionAuthMode=Prefix``
lets a role (not a super-user) subscribe only with a subscription name that
starts with the role's name. Apache Pulsar's authorization provider checks
it as a plain string prefix (``subscription.startsWith(role)``) and refuses
others with AuthorizationError, suggesting ``<role>-xxxx``. So the prefix is
the role (or any name that starts with it), and the names made here are
``<prefix>-reader-<hex>``, which start with it whatever follows.

:func:`check_prefix` refuses what the broker would refuse or misread: an
empty or blank prefix, ``/`` (subscription names are path segments of the
admin REST API), whitespace and control characters, and the names the broker
keeps for itself (replication cursors ``pulsar.repl*``, the deduplication
cursor ``pulsar.dedup``, the compaction cursor ``__compaction``).
"""

from __future__ import annotations

import uuid

from ..errors import InvalidArgument

__all__ = ["READER", "check_prefix", "fresh_name"]

#: What the connector's subscription names say after the prefix (all of them, without one).
READER = "reader"
#: Subscription names the broker keeps for itself (refused or special on SUBSCRIBE).
RESERVED = ("pulsar.repl", "pulsar.dedup", "__compaction")
#: The longest prefix accepted (the broker sets no bound; this keeps names readable).
MAX_PREFIX = 200


def check_prefix(prefix: str) -> str:
    """``prefix`` when it can begin the connector's subscription names.

    Raises:
        InvalidArgument: an empty prefix, one with ``/``, whitespace or control
            characters, one longer than 200 characters, or one starting with a
            name the broker reserves; the message says which.
    """
    if not prefix:
        msg = "subscription prefix is empty"
        raise InvalidArgument(msg)
    if len(prefix) > MAX_PREFIX:
        msg = f"subscription prefix is {len(prefix)} characters long, at most {MAX_PREFIX}"
        raise InvalidArgument(msg)
    bad = sorted({ch for ch in prefix if ch == "/" or ch.isspace() or not ch.isprintable()})
    if bad:
        msg = f"subscription prefix {prefix!r} contains {', '.join(map(repr, bad))}"
        raise InvalidArgument(msg)
    for reserved in RESERVED:
        if prefix.startswith(reserved):
            msg = (
                f"subscription prefix {prefix!r} starts with {reserved!r}, a name the "
                "broker reserves for its own cursors"
            )
            raise InvalidArgument(msg)
    return prefix


def fresh_name(prefix: str | None = None) -> str:
    """A new subscription name: ``reader-<10 hex>``, or ``<prefix>-reader-<10 hex>``."""
    name = f"{READER}-{uuid.uuid4().hex[:10]}"
    return name if prefix is None else f"{prefix}-{name}"
