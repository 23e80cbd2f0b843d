"""Serving a server's control-plane methods (custom JSON-RPC requests, never tools) from a route table.

Each server lists ``(RequestClass, ParamsClass, handler)`` routes whose handlers take the server's
lifespan state and the params, and maps its own refusals to JSON-RPC errors; this module binds them
to an MCP extension. A write refused by a full disk is the `STORAGE_FULL` error on every server;
anything else a server does not map stays an internal error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.extension import MethodBinding
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

from shared.protocol.deferred import WireRequest
from shared.protocol.storage import storage_error

Handler = Callable[[Any, Any], Awaitable[types.Result]]
Route = tuple[type[WireRequest[Any, Any]], type[BaseModel], Handler]
ToError = Callable[[Exception], MCPError | None]


def method_name(request: type[WireRequest[Any, Any]]) -> str:
    """The JSON-RPC method a request class carries (its ``method`` field's default)."""
    return str(request.model_fields["method"].default)


def method_names(routes: Sequence[Route]) -> tuple[str, ...]:
    return tuple(method_name(request) for request, _, _ in routes)


def bind_routes(routes: Sequence[Route], to_error: ToError) -> tuple[MethodBinding, ...]:
    """One binding per route; an exception ``to_error`` maps becomes that JSON-RPC error."""

    def bound(handler: Handler) -> Callable[[ServerRequestContext[Any, Any], Any], Awaitable[types.Result]]:
        async def call(ctx: ServerRequestContext[Any, Any], params: Any) -> types.Result:
            try:
                return await handler(ctx.lifespan_context, params)
            except Exception as exc:
                error = storage_error(exc) or to_error(exc)
                if error is None:
                    raise
                raise error from exc

        return call

    return tuple(
        MethodBinding(method_name(request), params, bound(handler)) for request, params, handler in routes
    )
