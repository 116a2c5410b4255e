"""SingleMessageMetadata of many batch items at once, decoded with NumPy straight into columns."""
