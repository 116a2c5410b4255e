"""Where messages are: message ids, their serialized form, and read positions."""
