"""Streaming reads and writes: reader, admission, lag, loss, offsets, subscription, writer."""
