"""The connector's options: the table of every option, their value parsers, the parsed options.

:mod:`.table` holds every option once (spellings, scope, parser, default, doc);
:mod:`.parse` turns Spark's option map into ``PulsarOptions`` with it. Value parsers:
:mod:`.values` (scalars, offsets, times, durations), :mod:`.auth`, :mod:`.crypto`,
:mod:`.keystore`, :mod:`.reading` and :mod:`.schema`. Other connectors' options:
:mod:`.migration` and :mod:`.passthrough`; :mod:`.redaction` warns of private keys
Spark's plans would show. Nothing here imports pyspark.

This package gathers no names: each is imported from the module that defines it
(``from pulsar_spark.spark.options.parse import PulsarOptions``), so importing one
of them does not load the others.
"""
