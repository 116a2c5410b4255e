"""The error of the write side: :class:`SchemaMismatch`, data that does not fit the schema it
is written with.

::

    PulsarError
    +-- SchemaError (schema_errors)
        +-- SchemaMismatch      the DataFrame does not fit the topic's schema (ValueError)

It is raised before anything is sent: when the encoder is built (names and
types) or when a batch is encoded (a null where the schema has no null, an
enum symbol the schema lacks, a decimal that does not fit...).
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import SchemaError

__all__ = ["Misfit", "SchemaMismatch"]

#: One field that does not fit: (path, reason).
Misfit = tuple[str, str]


class SchemaMismatch(SchemaError, ValueError):
    """Data that does not fit the schema it is to be written with (not retriable).

    ``field`` names every field at fault (comma-separated, ``<value>`` for the
    whole value) and ``reason`` says what is wrong with each.
    """

    @classmethod
    def of(cls, misfits: Sequence[Misfit], *, topic: str = "", schema: str = "") -> SchemaMismatch:
        """One error for all the fields that do not fit; ``schema`` names the schema kind."""
        fields = ", ".join(path or "<value>" for path, _ in misfits)
        reasons = "; ".join(f"{path}: {why}" if path else why for path, why in misfits)
        kind = f"the {schema} schema" if schema else "the schema"
        reason = f"the data does not fit {kind}: {reasons}"
        return cls(reason, topic=topic, field=fields)

    @property
    def fields(self) -> list[str]:
        """The paths of the fields that do not fit."""
        return self.field.split(", ") if self.field else []
