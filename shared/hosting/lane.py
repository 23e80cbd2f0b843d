"""The server's end of the control lane (``shared.protocol.lane``): nexo's control methods answered
straight from the stdio pipe.

Served when stdio is a pair of pipes (``stdio_pipes``). Each line is looked at before the SDK sees
it: a request with a lane id (``nexo:<n>``) for one of the server's control methods, or a
``tools/call`` of one of the tools it lets the lane call (a channel's outbound tool), without a
progress token, is validated with the method's own params model and handed to the method's own
handler (for a tool, the SDK's own ``tools/call`` handler), in a task of its own (a long poll
does not hold up the next request); its answer is written on the same pipe as the SDK's, one
whole line at a time. A ``notifications/cancelled`` for a lane request cancels it, as the SDK
cancels its own. Every other line goes to the SDK unchanged.

A handler sees the same things it reads on the SDK's path (``lifespan_context``, ``method``,
``params``, ``request_id``, ``meta``); a lane request never asks for progress, so
``session.report_progress`` goes nowhere, as it does on the SDK's path without a token.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server.extension import Extension
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from pydantic import BaseModel
from pydantic_core import to_json

from shared.protocol.lane import (
    CANCELLED,
    INTERNAL_ERROR,
    LANE_EXTENSION,
    error_line,
    is_lane_id,
    parsed,
    result_line,
)

logger = logging.getLogger("nexo.lane")

Lifespan = Callable[[Any], AbstractAsyncContextManager[Any]]


class _NoProgress:
    """A lane request carries no progress token: what a handler reports goes nowhere."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        return None


@dataclass(slots=True)
class LaneContext:
    """What a control method's handler reads from its request context, on the lane."""

    lifespan_context: Any
    method: str
    params: dict[str, Any]
    request_id: str
    meta: dict[str, Any] | None
    session: _NoProgress = field(default_factory=_NoProgress)


class LaneExtension(Extension):
    """``nexo/lane``: advertised only; its methods are the other extensions' ones."""

    identifier = LANE_EXTENSION

    def __init__(self, settings: dict[str, Any]) -> None:
        self._settings = settings

    def settings(self) -> dict[str, Any]:
        return self._settings


@dataclass(frozen=True, slots=True)
class Route:
    """How the lane answers one method: its params model and its handler ``(ctx, params)``."""

    params_type: type[BaseModel]
    handler: Callable[[Any, Any], Awaitable[Any]]


class LaneMethods:
    """A server's control methods (from its extensions), the tools it lets the lane call, and its
    lifespan state, once it has one."""

    def __init__(
        self,
        extensions: Sequence[Extension],
        *,
        tools: Sequence[str] = (),
        call_tool: Callable[[Any, Any], Awaitable[Any]] | None = None,
    ) -> None:
        self.bindings: dict[str, Route] = {
            binding.method: Route(binding.params_type, binding.handler)
            for extension in extensions
            for binding in extension.methods()
        }
        self.tools = frozenset(tools) if call_tool is not None else frozenset()
        self._tool_route = None if call_tool is None else Route(types.CallToolRequestParams, call_tool)
        self.state: Any = None
        self.started = False

    @property
    def offered(self) -> bool:
        return bool(self.bindings or self.tools)

    def route(self, method: object, params: dict[str, Any]) -> Route | None:
        """The route of a request for ``method`` with ``params``, if the lane answers it."""
        if method == "tools/call":
            return self._tool_route if params.get("name") in self.tools else None
        return self.bindings.get(method) if type(method) is str else None

    def settings(self) -> dict[str, Any]:
        """What the ``nexo/lane`` capability says: the methods and tools the lane answers on stdio
        pipes."""
        return {"methods": sorted(self.bindings), "tools": sorted(self.tools), "transport": "stdio"}

    def extension(self) -> Extension:
        """The capability as an extension (how the 2026-07-28 discovery advertises it)."""
        return LaneExtension(self.settings())

    def keeping(self, lifespan: Lifespan) -> Lifespan:
        """``lifespan`` that also keeps its state here for the lane's handlers while it lasts."""

        @asynccontextmanager
        async def kept(app: Any) -> AsyncIterator[Any]:
            async with lifespan(app) as state:
                self.state, self.started = state, True
                try:
                    yield state
                finally:
                    self.started = False

        return kept


