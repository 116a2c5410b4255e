"""Fixtures shared by every test: the golden wire captures in ``tests/golden``.

Each scenario (``single-NONE``, ``batch-LZ4``, ...) has one capture per
direction and the list of messages its producer sent (see
``tests/golden/README.md``). The ``golden`` fixture runs a test once per
scenario; ``golden_scenarios`` hands over all of them at once.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

from pulsar_spark.protocol import Frame, FrameDecoder, codec_by_name

TESTS_DIR = Path(__file__).resolve().parent

#: The brokers' fixtures (pulsar-lite, Apache Pulsar, the fault proxy) and report hook; the
#: shared Spark session (``spark``).
pytest_plugins = ["tests.support.plugin", "tests.support.ordering", "tests.support.spark"]

GOLDEN_DIR = TESTS_DIR / "golden"

#: The two directions of a connection, as the capture files name them.
CLIENT_TO_BROKER = "client-to-broker"
BROKER_TO_CLIENT = "broker-to-client"
DIRECTIONS = (CLIENT_TO_BROKER, BROKER_TO_CLIENT)

SCENARIO_NAMES = sorted(
    p.name.removesuffix(".expected.json") for p in GOLDEN_DIR.glob("*.expected.json")
)


@dataclass(frozen=True)
class GoldenScenario:
    """One captured scenario: its two byte streams and what was produced."""

    name: str

    @property
    def batched(self) -> bool:
        return self.name.startswith("batch-")

    @property
    def codec_name(self) -> str:
        return self.name.split("-", 1)[1]

    @property
    def codec(self) -> int:
        """The ``CompressionType`` wire value the producer used."""
        return codec_by_name(self.codec_name)

    @cached_property
    def expected(self) -> dict[str, Any]:
        return json.loads((GOLDEN_DIR / f"{self.name}.expected.json").read_text("utf-8"))

    @property
    def topic(self) -> str:
        return self.expected["topic"]

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The produced messages, in order: payload (base64), key, properties, event_time."""
        return self.expected["messages"]

    @property
    def payloads(self) -> list[bytes]:
        return [base64.b64decode(m["payload"]) for m in self.messages]

    def path(self, direction: str) -> Path:
        return GOLDEN_DIR / f"{self.name}.{direction}.bin"

    def data(self, direction: str) -> bytes:
        return self.path(direction).read_bytes()

    def frames(self, direction: str) -> list[Frame]:
        """Every frame of one direction, decoded in one go."""
        decoder = FrameDecoder()
        decoder.feed(self.data(direction))
        frames = list(decoder)
        decoder.close()
        return frames

    def payload_frames(self, direction: str) -> list[Frame]:
        """The SEND (client to broker) or MESSAGE (broker to client) frames."""
        return [f for f in self.frames(direction) if f.metadata is not None]


@pytest.fixture(scope="session")
def golden_dir() -> Path:
    """``tests/golden``."""
    return GOLDEN_DIR


@pytest.fixture(scope="session")
def golden_scenarios() -> list[GoldenScenario]:
    """Every golden scenario, sorted by name."""
    return [GoldenScenario(name) for name in SCENARIO_NAMES]


@pytest.fixture(scope="session", params=SCENARIO_NAMES)
def golden(request: pytest.FixtureRequest) -> GoldenScenario:
    """Each golden scenario in turn."""
    return GoldenScenario(request.param)


@pytest.fixture(params=DIRECTIONS)
def direction(request: pytest.FixtureRequest) -> str:
    """Each direction of a captured connection in turn."""
    return request.param
