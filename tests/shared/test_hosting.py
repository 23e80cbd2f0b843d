"""HTTP hosting: bearer tokens, DNS-rebinding protection, health checks, refusing unsafe binds."""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.server import MCPServer
from starlette.applications import Starlette

from shared.channelkit import serve_asgi
from shared.hosting.errors import HostingError, startup_failure
from shared.hosting.listener import listen
from shared.hosting.main import server_main
from shared.hosting.options import HttpOptions, http_options_from_env, parse_bind
from shared.hosting.serve import serve_http
from shared.hosting.tokens import token_source
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


@pytest.fixture(autouse=True)
def _collector_as_it_was() -> Iterator[None]:
    """A server's ``run`` freezes what its start made (for a server process, for good): a test that
    runs it in this process gives those objects back to the collector afterwards."""
    frozen = gc.get_freeze_count()
    yield
    if gc.get_freeze_count() != frozen:
        gc.unfreeze()


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


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1", "::1"])
def test_serving_without_a_token_refuses_on_every_bind_and_says_how_to_set_one(host: str) -> None:
    with pytest.raises(HostingError, match="NEXO_SERVER_TOKEN"):
        HttpOptions(host=host, port=8765).check()


def test_without_a_configured_token_one_is_generated_once_into_a_private_file(tmp_path: Path) -> None:
    env = {"NEXO_STATE_DIR": str(tmp_path / "state")}
    first = http_options_from_env("127.0.0.1:8765", env, "servers.time")
    again = http_options_from_env("127.0.0.1:8765", env, "servers.time")
    path = tmp_path / "state" / "http-tokens" / "time.token"
    assert first.token is not None
    assert len(first.token) >= 40
    assert again.token == first.token == path.read_text().strip()
    assert (path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert token_source(env, "servers.time").describe() == (
        f"bearer token generated into {path} (0600): clients send it as `Authorization: Bearer`"
    )


def test_a_token_file_that_does_not_exist_yet_is_created_with_a_new_token(tmp_path: Path) -> None:
    path = tmp_path / "secrets" / "memory.token"
    options = http_options_from_env("127.0.0.1:8765", {"NEXO_SERVER_TOKEN_FILE": str(path)}, "memory")
    assert options.token == path.read_text().strip()
    assert path.stat().st_mode & 0o777 == 0o600


def test_an_unauthenticated_request_on_loopback_is_refused(tmp_path: Path) -> None:
    options = http_options_from_env("127.0.0.1:0", {"NEXO_STATE_DIR": str(tmp_path)}, "probe")

    async def scenario() -> tuple[int, int]:
        async with _serving(options) as base, httpx2.AsyncClient() as http:
            bare = await http.post(f"{base}/mcp", json=INIT, headers=HEADERS)
            authed = await http.post(
                f"{base}/mcp", json=INIT, headers={**HEADERS, "Authorization": f"Bearer {options.token}"}
            )
            return bare.status_code, authed.status_code

    assert anyio.run(scenario) == (401, 200)


def _busy_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def test_a_busy_port_is_one_line_naming_the_port_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with _busy_port() as busy:
        port = busy.getsockname()[1]
        env = {"NEXO_SERVER_TOKEN": "t"}
        code = server_main("servers.probe", _server, argv=["--http", f"127.0.0.1:{port}"], env=env)
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines() == [
        f"servers.probe: cannot listen on 127.0.0.1:{port}: Address already in use; another process "
        f"already listens there (see it with `ss -ltnp 'sport = :{port}'`); stop it, or choose another "
        "port with --http HOST:PORT"
    ]


def test_a_listener_that_cannot_bind_inside_a_running_server_is_one_line_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A channel's own web side binds in the lifespan, under task groups; the person sees one line."""
    with _busy_port() as busy:
        port = busy.getsockname()[1]

        def build() -> MCPServer[Any]:
            @asynccontextmanager
            async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(lambda: serve_asgi(Starlette(), "127.0.0.1", port, setting="NEXO_X_PORT"))
                    yield

            return MCPServer("probe", lifespan=lifespan)

        code = server_main("channel_servers.probe", build, argv=[], env={})
    lines = capsys.readouterr().err.splitlines()
    assert code == 1
    assert lines == [
        f"channel_servers.probe: cannot listen on 127.0.0.1:{port}: Address already in use; another "
        f"process already listens there (see it with `ss -ltnp 'sport = :{port}'`); stop it, or choose "
        "another port with NEXO_X_PORT"
    ]


def test_what_the_start_made_is_out_of_later_collections_before_the_server_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full collection in a started server walked every module, class and tool its start made
    (about 100,000 objects, 40 to 100 ms in the memory server), stalling whichever call it landed
    in; frozen before serving, it walks only what serving made since."""
    gc.unfreeze()
    made: list[object] = []
    seen: dict[str, object] = {}

    def build() -> MCPServer[Any]:
        server = _server()
        made.append(server)
        return server

    async def serve_stdio(server: MCPServer[Any]) -> None:
        seen["frozen"] = gc.get_freeze_count()
        seen["tracked"] = any(o is made[0] for o in gc.get_objects())
        seen["server"] = server

    monkeypatch.setattr("shared.hosting.serve.serve_stdio", serve_stdio)
    assert server_main("servers.probe", build, argv=[], env={}) == 0
    assert seen["server"] is made[0]
    assert isinstance(seen["frozen"], int)
    assert seen["frozen"] > 0
    assert seen["tracked"] is False  # gc.get_objects() leaves out the frozen generation
    gc.unfreeze()
    assert any(o is made[0] for o in gc.get_objects())


def test_a_failure_that_is_not_a_start_up_problem_keeps_its_traceback() -> None:
    assert startup_failure(ExceptionGroup("x", [ValueError("bug")])) is None
    inner = HostingError("cannot listen")
    assert startup_failure(BaseExceptionGroup("x", [ValueError("a"), ExceptionGroup("y", [inner])])) is inner


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


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_connections_accepted_by_a_listener_have_nagle_off(host: str) -> None:
    """A response written as headers then body must not wait ~40 ms for the client's delayed ACK."""

    async def scenario() -> int:
        accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        sock = listen(host, 0)
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            port = sock.getsockname()[1]
            with socket.create_connection((host, port)):
                with anyio.fail_after(5):
                    return await accepted

    assert anyio.run(scenario) != 0
