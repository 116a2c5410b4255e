"""pulsar-spark: a pure-Python Apache Pulsar connector for Apache Spark 4."""

__version__ = "0.1.0.dev0"
