"""The broker a client benchmark runs against: the one given, or an embedded pulsar-lite."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from brokers import PulsarLite


@contextlib.contextmanager
def broker_url(service_url: str | None, prefix: str) -> Iterator[str]:
    """``service_url`` as is, or the URL of a pulsar-lite started (and stopped) here."""
    if service_url is not None:
        yield service_url
        return
    broker = PulsarLite(Path(tempfile.mkdtemp(prefix=prefix)), name="bench")
    broker.start()
    try:
        yield broker.service_url
    finally:
        broker.close()
