"""Tool calls over Streamable HTTP reuse one connection, in both protocol eras.

The server counts the client ports its ``POST /mcp`` requests come from: a new port is a new TCP
connection (and its handshake, and a new server-side protocol object) for the call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp.server import MCPServer
from pydantic import SecretStr
from starlette.types import Receive, Scope, Send

from orchestrator.mesh import HttpServerConfig, Mesh, SupervisionConfig
from orchestrator.mesh.config import Protocol
from shared.hosting.http_app import build_http_app
from shared.hosting.listener import listen, serve_asgi
from shared.hosting.options import HttpOptions

pytestmark = pytest.mark.anyio

TOKEN = "t" * 32
CALLS = 6


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("probe", log_level="WARNING")

    @server.tool()
    async def echo(text: str) -> str:
        """Echo."""
        return text

    return server


@asynccontextmanager
async def _counted() -> AsyncIterator[tuple[str, set[int]]]:
    """An MCP server over HTTP; yields its URL and the client ports its tool POSTs came from."""
    app = build_http_app(_server(), HttpOptions(token=TOKEN))
    ports: set[int] = set()

    async def counting(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST" and scope["client"] is not None:
            ports.add(scope["client"][1])
        await app(scope, receive, send)

    sock = listen("127.0.0.1", 0)
    async with serve_asgi(counting, sock, lifespan="on") as (host, port):
        yield f"http://{host}:{port}/mcp", ports


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_tool_calls_over_http_share_one_connection(protocol: Protocol) -> None:
    async with _counted() as (url, ports):
        config = HttpServerConfig(transport="http", url=url, token=SecretStr(TOKEN), protocol=protocol)
        async with Mesh({"probe": config}, SupervisionConfig()) as mesh:
            with anyio.fail_after(20):
                assert await mesh.wait_ready(15.0) == []
                ports.clear()  # the handshake's requests are not what this counts
                for i in range(CALLS):
                    result = await mesh["probe"].call_tool("echo", {"text": f"hi {i}"})
                    assert not result.is_error
    assert len(ports) == 1, f"{CALLS} calls used {len(ports)} connections"
