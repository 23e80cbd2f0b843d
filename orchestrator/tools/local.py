"""Local tools: the same shape as a server's tools in the catalog, run in this process.

Their names carry no ``server__`` prefix (server tools always do, so they cannot collide). Each goal
gets its own :class:`GoalContext` (who is acting, where the goal came from), because tools such as
``notify_origin`` answer "where did this come from?".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.mesh import CatalogTool
from orchestrator.mesh.catalog import Tier
from shared.protocol.policy import Classification

Handler = Callable[["GoalContext", Mapping[str, Any]], Awaitable[str]]
Precheck = Callable[[Mapping[str, Any]], object]
"""Raises LocalToolError for a call that cannot work, before anyone is asked to approve it."""


class LocalToolError(Exception):
    """A bad call the model can fix: the message names the value and what to do."""


@dataclass(frozen=True, slots=True)
class GoalContext:
    agent: str
    goal_id: str
    origin_server: str | None = None
    origin_meta: Mapping[str, str] = field(default_factory=dict)
    origin_role: str = ""
    """Who sent the message the goal serves: ``owner``, ``contact`` or ``source`` (empty: not from a chat)."""


@dataclass(frozen=True, slots=True)
class LocalTool:
    name: str
    description: str
    input_schema: dict[str, Any]
    handler: Handler
    read_only: bool
    """True for tools without effects outside nexo and the conversation itself: they run unasked."""
    classification: Classification | None = None
    """What the permission policy sees; None means ``read_only`` when ``read_only`` is set."""
    tier: Tier | None = None
    """A fixed tier, e.g. ``safe`` for an outbound tool that only answers a conversation nexo is in."""
    precheck: Precheck | None = None


def local_catalog_tools(tools: Sequence[LocalTool]) -> list[CatalogTool]:
    return [
        CatalogTool(
            server="",
            name=tool.name,
            qualified=tool.name,
            description=tool.description,
            input_schema=tool.input_schema,
            read_only=tool.read_only,
            destructive=False,
            classification=tool.classification,
            tier=tool.tier,
        )
        for tool in tools
    ]


class LocalTools:
    def __init__(self, tools: Sequence[LocalTool]) -> None:
        self.tools = {tool.name: tool for tool in tools}

    def __contains__(self, name: str) -> bool:
        return name in self.tools

    def precheck(self, name: str, arguments: Mapping[str, Any]) -> None:
        """What can be known wrong without running the tool; raises LocalToolError."""
        check = self.tools[name].precheck
        if check is not None:
            check(arguments)

    async def run(self, context: GoalContext, name: str, arguments: Mapping[str, Any]) -> str:
        return await self.tools[name].handler(context, arguments)
