"""Pulsar schemas as values: schema types and :class:`SchemaInfo`."""
