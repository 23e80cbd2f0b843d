"""The one way a nexo MCP server is built: strict tools, honest capabilities, a real version.

Every built-in server and channel server constructs :class:`NexoServer` instead of the SDK's
``MCPServer``, so what an outside MCP client sees is decided here once:

- every tool has a title, a dedented description, and an input schema that forbids unknown
  properties (a misspelt argument is an error naming the parameters that exist, never ignored);
- arguments that fail validation come back as one short line per bad field;
- ``serverInfo.version`` is the installed nexo version;
- only what is served is advertised: no empty prompts or resources, no resource subscriptions;
- ``logging/setLevel`` is served and decides which ``notifications/message`` a session receives;
- a long tool reports progress with :func:`progress_while`;
- the control methods of its extensions are also served on the control lane when stdio is a pair
  of pipes (``shared.hosting.lane``), advertised as ``nexo/lane``.
"""

from __future__ import annotations

import inspect
import time
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server import MCPServer
from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerMiddleware, ServerRequestContext
from mcp.server.extension import Extension
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.session import ServerSession
from mcp_types import Icon, ToolAnnotations
from pydantic import ValidationError

from shared.hosting.capabilities import advertise_experimental, tool_call_handler
from shared.hosting.lane import LaneMethods
from shared.protocol.lane import LANE_EXTENSION
from shared.toolschema import describe_invalid_arguments, strict_arguments

LifespanT = TypeVar("LifespanT")
_CallableT = TypeVar("_CallableT", bound=Callable[..., Any])

DISTRIBUTION = "nexo"
UNSERVED_METHODS = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
)
"""Handlers the SDK registers whether or not a server has anything to offer through them."""

LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)


def nexo_version() -> str:
    """The installed nexo version, reported as ``serverInfo.version`` by every server."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError as exc:
        raise RuntimeError(
            f"the {DISTRIBUTION!r} package is not installed; run `pip install -e .` in the checkout"
        ) from exc


class ClientLogLevels:
    """The ``logging/setLevel`` choice of each connected client, forgotten when its connection goes.

    A handshake-era connection is recognised by its ``initialize`` parameters, the one object the
    SDK keeps per connection and hands to every request's session.
    """

    def __init__(self) -> None:
        self._levels: dict[int, types.LoggingLevel] = {}

    def set(self, session: ServerSession, level: types.LoggingLevel) -> None:
        connection = session.client_params
        if connection is None:
            return
        key = id(connection)
        if key not in self._levels:
            weakref.finalize(connection, self._levels.pop, key, None)
        self._levels[key] = level

    def wants(self, session: ServerSession, level: types.LoggingLevel) -> bool:
        """True unless the client chose a higher level; on 2026-07-28 connections, which have no
        ``logging/setLevel``, the SDK applies the request's own ``_meta`` opt-in instead."""
        connection = session.client_params
        chosen = None if connection is None else self._levels.get(id(connection))
        return chosen is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(chosen)


@asynccontextmanager
async def _no_state(app: Any) -> AsyncIterator[dict[str, Any]]:
    """The SDK's default lifespan: no state."""
    yield {}


