"""``docker-compose.yml`` parses, runs the Apache Pulsar the tests pin, and its Spark image
copies files that exist. (Docker itself does not run here: this checks the file only.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.apache_dist import PULSAR_VERSION

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text("utf-8"))
    assert isinstance(data, dict)
    return data


def test_the_file_opens_with_how_to_use_it() -> None:
    head = COMPOSE.read_text("utf-8").split("\nservices:")[0]
    assert all(line.startswith("#") or not line for line in head.splitlines())
    for words in (
        "docker compose up -d pulsar",
        "pulsar://localhost:6650",
        "--profile spark",
        "docker compose down",
    ):
        assert words in head


def test_pulsar_is_the_official_image_at_the_pinned_version(compose: dict[str, Any]) -> None:
    pulsar = compose["services"]["pulsar"]
    assert pulsar["image"] == f"apachepulsar/pulsar:{PULSAR_VERSION}"
    assert PULSAR_VERSION.startswith("4.0.")
    assert pulsar["command"].split()[:2] == ["bin/pulsar", "standalone"]
    assert sorted(pulsar["ports"]) == ["6650:6650", "8080:8080"]
    assert pulsar["healthcheck"]["test"] == ["CMD", "bin/pulsar-admin", "brokers", "healthcheck"]
    assert "pulsar-data" in compose["volumes"]


def test_the_spark_service_builds_from_this_checkout(compose: dict[str, Any]) -> None:
    spark = compose["services"]["spark"]
    assert spark["profiles"] == ["spark"]  # `docker compose up` alone starts Pulsar only
    assert spark["network_mode"] == "service:pulsar"
    assert spark["depends_on"]["pulsar"]["condition"] == "service_healthy"
    assert spark["environment"]["PULSAR_SERVICE_URL"] == "pulsar://localhost:6650"
    dockerfile = spark["build"]["dockerfile_inline"]
    copied = [
        src
        for line in dockerfile.splitlines()
        if line.startswith("COPY ")
        for src in line.split()[1:-1]
    ]
    assert copied, dockerfile
    for src in copied:
        assert (ROOT / src).exists(), f"the Spark image copies {src}, which does not exist"
    extra = re.search(r"pip install .*'\.\[(\w+)\]'", dockerfile)
    assert extra is not None, dockerfile
    pyproject = (ROOT / "pyproject.toml").read_text("utf-8")
    assert re.search(rf"^{extra.group(1)} = \[", pyproject, re.M), f"no extra {extra.group(1)}"
    assert (ROOT / spark["command"][-1]).is_file(), spark["command"]
