"""HTTP hosting: bearer tokens, DNS-rebinding protection, health checks, refusing unsafe binds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server import MCPServer

from shared.hosting import (
    HostingError,
    HttpOptions,
    http_options_from_env,
    parse_bind,
    serve_http,
)
from shared.net import is_loopback

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _server() -> MCPServer[Any]:
    server: MCPServer[Any] = MCPServer("probe", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    return server


@asynccontextmanager
async def _serving(options: HttpOptions) -> AsyncIterator[str]:
    ready = anyio.Event()
    bound: list[str] = []

    async def on_ready(host: str, port: int) -> None:
        bound.append(f"http://{host}:{port}")
        ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: serve_http(_server(), options, on_ready=on_ready))
        with anyio.fail_after(10):
            await ready.wait()
        try:
            yield bound[0]
        finally:
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_requests_without_or_with_a_wrong_token_are_refused_and_the_right_one_works() -> None:
    async with _serving(HttpOptions(port=0, token="right")) as base, httpx2.AsyncClient() as http:
        missing = await http.post(f"{base}/mcp", json=INIT, headers=HEADERS)
        wrong = await http.post(
            f"{base}/mcp", json=INIT, headers={**HEADERS, "Authorization": "Bearer wrong"}
        )
        right = await http.post(
            f"{base}/mcp", json=INIT, headers={**HEADERS, "Authorization": "Bearer right"}
        )
        health = await http.get(f"{base}/healthz")
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, 'Bearer realm="probe"')
    assert (wrong.status_code, wrong.headers["www-authenticate"]) == (
        401,
        'Bearer realm="probe", error="invalid_token"',
    )
    assert right.status_code == 200
    assert health.json() == {"status": "ok", "server": "probe"}


@pytest.mark.anyio
async def test_a_foreign_host_or_origin_is_refused_even_with_the_token() -> None:
    auth = {**HEADERS, "Authorization": "Bearer t"}
    async with (
        _serving(HttpOptions(port=0, token="t", allowed_hosts=("memory:*",))) as base,
        httpx2.AsyncClient() as http,
    ):
        foreign_host = await http.post(f"{base}/mcp", json=INIT, headers={**auth, "Host": "evil.example:80"})
        foreign_origin = await http.post(
            f"{base}/mcp", json=INIT, headers={**auth, "Origin": "http://evil.example"}
        )
        compose_name = await http.post(f"{base}/mcp", json=INIT, headers={**auth, "Host": "memory:8765"})
    assert foreign_host.status_code == 421
    assert foreign_origin.status_code == 403
    assert compose_name.status_code == 200


@pytest.mark.anyio
async def test_an_mcp_client_with_the_token_calls_tools_in_both_protocol_eras() -> None:
    async with _serving(HttpOptions(port=0, token="t")) as base:
        for mode in ("legacy", "auto"):
            async with httpx2.AsyncClient(headers={"Authorization": "Bearer t"}) as http:
                from mcp.client.streamable_http import streamable_http_client

                async with Client(
                    streamable_http_client(f"{base}/mcp", http_client=http), mode=mode
                ) as client:
                    result = await client.call_tool("echo", {"text": mode})
            assert result.structured_content == {"result": mode}


def test_serving_off_loopback_without_a_token_refuses_and_says_how_to_set_one() -> None:
    with pytest.raises(HostingError, match="NEXO_SERVER_TOKEN"):
        HttpOptions(host="0.0.0.0", port=8765).check()


def test_http_options_read_the_token_and_allowlists_from_the_environment(tmp_path: Any) -> None:
    secret = tmp_path / "token"
    secret.write_text("from-file\n")
    secret.chmod(0o600)
    env = {"NEXO_SERVER_TOKEN_FILE": str(secret), "NEXO_SERVER_ALLOWED_HOSTS": "memory:*, memory"}
    options = http_options_from_env("0.0.0.0:8765", env)
    assert (options.host, options.port, options.token, options.allowed_hosts) == (
        "0.0.0.0",
        8765,
        "from-file",
        ("memory:*", "memory"),
    )
    secret.chmod(0o644)
    with pytest.raises(HostingError, match="chmod 600"):
        http_options_from_env("0.0.0.0:8765", env)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("127.0.0.1:80", ("127.0.0.1", 80)), ("[::1]:9", ("::1", 9)), (":7", ("127.0.0.1", 7))],
)
def test_parse_bind_accepts_host_port_forms(value: str, expected: tuple[str, int]) -> None:
    assert parse_bind(value) == expected


@pytest.mark.parametrize("value", ["8765", "host:", "host:99999", "host:abc"])
def test_parse_bind_rejects_malformed_values_with_an_example(value: str) -> None:
    with pytest.raises(HostingError, match=r"HOST:PORT|out of range"):
        parse_bind(value)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("memory", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback
