"""What the loop needs from the outside: a permission gate and a way to run a catalog tool."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import mcp_types as types

from orchestrator.mesh import CatalogTool, Mesh, ServerUnavailable
from orchestrator.tools.local import GoalContext, LocalToolError, LocalTools

MAX_RESULT_CHARS = 32_000


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str


class Gate(Protocol):
    async def check(self, tool: CatalogTool, arguments: Mapping[str, Any], call_id: str) -> Decision: ...


class ToolObserver(Protocol):
    """Told about every tool call (the audit ledger listens here)."""

    async def on_tool(
        self,
        call_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        duration_s: float,
        outcome: Literal["ok", "error", "denied"],
        error: str | None,
    ) -> None: ...


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    content: str
    is_error: bool


def render_result(result: types.CallToolResult) -> str:
    """Tool output as text for the model, structured content preferred, capped in size."""
    if result.structured_content is not None and not result.is_error:
        text = json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True)
    else:
        parts = []
        for block in result.content:
            if isinstance(block, types.TextContent):
                parts.append(block.text)
            else:
                parts.append(f"[{block.type} content omitted]")
        text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[: MAX_RESULT_CHARS - 40] + f"\n[truncated: {len(text)} characters in all]"
    return text


ArgumentScreen = Callable[[CatalogTool, Mapping[str, Any]], Mapping[str, Any]]
"""Rewrites a server tool's arguments before the call (the outbound secret guard); raising
LocalToolError refuses the call with a message for the model."""


class ToolRunner:
    """Runs catalog tools through the mesh; every failure comes back as data for the model.

    ``meta`` goes into each call's ``_meta``: who is acting (``nexo/agent``) and how far the turn's
    input is trusted (``nexo/provenance``). Servers read these instead of trusting tool arguments.
    """

    def __init__(
        self,
        mesh: Mesh,
        meta: Mapping[str, Any] | None = None,
        *,
        local: LocalTools | None = None,
        context: GoalContext | None = None,
        screen: ArgumentScreen | None = None,
    ) -> None:
        self._mesh = mesh
        self._meta = dict(meta or {})
        self._local = local
        self._context = context
        self._screen = screen

    def for_goal(
        self, local: LocalTools, context: GoalContext, *, meta: Mapping[str, Any] | None = None
    ) -> ToolRunner:
        """The same runner (and argument screen), also running the orchestrator's own tools for one
        goal (``meta`` adds to or overrides the call ``_meta``, e.g. the provenance of the goal's input)."""
        return ToolRunner(
            self._mesh, {**self._meta, **(meta or {})}, local=local, context=context, screen=self._screen
        )

    async def run(self, tool: CatalogTool, arguments: Mapping[str, Any]) -> ToolOutcome:
        if not tool.server:
            return await self._run_local(tool, arguments)
        if self._screen is not None:
            try:
                arguments = self._screen(tool, arguments)
            except LocalToolError as exc:
                return ToolOutcome(f"{tool.qualified}: {exc}", is_error=True)
        try:
            result = await self._mesh[tool.server].call_tool(tool.name, arguments, meta=self._meta or None)
        except ServerUnavailable as exc:
            return ToolOutcome(f"tool {tool.qualified} failed: {exc}", is_error=True)
        except Exception as exc:  # noqa: BLE001 -- a protocol error is still something the model can react to
            return ToolOutcome(f"tool {tool.qualified} failed: {type(exc).__name__}: {exc}", is_error=True)
        return ToolOutcome(render_result(result), is_error=bool(result.is_error))

    def refusal(self, tool: CatalogTool, arguments: Mapping[str, Any]) -> str | None:
        """Why a call of one of the orchestrator's own tools cannot work, known before it is approved."""
        if tool.server or self._local is None or tool.name not in self._local:
            return None
        try:
            self._local.precheck(tool.name, arguments)
        except LocalToolError as exc:
            return f"{tool.qualified}: {exc}"
        return None

    async def _run_local(self, tool: CatalogTool, arguments: Mapping[str, Any]) -> ToolOutcome:
        if self._local is None or self._context is None or tool.name not in self._local:
            return ToolOutcome(f"tool {tool.qualified} is not available here", is_error=True)
        try:
            return ToolOutcome(await self._local.run(self._context, tool.name, arguments), is_error=False)
        except LocalToolError as exc:
            return ToolOutcome(f"{tool.qualified}: {exc}", is_error=True)
        except Exception as exc:  # noqa: BLE001 -- e.g. a channel refusing: data the model can react to
            return ToolOutcome(f"tool {tool.qualified} failed: {type(exc).__name__}: {exc}", is_error=True)