class WholeLines:
    """A writer's ``write`` taken in turns, so a lane answer never lands inside the SDK's line."""

    def __init__(self, write: Callable[[str], Any]) -> None:
        self._write = write
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._write(text)

    async def flush(self) -> None:
        """Each write is on the pipe when it returns."""


class ServerLane:
    """Takes the lane's lines off stdin and answers them, each in a task of ``tasks``."""

    def __init__(self, methods: LaneMethods, out: WholeLines, tasks: TaskGroup) -> None:
        self._methods = methods
        self._out = out
        self._tasks = tasks
        self._running: dict[str, anyio.CancelScope] = {}

    def take(self, line: str) -> bool:
        """True when ``line`` is the lane's (it is then handled here), False to hand it to the SDK."""
        message = parsed(line)
        if message is None or not self._methods.started:
            return False
        if message.get("method") == CANCELLED and "id" not in message:
            params = message.get("params")
            request_id = params.get("requestId") if type(params) is dict else None
            if not is_lane_id(request_id):
                return False
            scope = self._running.get(str(request_id))
            if scope is not None:
                scope.cancel()
            return True
        request_id, method, params = message.get("id"), message.get("method"), message.get("params", {})
        if not is_lane_id(request_id) or type(params) is not dict:
            return False
        route = self._methods.route(method, params)
        if route is None:
            return False
        meta = params.get("_meta")
        if type(meta) is dict and "progressToken" in meta:
            return False  # progress is reported by the SDK's session
        scope = anyio.CancelScope()
        self._running[str(request_id)] = scope
        self._tasks.start_soon(self._answer, str(method), route, str(request_id), params, meta, scope)
        return True

    async def _answer(
        self,
        method: str,
        route: Route,
        request_id: str,
        params: dict[str, Any],
        meta: Any,
        scope: anyio.CancelScope,
    ) -> None:
        try:
            with scope:
                line = await self._outcome(method, route, request_id, params, meta)
                await self._out.write(line)
        except (BrokenPipeError, anyio.ClosedResourceError):
            pass  # the client is gone; the SDK's side ends the server
        finally:
            self._running.pop(request_id, None)

    async def _outcome(
        self, method: str, route: Route, request_id: str, params: dict[str, Any], meta: Any
    ) -> str:
        try:
            validated = route.params_type.model_validate(params)
            ctx = LaneContext(
                self._methods.state, method, params, request_id, meta if type(meta) is dict else None
            )
            answer = _result_json(await route.handler(ctx, validated))
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("control method %s failed", method)
                return error_line(request_id, INTERNAL_ERROR, "Internal server error")
            return error_line(request_id, error.code, error.message, error.data)
        return result_line(request_id, answer)


def _result_json(result: object) -> str:
    """The result as the SDK dumps a handler's result: by alias, without ``None``s."""
    if isinstance(result, BaseModel):
        return result.model_dump_json(by_alias=True, exclude_none=True)
    if result is None:
        return "{}"
    if isinstance(result, Mapping):
        return to_json(dict(result), exclude_none=True).decode()
    raise TypeError(f"control method returned {type(result).__name__}; expected a model, a dict or None")


class LaneLines:
    """The lines of stdin with the lane's taken out: what is left is the SDK's."""

    def __init__(self, lines: Any, lane: ServerLane) -> None:
        self._lines = lines
        self._lane = lane

    def __aiter__(self) -> LaneLines:
        return self

    async def __anext__(self) -> str:
        while True:
            line: str = await self._lines.__anext__()
            if not self._lane.take(line):
                return line
