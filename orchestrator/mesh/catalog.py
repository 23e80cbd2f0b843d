"""The model's tool catalog: every server's tools under server-prefixed names, filtered per agent."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from orchestrator.mesh.tiers import Tier as Tier
from shared.protocol.policy import (
    PATH_ARGS_META_KEY,
    SHELL_META_KEY,
    Classification,
    classification_of,
    reads_private_data,
)

SEPARATOR = "__"
MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_WILDCARD = re.compile(r"[*?\[]")


class CatalogError(Exception):
    """Two tools map to one model-facing name; the message names both and the fix."""


@dataclass(frozen=True, slots=True)
class CatalogTool:
    server: str
    name: str
    qualified: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    destructive: bool
    classification: Classification | None = None
    """What kind of action the tool is; None (unclassified) always asks unless the operator decides."""
    shell: bool = False
    """The ``command`` argument is a shell command line, inspected by the permission policy."""
    path_args: tuple[str, ...] = ()
    """Argument names that are file-system paths, resolved by the permission policy."""
    tier: Tier | None = None
    """A tier the orchestrator fixes for its own tools; never read from a server."""
    private_data: bool = False
    """The tool reads the operator's private data (``nexo/private_data``): only for principals that may."""

    def __post_init__(self) -> None:
        if self.classification is None:
            # A shell can do anything; read-only annotations are the one hint trusted without a declaration.
            derived: Classification | None = (
                "dangerous" if self.shell else "read_only" if self.read_only else None
            )
            object.__setattr__(self, "classification", derived)


def qualify(server: str, tool: str) -> str:
    """``server__tool``, limited to what every provider accepts (``[A-Za-z0-9_-]{1,64}``)."""
    return _UNSAFE.sub("_", f"{server}{SEPARATOR}{tool}")[:MAX_NAME]


def may_offer(server: str, allowed: Sequence[str]) -> bool:
    """Whether any glob of ``allowed`` could match one of ``server``'s tools, judged from the name
    alone: a server none can match need not be started. When unsure (a wildcard before the server's
    whole name), yes."""
    prefix = qualify(server, "")
    for pattern in allowed:
        literal = _WILDCARD.split(pattern, maxsplit=1)[0]
        if literal.startswith(prefix) or (literal != pattern and prefix.startswith(literal)):
            return True
    return False


def names(server: str, allowed: Sequence[str]) -> bool:
    """Whether a glob of ``allowed`` names ``server`` itself (``pairing__*``), not only through a
    wildcard that matches every server (``*``)."""
    prefix = qualify(server, "")
    return any(_WILDCARD.split(pattern, maxsplit=1)[0].startswith(prefix) for pattern in allowed)


def _read_only(tool: types.Tool) -> bool:
    return bool(tool.annotations and tool.annotations.read_only_hint)


def _destructive(tool: types.Tool) -> bool:
    # The MCP default for destructiveHint is true; only an explicit false clears it.
    return not (tool.annotations and tool.annotations.destructive_hint is False)


def _shell(tool: types.Tool) -> bool:
    return (tool.meta or {}).get(SHELL_META_KEY) is True


def _path_args(tool: types.Tool) -> tuple[str, ...]:
    names = (tool.meta or {}).get(PATH_ARGS_META_KEY)
    if not isinstance(names, list):
        return ()
    return tuple(name for name in names if isinstance(name, str) and name)


class Catalog:
    def __init__(self, tools: Iterable[CatalogTool]) -> None:
        self._tools = {t.qualified: t for t in tools}

    @classmethod
    def build(
        cls,
        servers: Mapping[str, Sequence[types.Tool]],
        *,
        allowed: Sequence[str] = ("*",),
        hidden: Collection[tuple[str, str]] = (),
    ) -> Catalog:
        seen: dict[str, CatalogTool] = {}
        for server, tools in servers.items():
            for tool in tools:
                if (server, tool.name) in hidden:
                    continue
                qualified = qualify(server, tool.name)
                if not any(fnmatch.fnmatchcase(qualified, pattern) for pattern in allowed):
                    continue
                entry = CatalogTool(
                    server=server,
                    name=tool.name,
                    qualified=qualified,
                    description=tool.description or "",
                    input_schema=dict(tool.input_schema),
                    read_only=_read_only(tool),
                    destructive=_destructive(tool),
                    classification=classification_of(tool.meta),
                    shell=_shell(tool),
                    path_args=_path_args(tool),
                    private_data=reads_private_data(tool.meta),
                )
                if qualified in seen:
                    other = seen[qualified]
                    raise CatalogError(
                        f"tool name collision: {other.server}.{other.name} and {server}.{tool.name} both "
                        f"become {qualified!r} for the model; rename one server in the `servers:` map of the "
                        "config, or leave one tool out with the agent's `allowed_tools`"
                    )
                seen[qualified] = entry
        return cls(seen.values())

    def with_tools(self, extra: Iterable[CatalogTool], allowed: Sequence[str] = ("*",)) -> Catalog:
        """This catalog plus ``extra`` (the orchestrator's own tools), filtered by ``allowed``."""
        added = [t for t in extra if any(fnmatch.fnmatchcase(t.qualified, pattern) for pattern in allowed)]
        return Catalog([*self._tools.values(), *added])

    def only(self, keep: Callable[[CatalogTool], bool]) -> Catalog:
        """The tools for which ``keep`` is true."""
        return Catalog(t for t in self._tools.values() if keep(t))

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Any:
        return iter(self._tools.values())

    def get(self, qualified: str) -> CatalogTool | None:
        return self._tools.get(qualified)

    def names(self) -> list[str]:
        return sorted(self._tools)
