"""The frame checksum (:mod:`pulsar_spark.protocol.framing.checksum`): the ``crc32c`` package's
function, loaded without the package's ``__init__`` (its version lookup cost every Spark
Python process 0.15-0.5 s)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import crc32c as packaged
from hypothesis import given
from hypothesis import strategies as st

from pulsar_spark.protocol.framing import checksum
from pulsar_spark.protocol.framing.checksum import crc32c


@given(data=st.binary(max_size=2000), start=st.integers(0, 2**32 - 1))
def test_same_checksum_as_the_package(data: bytes, start: int) -> None:
    assert crc32c(data) == packaged.crc32c(data)
    assert crc32c(data, start) == packaged.crc32c(data, start)
    assert crc32c(memoryview(data)) == packaged.crc32c(data)


def test_the_castagnoli_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_loaded_without_the_package_init() -> None:
    path = str(Path(checksum.__file__))
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('alone', {path!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "assert module.crc32c(b'123456789') == 0xE3069283\n"
        "print('crc32c' in sys.modules, 'importlib.metadata' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "False"]
