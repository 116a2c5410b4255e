"""Admission-control options of stream reads: their parsers and the checks across them.

``maxRecordsPerTrigger`` (Kafka's ``maxOffsetsPerTrigger``), ``maxBytesPerTrigger``
(StreamNative's and Databricks' name), ``minRecordsPerTrigger`` (Kafka's
``minOffsetsPerTrigger``) and ``maxTriggerDelay`` (Kafka's duration syntax:
an integer with ``us``, ``ms``, ``s``, ``m``/``min``, ``h`` or ``d``; no unit
means milliseconds, as Spark's ``timeStringAsMs`` reads it). Their rows are in
:mod:`.table`; :func:`check_trigger_limits` runs where a stream reader
is built. Nothing here imports pyspark.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import PulsarOptionError

if TYPE_CHECKING:
    from .parse import PulsarOptions

__all__ = ["DEFAULT_MAX_TRIGGER_DELAY", "check_trigger_limits", "duration_ms"]

#: Kafka's default ``maxTriggerDelay``.
DEFAULT_MAX_TRIGGER_DELAY = "15m"

_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_UNITS_MS["d"] = 24 * _UNITS_MS["h"]
_DURATION = re.compile(r"(\d+)\s*([a-z]+)?")


def duration_ms(name: str, value: str) -> int:
    """A positive duration in Spark's syntax (``15m``, ``30s``, ``500ms``; a bare
    integer is milliseconds) as whole milliseconds."""
    text = value.strip().lower()
    found = _DURATION.fullmatch(text)
    unit = found.group(2) if found else None
    if found is None or (unit is not None and unit not in _UNITS_MS):
        units = ", ".join(_UNITS_MS)
        msg = f"expected a duration such as 15m, 30s or 500ms (units: {units}), got {value!r}"
        raise PulsarOptionError(name, msg)
    ms = int(int(found.group(1)) * _UNITS_MS[unit or "ms"])
    if ms < 1:
        msg = f"expected a duration of at least 1ms, got {value!r}"
        raise PulsarOptionError(name, msg)
    return ms


def check_trigger_limits(options: PulsarOptions) -> None:
    """Checks across the admission-control options of a stream read.

    Raises:
        PulsarOptionError: ``minRecordsPerTrigger`` above ``maxRecordsPerTrigger``
            (naming both), or ``maxTriggerDelay`` without ``minRecordsPerTrigger``.
    """
    low, high = options.min_records_per_trigger, options.max_records_per_trigger
    if low is not None and high is not None and low > high:
        msg = (
            f"minRecordsPerTrigger ({low}) is above maxRecordsPerTrigger ({high}): a "
            "micro-batch could never hold its minimum; lower minRecordsPerTrigger or raise "
            "maxRecordsPerTrigger"
        )
        name = "minRecordsPerTrigger"
        raise PulsarOptionError(name, msg)
    if "maxTriggerDelay" in options.given and low is None:
        msg = (
            "applies with minRecordsPerTrigger (alias minOffsetsPerTrigger) only: it bounds "
            "how long a micro-batch waits for that minimum; set both, or remove it"
        )
        name = "maxTriggerDelay"
        raise PulsarOptionError(name, msg)
