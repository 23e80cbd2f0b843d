"""The MCP side of the channel contract that every nexo channel server shares.

A channel server advertises ``nexo/channel`` and ``claude/channel`` (plus ``.../permission`` when it
authenticates who replies) in both protocol eras, serves durable events through
``shared.protocol.events``, pushes each inbound message as ``notifications/{nexo,claude}/channel``
to every live session (the Claude Code contract, a latency hint for nexo), and accepts permission
prompts either as the control-plane request ``nexo/channel/permission_request`` or as Claude Code's
``notifications/claude/channel/permission_request``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.session import ServerSession

from shared.hosting.capabilities import advertise_experimental
from shared.protocol.channel import (
    NAMESPACES,
    ChannelParams,
    PermissionRequestParams,
    PermissionVerdictParams,
    channel_capability,
    channel_notification,
    permission_capability,
    permission_request_method,
    permission_verdict_notification,
)
from shared.protocol.channel_terms import PULLS_EVENTS
from shared.protocol.events import EventsExtension, LogGetter, experimental_events_capability
from shared.protocol.permission_prompts import (
    PERMISSION_CLOSED_METHOD,
    PERMISSION_REQUEST_METHOD,
    PermissionClosedParams,
    PermissionClosedResult,
    PermissionPrompt,
    PermissionRequestAccepted,
)
from shared.protocol.storage import StorageExtension
from shared.serverkit import NexoServer

logger = logging.getLogger("nexo.channel")

PermissionHandler = Callable[[Any, PermissionRequestParams], Awaitable[int]]
"""(lifespan state, request) -> how many places the prompt reached."""
ClosedHandler = Callable[[Any, "PermissionClosedParams"], Awaitable[bool]]
"""(lifespan state, what the host settled) -> whether the prompt was still shown."""


class ChannelExtension(Extension):
    identifier = channel_capability("nexo")

    def __init__(
        self, *, outbound_tool: str, permission: PermissionHandler | None, closed: ClosedHandler | None = None
    ) -> None:
        self._outbound_tool = outbound_tool
        self._permission = permission
        self._closed = closed

    def settings(self) -> dict[str, Any]:
        return {"outbound_tool": self._outbound_tool, "permission": self._permission is not None}

    def methods(self) -> Sequence[MethodBinding]:
        if self._permission is None:
            return ()
        bindings: list[MethodBinding] = [
            MethodBinding(PERMISSION_REQUEST_METHOD, PermissionPrompt, self._on_permission)
        ]
        if self._closed is not None:
            bindings.append(MethodBinding(PERMISSION_CLOSED_METHOD, PermissionClosedParams, self._on_closed))
        return tuple(bindings)

    async def _on_closed(
        self, ctx: ServerRequestContext[Any, Any], params: PermissionClosedParams
    ) -> PermissionClosedResult:
        assert self._closed is not None
        return PermissionClosedResult(closed=await self._closed(ctx.lifespan_context, params))

    async def _on_permission(
        self, ctx: ServerRequestContext[Any, Any], params: PermissionPrompt
    ) -> PermissionRequestAccepted:
        assert self._permission is not None
        delivered = await self._permission(ctx.lifespan_context, params.as_params())
        return PermissionRequestAccepted(delivered=delivered)


class LiveSessions:
    """Remembers every session that spoke to us, so inbound messages can be pushed to it later.

    Also the middleware that turns Claude Code's permission-request notification into a call of
    the same handler the control-plane request uses.
    """

    def __init__(self, permission: PermissionHandler | None) -> None:
        self._sessions: list[ServerSession] = []
        self._permission = permission
        self.pulling = 0
        """Clients that said they pull (``pulls_events``), and so are never pushed to."""

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        # The SDK builds a session object per request; the one of `notifications/initialized` is
        # taken as the connection's, so each client is pushed to once. (The 2026-07-28 era has no
        # standing push channel and no such notification: its clients pull.)
        session = ctx.session
        if ctx.method == INITIALIZED and session is not None:
            if _pulls_events(session):
                self.pulling += 1
            else:
                self._sessions.append(session)
        if ctx.request_id is None and self._permission is not None and ctx.method in _REQUEST_NOTIFICATIONS:
            try:
                params = PermissionRequestParams.model_validate(ctx.params or {})
            except ValueError:
                logger.warning("ignoring a malformed %s", ctx.method)
                return None
            await self._permission(ctx.lifespan_context, params)
            return None
        return await call_next(ctx)

    @property
    def count(self) -> int:
        return len(self._sessions)

    async def _broadcast(self, notifications: Sequence[Any]) -> int:
        reached = 0
        for session in list(self._sessions):
            try:
                for note in notifications:
                    await session.send_notification(note)
                reached += 1
            except Exception as exc:  # noqa: BLE001 -- a closed session is dropped; delivery is durable elsewhere
                logger.debug("dropping a closed session: %r", exc)
                self._sessions.remove(session)
        return reached

    async def push_message(self, params: ChannelParams) -> int:
        return await self._broadcast([channel_notification(ns, params) for ns in NAMESPACES])

    async def push_verdict(self, params: PermissionVerdictParams) -> int:
        return await self._broadcast([permission_verdict_notification(ns, params) for ns in NAMESPACES])


INITIALIZED = "notifications/initialized"


def _pulls_events(session: ServerSession) -> bool:
    """Whether the client declared ``pulls_events`` in its ``nexo/channel`` extension settings."""
    capabilities = session.client_capabilities
    extensions = (capabilities.extensions if capabilities is not None else None) or {}
    settings = extensions.get(channel_capability("nexo"))
    return isinstance(settings, dict) and settings.get(PULLS_EVENTS) is True


_REQUEST_NOTIFICATIONS = frozenset(permission_request_method(ns) for ns in NAMESPACES)


def make_channel_server(
    name: str,
    *,
    instructions: str,
    lifespan: Any,
    get_log: LogGetter,
    event_kinds: Sequence[str],
    outbound_tool: str = "send_message",
    permission: PermissionHandler | None = None,
    closed: ClosedHandler | None = None,
) -> tuple[MCPServer[Any], LiveSessions]:
    """An ``MCPServer`` wired for the channel contract; the caller adds its outbound tool."""
    sessions = LiveSessions(permission)
    server: MCPServer[Any] = NexoServer(
        name,
        instructions=instructions,
        lifespan=lifespan,
        extensions=[
            ChannelExtension(outbound_tool=outbound_tool, permission=permission, closed=closed),
            EventsExtension(get_log, kinds=event_kinds),
            StorageExtension(lambda state: [get_log(state).database.storage]),
        ],
        middleware=[sessions],
        # The orchestrator's replies take the control lane: the outbound tool is all they call.
        lane_tools=[outbound_tool],
    )
    experimental: dict[str, dict[str, Any]] = dict(experimental_events_capability(event_kinds))
    for ns in NAMESPACES:
        experimental[channel_capability(ns)] = {}
        if permission is not None:
            experimental[permission_capability(ns)] = {}
    advertise_experimental(server, experimental)
    return server, sessions
