"""Reading: the partition reader, its consumer sessions, bounds, chunks, gaps, sinks, scans."""
