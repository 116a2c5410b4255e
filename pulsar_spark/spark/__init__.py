"""The Spark layer: the ``pulsar`` source and sink, batch and streaming (pyspark 4.0+).

- :mod:`.datasource`: ``PulsarDataSource``, the ``pulsar`` format; it builds the readers and
  writers below. ``PulsarDataSource`` and ``SPARK_SCHEMA`` load on first use.
- :mod:`.options`: every option once (``options.table``), their parsers, ``PulsarOptions``.
- batch reads: :mod:`.reader` over partition ranges (:mod:`.ranges`; :mod:`.splits` for
  ``minPartitions``, :mod:`.pushdown` for filters); :mod:`.connect` and
  :mod:`.worker_clients` give the tasks their clients.
- batch writes: :mod:`.writer`.
- :mod:`.stream`: the stream reader and writer, admission control, lag, data loss,
  checkpoint offsets and the durable subscription.
- schemas: :mod:`.read_schema` plans a typed read, :mod:`.value_decode` decodes it in the
  task by schema version (with the columnar layer's decode switch), :mod:`.write_schema`
  registers and encodes a typed write; :mod:`.spark_types`, :mod:`.ddl`,
  :mod:`.schema_change` and :mod:`.streamnative_rows` (``rowLayout=streamnative``) serve them.
- :mod:`.errors` (each a ``PulsarError``) and :mod:`.compat` (the Spark version).

``drop_subscription`` (from :mod:`.stream.subscription`) deletes a stopped stream's durable
subscription.

pyspark loads with :mod:`.datasource`, :mod:`.reader`, :mod:`.writer`, :mod:`.spark_types` and
the stream reader, writer and admission; the other modules import without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["SPARK_SCHEMA", "PulsarDataSource", "drop_subscription"]

if TYPE_CHECKING:
    from .datasource import SPARK_SCHEMA, PulsarDataSource
    from .stream.subscription import drop_subscription


def __getattr__(name: str) -> Any:
    if name == "drop_subscription":  # no pyspark needed: it talks to the broker only
        from .stream.subscription import drop_subscription

        return drop_subscription
    if name in __all__:
        from . import datasource

        return getattr(datasource, name)
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)
