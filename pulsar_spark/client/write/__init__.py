"""Writing: the producer, its broker session, outgoing batches, receipts and partition routing."""
