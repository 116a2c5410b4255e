"""JSON values: documents into Arrow columns (read), Arrow columns as JSON documents (write)."""
