"""Parsers of the options that shape the connector's subscriptions: ``subscriptionPrefix``.

The value goes to the client's ``subscription_prefix``
(:class:`~pulsar_spark.client.config.ClientConfig`), which names every
subscription the connector makes ``<prefix>-reader-<hex>``
(:mod:`pulsar_spark.client.read.sub_names`). Nothing here imports pyspark.
"""

from __future__ import annotations

from pulsar_spark.client import InvalidArgument
from pulsar_spark.client.read.sub_names import check_prefix

from ..errors import PulsarOptionError

__all__ = ["subscription_prefix"]


def subscription_prefix(name: str, value: str) -> str:
    """The prefix of the connector's subscription names: for a namespace with
    ``subscriptionAuthMode=Prefix``, the role's name (what the broker checks is that
    the subscription name starts with it).

    Raises:
        PulsarOptionError: naming ``name``: an empty value, one with ``/``, whitespace
            or control characters, or one starting with a name the broker reserves.
    """
    try:
        return check_prefix(value.strip())
    except InvalidArgument as exc:
        raise PulsarOptionError(name, f"{exc}; give the role name (e.g. 'team-a')") from None
