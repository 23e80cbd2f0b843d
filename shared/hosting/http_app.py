"""The ASGI app that serves one MCP server at ``/mcp``, with ``/healthz`` and the bearer-token check."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from shared.hosting.auth import BearerAuth
from shared.hosting.options import HttpOptions

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"


@dataclass(slots=True)
class ServerStatus:
    """What ``/healthz`` reports; servers may add fields through ``extra``."""

    name: str
    extra: Callable[[], Mapping[str, Any]] | None = field(default=None)

    def payload(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": "ok", "server": self.name}
        if self.extra is not None:
            body.update(self.extra())
        return body


def build_http_app(
    server: MCPServer[Any], options: HttpOptions, status: ServerStatus | None = None
) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp`` plus ``/healthz``, with auth and host checks."""
    options.check()
    report = status or ServerStatus(name=server.name)

    async def healthz(_: Request) -> Response:
        return JSONResponse(report.payload())

    mcp_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=options.security(),
        max_request_body_size=options.max_request_bytes,
        host=options.host,
    )
    mcp_app.router.routes.append(Route(HEALTH_PATH, healthz, methods=["GET"]))
    assert options.token is not None  # options.check() refused a missing one
    return BearerAuth(mcp_app, options.token, realm=server.name, open_path=HEALTH_PATH)


def mcp_url(host: str, port: int) -> str:
    """The URL clients connect to (IPv6 hosts in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{MCP_PATH}"
