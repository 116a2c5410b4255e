"""Writing: the producer with its batcher, outgoing batches, receipt watch and partition routing."""
