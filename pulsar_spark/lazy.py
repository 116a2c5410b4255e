"""Package namespaces whose names load their modules on first use (PEP 562).

A package's ``__init__`` names what it offers and the module of the package that defines
each name; importing the package (which importing any of its modules does) then loads
none of them, and ``from package import Name`` loads ``Name``'s module alone. A Spark
Python worker that unpickles a reader so imports what the read uses: a raw read loads no
Avro, JSON or PROTOBUF decoder.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, homes: Mapping[str, str], modules: Mapping[str, str] | None = None
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` whose names are the keys of
    ``homes``, each defined in the module of the package its value names, and the keys of
    ``modules``, each another name of the module of the package its value names."""
    namespace = importlib.import_module(package).__dict__
    aliases = dict(modules or {})

    def __getattr__(name: str) -> Any:
        if name in aliases:
            value = importlib.import_module(f"{package}.{aliases[name]}")
            namespace[name] = value
            return value
        home = homes.get(name)
        if home is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value  # found directly from now on
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes, *aliases})

    return __getattr__, __dir__
