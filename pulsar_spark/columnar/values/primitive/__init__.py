"""Primitive schema values (STRING, INT32, TIMESTAMP...): decoded and encoded as Arrow columns."""
