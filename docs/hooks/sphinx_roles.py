"""A griffe extension for the API reference: the package's docstrings name other objects with
Sphinx roles (``:class:`ClientConfig```, ``:meth:`~Producer.flush```), which Markdown would
show as they are written. Each becomes a code span of the name (its last part after ``~``)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref):`(~?)([^`]+)`")


def _name(found: re.Match[str]) -> str:
    tilde, target = found.group(1), found.group(2)
    if "<" in target and target.endswith(">"):  # :ref:`text <target>`
        return f"`{target.split('<', 1)[0].strip()}`"
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


class SphinxRoles(griffe.Extension):
    """Rewrites Sphinx roles in every docstring griffe loads."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(_name, obj.docstring.value)
