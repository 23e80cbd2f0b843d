"""Calls on a connected client: tools, control-plane requests, and what the server offers.

A call that outlives its time, or whose connection closes under it, is :class:`ServerUnavailable`
naming the server and the call; every other protocol error is the server's answer and passes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

import anyio
import mcp_types as types
from mcp import Client, MCPError

from orchestrator.mesh.errors import ServerUnavailable
from orchestrator.mesh.lane import ClientLane

R = TypeVar("R", bound=types.Result)


async def call_tool(
    client: Client | ClientLane,
    server: str,
    tool: str,
    arguments: Mapping[str, Any],
    *,
    limit: float,
    meta: Mapping[str, Any] | None,
    closed: anyio.Event,
) -> types.CallToolResult:
    """Through the SDK's client, or the connection's control lane for a tool the server answers
    there: the same result, the same errors."""
    try:
        with anyio.fail_after(limit):
            if isinstance(client, ClientLane):
                params = types.CallToolRequestParams(
                    name=tool,
                    arguments=dict(arguments),
                    _meta=cast(types.RequestParamsMeta, dict(meta)) if meta else None,
                )
                return await client.request(types.CallToolRequest(params=params), types.CallToolResult)
            return await client.call_tool(
                tool,
                dict(arguments),
                read_timeout_seconds=limit,
                meta=cast(types.RequestParamsMeta, dict(meta)) if meta else None,
            )
    except TimeoutError as exc:
        raise ServerUnavailable(f"{server}.{tool} did not answer within {limit:g}s") from exc
    except MCPError as exc:
        if exc.code == types.CONNECTION_CLOSED or closed.is_set():
            raise ServerUnavailable(
                f"server {server!r} went away during {tool!r}; it is being restarted and the call "
                "may or may not have taken effect"
            ) from exc
        raise


async def send_request(
    client: Client | ClientLane,
    server: str,
    request: types.Request[Any, Any],
    result_type: type[R],
    *,
    timeout: float,
    closed: anyio.Event,
) -> R:
    """Through the SDK's session, or the connection's control lane: the same answers, the same errors."""
    try:
        with anyio.fail_after(timeout + 5):
            if isinstance(client, ClientLane):
                return await client.request(request, result_type)
            result: R = await client.session.send_request(
                request, result_type, request_read_timeout_seconds=timeout + 5
            )
            return result
    except TimeoutError as exc:
        raise ServerUnavailable(f"{server}: {request.method} did not answer within {timeout:g}s") from exc
    except MCPError as exc:
        if exc.code == types.CONNECTION_CLOSED or closed.is_set():
            raise ServerUnavailable(f"server {server!r} went away during {request.method}") from exc
        raise


def capability_names(client: Client) -> tuple[str, ...]:
    """The experimental capabilities and extensions the server declared, in both protocol eras."""
    caps = client.server_capabilities
    names = {*(caps.experimental or {}), *(caps.extensions or {})}
    # 2026-07-28 has no experimental capabilities: the channel extension's settings say it.
    for ns in ("nexo", "claude"):
        if (caps.extensions or {}).get(f"{ns}/channel", {}).get("permission") is True:
            names.add(f"{ns}/channel/permission")
    return tuple(sorted(names))
