"""CRC32C (Castagnoli), the frame checksum: the ``crc32c`` package's C function, loaded
without running the package's ``__init__``.

That ``__init__`` asks ``importlib.metadata`` for the package's own version, which
scans every ``sys.path`` entry's distributions: 0.15 s in a plain interpreter,
0.4-0.5 s in a Spark Python worker on a busy machine, paid by every Python
process Spark starts for a query (planning, each worker, the commit). The
extension module itself loads in well under a millisecond. When it cannot be
found that way (another layout of the package), the package is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["crc32c"]


def _load() -> Callable[..., int]:
    loaded = sys.modules.get("crc32c")
    if loaded is not None:
        function: Callable[..., int] = loaded.crc32c
        return function
    spec = importlib.util.find_spec("crc32c")  # finds the package, runs nothing
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if not os.path.exists(path):
                continue
            found = importlib.util.spec_from_file_location("crc32c._crc32c", path)
            if found is None or found.loader is None:
                continue
            module: Any = importlib.util.module_from_spec(found)
            found.loader.exec_module(module)
            function = module.crc32c
            return function
    from crc32c import crc32c as packaged

    return packaged


#: ``crc32c(data, value=0) -> int``: the checksum of ``data``, continuing from ``value``.
crc32c = _load()
