"""A package's heavy names loaded on first use (PEP 562), from a table of where each one lives.

A package's ``__init__`` keeps what reading a config needs and names the rest here, so importing the
package never imports the machinery (the MCP SDK, HTTP clients) behind those names until one is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: each name in ``homes`` imported from its module."""

    def load(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    return load
