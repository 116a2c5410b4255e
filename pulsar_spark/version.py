"""The package's version (PEP 440): one place for the build, the root package and the
client's handshake, which must not import the root package (it loads Spark on demand)."""

__version__ = "0.1.0.dev0"
