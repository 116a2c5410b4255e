"""``bench/plots.py`` draws one PNG per figure from the committed results in bench/results,
and every committed result says what produced it, when and where."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"

#: figure -> the result files it is drawn from (any one is enough).
FIGURES = {
    "client-throughput.png": ("client_read.json", "client_write.json"),
    "spark-vs-streamnative.png": ("streamnative.json",),
    "spark-read-ceiling.png": ("spark_read.json",),
    "stream-latency.png": ("stream.json",),
    "pushdown.png": ("spark_pushdown.json",),
}


def test_every_figure_has_its_committed_results() -> None:
    for figure, sources in FIGURES.items():
        assert all((RESULTS / name).is_file() for name in sources), figure


@pytest.mark.parametrize("name", sorted(p.name for p in RESULTS.glob("*.json")))
def test_a_result_records_command_date_and_machine(name: str) -> None:
    result = json.loads((RESULTS / name).read_text())
    assert result["command"].startswith(("python bench/", "bash bench/"))
    assert result["date"][:2] == "20"
    machine = result["machine"]
    assert machine["cores"] >= 1
    assert machine["cpu_model"]
    assert machine["load_average_end"]


def test_plots_writes_a_png_per_figure(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "plots.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for figure in FIGURES:
        png = tmp_path / figure
        assert png.is_file(), (figure, done.stdout)
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 10_000
