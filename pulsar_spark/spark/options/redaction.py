"""Private keys that Spark's plans would show: a warning once per process and option name.

Spark shows a stream's options in its plan (``explain()``, the UI) unless the
option's name or value matches ``spark.sql.redaction.options.regex`` (``(?i)url``
by default) or ``spark.redaction.regex`` (``(?i)secret|password|token|
access[.]?key|credential``): a ``data:`` private key given as ``privateKey`` or
``pulsar.reader.privateKey`` shows there, given as ``privateKeyUrl`` it does
not. :func:`warn_unredacted_keys` says so once per process and option name.
A public key is no secret: it may show. Nothing here imports pyspark.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from .table import by_spelling

__all__ = ["SPARK_REDACTION_DEFAULTS", "warn_unredacted_keys"]

_log = logging.getLogger(__name__)

#: The defaults of ``spark.sql.redaction.options.regex`` and ``spark.redaction.regex``
#: (Spark 4): Spark hides an option's value in plans when either matches its name or value.
SPARK_REDACTION_DEFAULTS = (
    re.compile(r"(?i)url"),
    re.compile(r"(?i)secret|password|token|access[.]?key|credential"),
)
_PRIVATE_KEY_OPTION = "privateKey"
_warned: set[str] = set()


def warn_unredacted_keys(options: Mapping[str, str]) -> list[str]:
    """Once per process and option name, a WARNING for a private key given inline (a
    ``data:`` URL, alone or in a JSON map) under a name Spark's default redaction does
    not cover, so that a stream's plan shows the key. Returns the names warned about
    now. The key is never logged."""
    warned = []
    for key, value in options.items():
        option = by_spelling(key)
        if option is None or option.name != _PRIVATE_KEY_OPTION:
            continue
        if "data:" not in str(value).lower() or key.lower() in _warned:
            continue
        if any(regex.search(key) or regex.search(str(value)) for regex in SPARK_REDACTION_DEFAULTS):
            continue
        spelled = next((s for s in (option.name, *option.aliases) if s.lower() == key.lower()), key)
        _warned.add(key.lower())
        warned.append(spelled)
        _log.warning(
            "%s holds a private key inline (a data: URL): Spark shows a stream's options in "
            "its plan (explain(), the UI) unless the option's name or value matches "
            "spark.sql.redaction.options.regex (default (?i)url) or spark.redaction.regex, "
            "so this key can show there. Give it as privateKeyUrl (the same option, hidden "
            "by the default regex), or add %s to spark.sql.redaction.options.regex",
            spelled,
            spelled,
        )
    return warned
