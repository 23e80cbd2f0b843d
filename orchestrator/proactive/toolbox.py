"""Tools on demand for unattended ticks: a few tools up front, the rest loaded when the tick needs them.

An idle tick needs no tools at all, yet sending every schema with it makes each tick cost the whole
catalog, and every server added makes every tick dearer. A tick's catalog therefore offers only
``autonomy.tick_tools``, ``sleep`` and ``load_tools``; the description of ``load_tools`` names every
other allowed tool, and a call loads the ones the tick needs for the rest of its turn. A tool called
by name without loading is loaded by that call. The permission gate sees every call as before.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from orchestrator.mesh import Catalog, CatalogTool
from orchestrator.tools.local import GoalContext, LocalTool, LocalToolError, local_catalog_tools

LOAD_TOOLS_NAME = "load_tools"
MAX_PATTERNS = 20


class OnDemandCatalog(Catalog):
    """A catalog that offers the model only its loaded tools; the others load on request or on use."""

    def __init__(self, tools: Iterable[CatalogTool], loaded: Iterable[str]) -> None:
        super().__init__(tools)
        self.loaded: set[str] = {name for name in loaded if name in self._tools}

    def __iter__(self) -> Iterator[CatalogTool]:
        return iter([tool for name, tool in self._tools.items() if name in self.loaded])

    def __len__(self) -> int:
        return len(self.loaded)

    def names(self) -> list[str]:
        return sorted(self.loaded)

    def get(self, qualified: str) -> CatalogTool | None:
        tool = self._tools.get(qualified)
        if tool is not None:
            self.loaded.add(qualified)
        return tool

    def include(self, tool: CatalogTool) -> None:
        """Add ``tool``, loaded."""
        self._tools[tool.qualified] = tool
        self.loaded.add(tool.qualified)

    def unloaded(self) -> list[str]:
        return sorted(set(self._tools) - self.loaded)

    def load(self, patterns: Sequence[str]) -> list[str]:
        """Load the tools matching ``patterns`` (names or globs); the names newly loaded."""
        added: list[str] = []
        for pattern in patterns:
            matches = [name for name in self.unloaded() if fnmatch.fnmatchcase(name, pattern)]
            if not matches and not any(fnmatch.fnmatchcase(name, pattern) for name in self.loaded):
                raise LocalToolError(
                    f"no tool matches {pattern!r}; the tools you can load are: "
                    f"{', '.join(self.unloaded()) or '(none: every tool is loaded)'}"
                )
            self.loaded.update(matches)
            added.extend(matches)
        return added


def _load_tool(catalog: OnDemandCatalog) -> LocalTool:
    async def load(_: GoalContext, arguments: Mapping[str, Any]) -> str:
        names = arguments.get("names")
        if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
            raise LocalToolError(
                f"names must be a non-empty list of tool names or patterns, e.g. ['memory__*']; got {names!r}"
            )
        added = catalog.load(names[:MAX_PATTERNS])
        if not added:
            return "Those tools are already loaded: call them."
        return f"Loaded {', '.join(added)}: call them from your next step."

    unloaded = ", ".join(catalog.unloaded()) or "(none)"
    return LocalTool(
        name=LOAD_TOOLS_NAME,
        description=(
            "Load more tools for this turn, by name or glob pattern (e.g. 'memory__*'). An idle tick needs "
            f"none. Tools you can load: {unloaded}."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "names": {
                    "type": "array",
                    "items": {"type": "string"},
                    "minItems": 1,
                    "maxItems": MAX_PATTERNS,
                    "description": "Tool names or glob patterns to load.",
                }
            },
            "required": ["names"],
            "additionalProperties": False,
        },
        handler=load,
        read_only=True,
        classification="read_only",
        tier="safe",
    )


def on_demand(
    catalog: Catalog, offered: Sequence[str], always: Sequence[str]
) -> tuple[OnDemandCatalog, LocalTool]:
    """``catalog`` offering the tools that match ``offered`` or are named in ``always``, plus the
    ``load_tools`` tool that loads the rest (the caller runs it among the turn's local tools)."""
    every = list(catalog)
    up_front = [
        tool.qualified
        for tool in every
        if tool.qualified in always or any(fnmatch.fnmatchcase(tool.qualified, p) for p in offered)
    ]
    result = OnDemandCatalog(every, up_front)
    loader = _load_tool(result)
    result.include(local_catalog_tools([loader])[0])
    return result, loader
