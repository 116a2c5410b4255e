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


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, str]]:
    """``(module, imported name)`` for every import of the package in ``path``, wherever it
    stands: at the top, under ``TYPE_CHECKING`` or inside a function. A name that is a
    module of the package is given as ``(that module, "")``."""
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                start = base[: len(base) - node.level + 1]
                source = ".".join([*start, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] != "pulsar_spark":
                continue
            for alias in node.names:
                inner = f"{source}.{alias.name}"
                found.append((inner, "") if inner in modules else (source, alias.name))
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.split(".")[0] == "pulsar_spark"]
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_module_takes_part_in_an_import_circle() -> None:
    """Counted are all imports, those under ``TYPE_CHECKING`` and inside functions too: a
    circle hidden behind a late import is still a circle."""
    modules = _modules()
    graph = {
        name: {source for source, _ in _imports(name, path, modules)} - {name}
        for name, path in modules.items()
    }
    assert _cycles(graph) == []


def _defined(path: Path) -> set[str]:
    """The names a module binds itself at its top level (not those it imports)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Name)) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def test_a_name_is_imported_from_the_module_that_defines_it() -> None:
    """One import path per name: only a package's ``__init__`` gathers names from its
    modules; an ordinary module passes on none that it imported."""
    modules = _modules()
    defined = {name: _defined(path) for name, path in modules.items()}
    wrong = []
    for name, path in sorted(modules.items()):
        for source, imported in _imports(name, path, modules):
            if not imported or modules[source].name == "__init__.py":
                continue
            if imported not in defined[source]:
                wrong.append(f"{name} imports {imported} from {source}")
    assert wrong == []


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


def test_every_exception_class_is_a_pulsar_error() -> None:
    """One error hierarchy: a caller catching ``PulsarError`` catches everything the package
    raises of its own, and each class says whether it is retriable."""
    code = (
        "import importlib, inspect, pathlib, sys\n"
        "import pulsar_spark\n"
        "from pulsar_spark.protocol.errors import PulsarError\n"
        "root = pathlib.Path(pulsar_spark.__file__).parent\n"
        "wrong = []\n"
        "for path in sorted(root.rglob('*.py')):\n"
        "    parts = list(path.relative_to(root.parent).with_suffix('').parts)\n"
        "    if parts[-1] == '__init__':\n"
        "        parts.pop()\n"
        "    module = importlib.import_module('.'.join(parts))\n"
        "    for name, value in vars(module).items():\n"
        "        if (inspect.isclass(value) and issubclass(value, BaseException)\n"
        "                and value.__module__ == module.__name__\n"
        "                and not issubclass(value, PulsarError)):\n"
        "            wrong.append(f'{module.__name__}.{name}')\n"
        "print(sorted(wrong))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
