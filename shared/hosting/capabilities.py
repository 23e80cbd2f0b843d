"""What the SDK's ``MCPServer`` offers no public hook for: the one place that reaches past its API."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp.server import MCPServer


def advertise_experimental(server: MCPServer[Any], capabilities: Mapping[str, Mapping[str, Any]]) -> None:
    """Declare ``capabilities.experimental`` entries in the handshake-era ``InitializeResult``.

    ``MCPServer`` has no public hook for experimental capabilities, yet Claude Code recognises a
    channel only by ``experimental["claude/channel"]``. The low-level server builds its
    initialization options on demand, for stdio and for every HTTP session, so wrapping that one
    method covers every transport. This is the single place that reaches past the public API.
    """
    lowlevel = server._lowlevel_server
    original = lowlevel.create_initialization_options
    merged = {key: dict(value) for key, value in capabilities.items()}

    def create_initialization_options(
        notification_options: Any = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        combined = {**merged, **(experimental_capabilities or {})}
        return original(notification_options, combined, extensions)

    lowlevel.create_initialization_options = create_initialization_options  # type: ignore[method-assign]


ResourceHandler = Callable[[Any, Any], Awaitable[Any]]
"""``(ServerRequestContext, params) -> result`` of a low-level request handler."""


def serve_resource_subscriptions(
    server: MCPServer[Any],
    *,
    on_list: ResourceHandler,
    on_subscribe: ResourceHandler,
    on_unsubscribe: ResourceHandler,
) -> None:
    """Serve the handshake era's ``resources/subscribe`` and ``resources/unsubscribe``, take over
    ``resources/list`` (so the server learns which connections list its resources), and advertise
    ``resources.subscribe`` and ``resources.listChanged`` in the ``InitializeResult``.

    ``MCPServer`` offers none of this publicly; like :func:`advertise_experimental` it is done here
    so the reach past the public API stays in this module. The 2026-07-28 discovery result is left as
    the SDK derives it: that era has no standing channel to push on.
    """
    import mcp_types as types
    from mcp.server import NotificationOptions

    lowlevel = server._lowlevel_server
    lowlevel.add_request_handler("resources/list", types.PaginatedRequestParams, on_list)
    lowlevel.add_request_handler("resources/subscribe", types.SubscribeRequestParams, on_subscribe)
    lowlevel.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, on_unsubscribe)
    original = lowlevel.create_initialization_options

    def create_initialization_options(
        notification_options: Any = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> Any:
        options = notification_options or NotificationOptions()
        options.resources_changed = True
        return original(options, experimental_capabilities, extensions)

    lowlevel.create_initialization_options = create_initialization_options  # type: ignore[method-assign]


def tool_call_handler(server: MCPServer[Any]) -> Callable[[Any, Any], Awaitable[Any]]:
    """The SDK's own ``tools/call`` handler ``(ctx, CallToolRequestParams) -> CallToolResult``, for
    the control lane to answer a tool call as the SDK's session would (argument validation, a
    ``ToolError`` as an ``is_error`` result). It is a bound method: the server's own tools, found
    when the call comes, whatever was registered after this."""
    handler: Callable[[Any, Any], Awaitable[Any]] = server._handle_call_tool
    return handler


async def run_on_streams(server: MCPServer[Any], read_stream: Any, write_stream: Any) -> None:
    """Serve on streams a transport made, as ``MCPServer.run_stdio_async`` does once ``stdio_server``
    has made them (it offers no public way to pass other ones: see ``stdio_pipes``)."""
    lowlevel = server._lowlevel_server
    await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
