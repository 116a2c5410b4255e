"""The row layer: entries into the row schema's columns, rows into the items of batch payloads."""
