"""The package's layers import only the layers below them, and the wire needs no Arrow."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pulsar_spark"

# Each layer may import itself and the layers listed before it.
LAYERS = ["protocol", "columnar", "client", "spark"]


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] == "pulsar_spark" and len(parts) > 1:
                    found.add(parts[1])
            elif node.level == 2 and node.module:
                found.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "pulsar_spark" and len(parts) > 1:
                    found.add(parts[1])
    return found & set(LAYERS)


@pytest.mark.parametrize("layer", LAYERS)
def test_a_layer_imports_only_the_layers_below_it(layer: str) -> None:
    allowed = set(LAYERS[: LAYERS.index(layer) + 1])
    wrong = {
        str(path.relative_to(PACKAGE)): sorted(_imported_layers(path) - allowed)
        for path in sorted((PACKAGE / layer).rglob("*.py"))
        if _imported_layers(path) - allowed
    }
    assert wrong == {}


def test_the_wire_layer_imports_neither_pyarrow_nor_numpy() -> None:
    code = (
        "import sys, pulsar_spark.protocol, pulsar_spark.protocol.framing;"
        "print(sorted(m for m in ('pyarrow', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_module_says_what_it_holds() -> None:
    """A module owns one concept, as long as that concept needs (no line cap: slicing a
    class across files to meet one made import circles and private reach-ins)."""
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "PulsarApi_pb2.py":
            continue
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text))
        if not doc or not doc.splitlines()[0].strip():
            problems.append(f"{path.relative_to(PACKAGE)}: no first docstring line")
    assert problems == []
