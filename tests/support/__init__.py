"""Test support: the brokers the tests start, a fault proxy, official-client and Spark helpers.

Tests import it as ``tests.support.<module>``; the pytest plugin is loaded by
``tests/conftest.py``. Modules (each imports only its siblings, relatively, so
``bench/`` can use them as ``support.<module>`` with ``tests/`` on ``sys.path``):

``process``      :class:`BrokerProcess`, the start/stop/kill/restart/log of one broker process
``net``          free loopback ports, the Pulsar CONNECT handshake, polling
``lite``         :class:`PulsarLite`, a pulsar-lite process
``fault_proxy``  :class:`FaultProxy`, a frame-aware fault-injecting proxy
``throttle``     :class:`Throttle`, a byte rate and an added delay for the fault proxy
``official``     produce and read with the official ``pulsar`` client
``apache_dist``  the Apache Pulsar distribution: download, cache, Java, JVM flags, config
``java_client``  the Java client as a test peer: typed produce/consume (SchemaTool.java)
``java_crypto``  the Java client as an encryption peer: EC/RSA produce, decrypt (CryptoTool)
``raw_wire``     bare wire peers: MESSAGE frames as the broker sent them, prepared SENDs
``keys``         RSA/EC key pairs of the encryption tests as PEM files, encryption-required topics
``apache_tls``   tokens and certificates of the secure Apache broker
``oidc``         :class:`OidcIssuer`, an OpenID Connect issuer of client-credentials tokens
``kdc``          :class:`Kdc`, an MIT Kerberos KDC (Debian's packages), and a SASL acceptor
``apache``       :class:`ApachePulsar` (plain, secure, dedup) and :class:`BrokerHandle`
``admin``        :class:`PulsarAdmin`, the Apache Pulsar admin REST API
``proto``        protobuf messages compiled at test time (grpc_tools.protoc) for PROTOBUF_NATIVE
``spark``        the local Spark session of the tests and a local Spark Connect session
``spark_faults`` subprocess Spark drivers, fault sources and sinks, fault-test figures
``spark_venvs``  venvs of older pyspark versions for the smoke runs of ``tests/versions``
``quick_start`` the README's quick start run as written, and produce/read with our client
``figures``      reliability figures (``FIGURE`` lines) and the reliability tests' share of time
``plugin``       the fixtures, one broker factory, one failed-test report hook
"""
