"""Spark sessions for tests: the local session of the Spark tests, and a local Spark Connect one.

:func:`local_session` builds the classic ``local[2]`` session the ``spark`` fixture
(``tests/spark/conftest.py``) shares between the Spark tests, with the pulsar source
registered. Its workers must run this interpreter (it has pyarrow and the connector), so
``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` point at ``sys.executable`` before the
JVM starts.

``SparkSession.builder.remote("local[2]")`` starts an in-process Connect server on the
fixed port 15002 (bound on all interfaces) and connects to ``sc://localhost:15002``: two test
runs at once on one machine (two checkouts, or CI beside a developer) collide with
``BindException: Failed to bind to address 0.0.0.0/0.0.0.0:15002``. pyspark picks an
ephemeral port only under ``SPARK_TESTING``, which turns on Spark's test-only behaviours.

:func:`local_connect_session` does what ``remote("local[...]")`` does, with the port left to
the OS: a classic session whose ``spark.plugins`` starts the Connect server on loopback,
port 0; the port the server got, read from the JVM; Connect mode on
(``SPARK_CONNECT_MODE_ENABLED``, which pyspark sets too); a Connect session on it. Use it in a
subprocess of its own (the pytest process has the classic ``spark`` fixture).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["local_connect_session", "local_session"]

_SERVICE = "org.apache.spark.sql.connect.service.SparkConnectService$"


def local_session(master: str = "local[2]") -> SparkSession:
    """A classic session on ``master`` (UTC, no UI, 2 shuffle partitions, loopback driver)
    with :class:`pulsar_spark.PulsarDataSource` registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from pulsar_spark import PulsarDataSource

    session = (
        SparkSession.builder.master(master)
        .appName("pulsar-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(PulsarDataSource)
    return session


def local_connect_session(master: str = "local[2]") -> SparkSession:
    """Start a Spark Connect server with ``master`` in this process; return a Connect
    session on it (``pyspark.sql.connect.session.SparkSession``)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    conf = (
        SparkConf()
        .setMaster(master)
        .setAppName("pulsar-spark-connect-tests")
        .set("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
        .set("spark.connect.grpc.binding.address", "127.0.0.1")
        .set("spark.connect.grpc.binding.port", "0")
        .set("spark.ui.enabled", "false")
        .set("spark.ui.showConsoleProgress", "false")
        .set("spark.sql.session.timeZone", "UTC")
        # As pyspark's own local Connect server: each client session its own artifacts.
        .set("spark.sql.artifact.isolation.enabled", "true")
        .set("spark.sql.artifact.isolation.alwaysApplyClassloader", "true")
    )
    server = SparkSession(SparkContext.getOrCreate(conf))
    server.sparkContext.setLogLevel("ERROR")
    port = getattr(getattr(server._jvm, _SERVICE), "MODULE$").localPort()
    # From here on pyspark.sql.functions and friends build Connect columns (pyspark's
    # is_remote()); set after the JVM started, so its Python workers do not see it, as in
    # remote("local"). And the Connect builder itself: pyspark.sql's refuses a remote session
    # beside a classic one.
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
