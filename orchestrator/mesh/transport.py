"""Transports for the mesh: stdio children and Streamable HTTP, each watched for closure."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from orchestrator.mesh.config import HttpServerConfig, StdioServerConfig
from orchestrator.mesh.fork_request import ForkRequest, built_in_module
from orchestrator.mesh.forked import forked_stdio
from orchestrator.mesh.forkserver import ForkServer
from orchestrator.mesh.http_reuse import ConnectionKeepingTransport
from orchestrator.mesh.lane import ClientLane
from orchestrator.mesh.stderr_tail import StderrTail, teed_stderr
from shared.http1 import Http1Transport

TransportStreams = tuple[Any, Any]

PASS_THROUGH_PREFIXES = ("COVERAGE_",)
"""Variables every child inherits besides the SDK's minimal set, so coverage can follow children."""


def child_environment(config: StdioServerConfig, extra: Mapping[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(PASS_THROUGH_PREFIXES)}
    env.update(extra)
    env.update(config.env)
    return env


def template_environment(base_env: Mapping[str, str]) -> dict[str, str]:
    """The fork server's own environment: what every child would get before its server's ``env``."""
    env = get_default_environment()
    env.update({k: v for k, v in os.environ.items() if k.startswith(PASS_THROUGH_PREFIXES)})
    env.update(base_env)
    return env


def fork_request(config: StdioServerConfig, module: str, env: Mapping[str, str]) -> ForkRequest:
    """What the fork server is asked for to start ``config`` (a built-in ``module``) with ``env``."""
    return ForkRequest(
        module, config.args[2:], get_default_environment() | dict(env), config.cwd or str(Path.cwd())
    )


def early_requests(
    servers: Mapping[str, StdioServerConfig | HttpServerConfig], base_env: Mapping[str, str]
) -> list[ForkRequest]:
    """The fork requests of the built-in servers among ``servers``, as their first start makes them."""
    return [
        fork_request(config, module, child_environment(config, base_env))
        for config in servers.values()
        if isinstance(config, StdioServerConfig) and (module := built_in_module(config)) is not None
    ]


@asynccontextmanager
async def _watched(inner: Any, closed: anyio.Event) -> AsyncIterator[TransportStreams]:
    """Relay the read side so the mesh learns at once when the peer goes away."""
    async with inner as (read, write):
        send, recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def relay() -> None:
            try:
                async with send:
                    async for message in read:
                        await send.send(message)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                closed.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            try:
                yield recv, write
            finally:
                tg.cancel_scope.cancel()
                recv.close()


@asynccontextmanager
async def _forked_or_spawned(
    config: StdioServerConfig,
    module: str,
    env: dict[str, str],
    fork_server: ForkServer,
    errlog: TextIO,
    lane: ClientLane | None,
) -> AsyncIterator[TransportStreams]:
    """The child the fork server started early for this request, else a child of the fork server
    when it can make one, else the SDK's own spawn (with no control lane: the SDK owns its pipes)."""
    request = fork_request(config, module, env)
    adopted = await fork_server.adopt(request)
    if adopted is not None:
        async with forked_stdio(*adopted, lane=lane) as streams:
            yield streams
        return
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        process = await fork_server.fork(request, (stdin_read, stdout_write, errlog.fileno()))
    except BaseException:
        os.close(stdin_write)
        os.close(stdout_read)
        raise
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    if process is None:
        os.close(stdin_write)
        os.close(stdout_read)
        params = StdioServerParameters(command=config.command, args=config.args, env=env, cwd=config.cwd)
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return
    async with forked_stdio(process, stdin_write, stdout_read, lane=lane) as streams:
        yield streams


@asynccontextmanager
async def _stdio(
    config: StdioServerConfig,
    env: dict[str, str],
    fork_server: ForkServer | None,
    stderr_tail: StderrTail | None,
    lane: ClientLane | None,
) -> AsyncIterator[TransportStreams]:
    """The child's stderr is ours, or teed into ``stderr_tail`` when the caller keeps its last line."""
    module = built_in_module(config) if fork_server is not None else None
    async with AsyncExitStack() as stack:
        errlog = (
            sys.stderr if stderr_tail is None else await stack.enter_async_context(teed_stderr(stderr_tail))
        )
        if fork_server is not None and module is not None:
            inner = _forked_or_spawned(config, module, env, fork_server, errlog, lane)
        else:
            params = StdioServerParameters(command=config.command, args=config.args, env=env, cwd=config.cwd)
            inner = stdio_client(params, errlog=errlog)
        yield await stack.enter_async_context(inner)


def open_transport(
    config: StdioServerConfig | HttpServerConfig,
    *,
    closed: anyio.Event,
    base_env: Mapping[str, str],
    http_client: httpx2.AsyncClient | None = None,
    fork_server: ForkServer | None = None,
    stderr_tail: StderrTail | None = None,
    lane: ClientLane | None = None,
) -> Any:
    """``lane`` is attached when the child is forked (``orchestrator.mesh.lane``)."""
    if isinstance(config, StdioServerConfig):
        env = child_environment(config, base_env)
        return _watched(_stdio(config, env, fork_server, stderr_tail, lane), closed)
    return _watched(streamable_http_client(config.url, http_client=http_client), closed)


def http_client_for(config: HttpServerConfig) -> httpx2.AsyncClient:
    headers = {}
    if config.token is not None:
        headers["Authorization"] = f"Bearer {config.token.get_secret_value()}"
    # Reads must outlast a long-poll; connects should fail fast so backoff can take over.
    timeout = httpx2.Timeout(10.0, read=max(300.0, config.call_timeout_s + 30))
    transport = ConnectionKeepingTransport(Http1Transport())
    return httpx2.AsyncClient(headers=headers, timeout=timeout, follow_redirects=False, transport=transport)
