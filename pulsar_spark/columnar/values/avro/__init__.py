"""Avro values: schemas and decoding plans (read), Arrow columns as Avro datums (write)."""