class NexoServer(MCPServer[LifespanT]):
    """An ``MCPServer`` whose tools, capabilities and identity follow the rules in the module doc."""

    def __init__(
        self,
        name: str,
        *,
        instructions: str,
        lifespan: Any = None,
        extensions: Sequence[Extension] | None = None,
        middleware: Sequence[ServerMiddleware[Any]] | None = None,
        lane_tools: Sequence[str] = (),
    ) -> None:
        self.lane = LaneMethods(extensions or (), tools=lane_tools, call_tool=tool_call_handler(self))
        """The control methods, and the tools among ``lane_tools``, that a nexo client may call on
        the control lane (``shared.hosting.lane``)."""
        offered = [*(extensions or ()), self.lane.extension()] if self.lane.offered else extensions
        super().__init__(
            name,
            instructions=instructions,
            version=nexo_version(),
            lifespan=self.lane.keeping(lifespan or _no_state),
            extensions=offered,
            middleware=middleware,
            log_level="WARNING",
            subscriptions=False,
        )
        if self.lane.offered:
            advertise_experimental(self, {LANE_EXTENSION: self.lane.settings()})
        self.client_log_levels = ClientLogLevels()
        lowlevel = self._lowlevel_server
        # The SDK registers prompt and resource handlers unconditionally and derives the advertised
        # capabilities from the registered handlers; nexo servers offer neither, so both go.
        for method in UNSERVED_METHODS:
            lowlevel._request_handlers.pop(method, None)
        lowlevel.add_request_handler("logging/setLevel", types.SetLevelRequestParams, self._set_log_level)

    async def _set_log_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self.client_log_levels.set(ctx.session, params.level)
        return types.EmptyResult()

    async def log_to_client(self, ctx: Context[Any], level: types.LoggingLevel, message: str) -> None:
        """Send ``notifications/message`` on the current request if the client admits ``level``.

        Handshake-era clients choose with ``logging/setLevel``; 2026-07-28 clients opt in per request
        through ``_meta``. The SDK's own ``Context.log`` is deprecated with the logging capability,
        so the notification goes out through the session's generic sender.
        """
        request = ctx.request_context
        meta = dict(request.meta) if request.meta is not None else None
        if level not in allowed_log_levels(request.protocol_version, meta):
            return
        if not self.client_log_levels.wants(request.session, level):
            return
        note = types.LoggingMessageNotification(
            params=types.LoggingMessageNotificationParams(level=level, data=message, logger=self.name)
        )
        await request.session.send_notification(note, related_request_id=request.request_id)

    def add_tool(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        tool_name = name or fn.__name__
        if not title:
            raise ValueError(f"tool {tool_name!r} needs a title: pass title='...' to the tool decorator")
        if annotations is None:
            raise ValueError(f"tool {tool_name!r} needs annotations: pass tool_hints(...) or READ_ONLY_HINTS")
        text = inspect.cleandoc(description or fn.__doc__ or "")
        if not text:
            raise ValueError(f"tool {tool_name!r} needs a description: give it a docstring")
        tool = Tool.from_function(
            fn,
            name=tool_name,
            title=title,
            description=text,
            annotations=annotations,
            icons=icons,
            meta=meta,
            structured_output=structured_output,
        )
        arguments = strict_arguments(tool.fn_metadata.arg_model, tool_name)
        tool.fn_metadata.arg_model = arguments.model
        tool.parameters = arguments.schema
        if tool_name in {existing.name for existing in self._tool_manager.list_tools()}:
            raise ValueError(f"tool {tool_name!r} is defined twice on server {self.name!r}")
        # The SDK's ToolManager only builds tools from functions; registering the strict Tool we
        # built is the one step that goes past its public API.
        self._tool_manager._tools[tool_name] = tool

    def tool(
        self,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: ToolAnnotations | None = None,
        icons: list[Icon] | None = None,
        meta: dict[str, Any] | None = None,
        structured_output: bool | None = None,
    ) -> Callable[[_CallableT], _CallableT]:
        def decorator(fn: _CallableT) -> _CallableT:
            self.add_tool(fn, name, title, description, annotations, icons, meta, structured_output)
            return fn

        return decorator

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[LifespanT, Any] | None = None
    ) -> types.CallToolResult | types.InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(describe_invalid_arguments(name, cause, self._parameters_of(name))) from cause
            raise

    def _parameters_of(self, name: str) -> list[str]:
        tool = self._tool_manager.get_tool(name)
        return [] if tool is None else sorted(tool.parameters.get("properties", {}))


@asynccontextmanager
async def progress_while(
    ctx: Context[Any], *, total: float, every_s: float, clock: Callable[[], float] = time.monotonic
) -> AsyncIterator[None]:
    """Report ``notifications/progress`` while the block runs: at the start, every ``every_s``
    seconds, and at the end. Progress is the seconds elapsed out of ``total`` (the time limit). A
    caller that sent no progress token gets nothing; the SDK makes each report a no-op then."""
    started = clock()

    async def tick() -> None:
        while True:
            await anyio.sleep(every_s)
            await ctx.report_progress(clock() - started, total, "running")

    await ctx.report_progress(0, total, "started")
    async with anyio.create_task_group() as ticks:
        ticks.start_soon(tick)
        try:
            yield
        finally:
            ticks.cancel_scope.cancel()
    await ctx.report_progress(max(clock() - started, 1e-6), total, "finished")
