"""Serve an MCP server over stdio or Streamable HTTP until cancelled or signalled."""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio
from mcp.server import MCPServer
from mcp.server.stdio import stdio_server

from shared.hosting.capabilities import run_on_streams
from shared.hosting.errors import HostingError
from shared.hosting.http_app import ServerStatus, build_http_app, mcp_url
from shared.hosting.lane import LaneLines, LaneMethods, ServerLane, WholeLines
from shared.hosting.listener import ListenError, listen, serve_asgi
from shared.hosting.options import HttpOptions
from shared.hosting.stdio_pipes import claimed_pipes

logger = logging.getLogger("nexo.hosting")


async def serve_http(
    server: MCPServer[Any],
    options: HttpOptions,
    *,
    status: ServerStatus | None = None,
    on_ready: Callable[[str, int], Awaitable[None]] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve until cancelled. ``on_ready`` receives the bound host and port (useful with port 0).
    ``sock`` is a socket already listening (see :func:`listen`); without one it is bound here."""
    app = build_http_app(server, options, status)
    if sock is None:
        try:
            sock = listen(options.host, options.port)
        except ListenError as exc:
            raise HostingError(exc.advice("--http HOST:PORT")) from None
    async with serve_asgi(app, sock, lifespan="on") as (host, port):
        logger.info("serving %s over HTTP at %s", server.name, mcp_url(host, port))
        if on_ready is not None:
            await on_ready(host, port)
        await anyio.sleep_forever()


async def serve_stdio(server: MCPServer[Any]) -> None:
    """Serve on stdin/stdout. When the client is gone (a SIGKILLed orchestrator), the next answer
    meets a broken pipe: that ends the server with one line on stderr, not a traceback."""
    try:
        with claimed_pipes() as pipes:
            if pipes is None:
                await server.run_stdio_async()
            else:
                lines: Any = pipes[0]
                out: Any = pipes[1]
                async with anyio.create_task_group() as lane_tasks:
                    methods = getattr(server, "lane", None)
                    if isinstance(methods, LaneMethods) and methods.offered:
                        # Two writers from here on (the SDK and the lane): whole lines, in turns.
                        out = WholeLines(out.write)
                        lines = LaneLines(lines, ServerLane(methods, out, lane_tasks))
                    async with stdio_server(cast(Any, lines), cast(Any, out)) as (read_stream, write_stream):
                        await run_on_streams(server, read_stream, write_stream)
                    lane_tasks.cancel_scope.cancel()  # the client is gone: so is what it asked
    except* BrokenPipeError:
        # Python flushes stdout once more at exit; pointed at /dev/null that flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        print(
            f"{server.name}: the client that started this server is gone (its end of stdout closed); exiting",
            file=sys.stderr,
            flush=True,
        )


def run(
    server: MCPServer[Any],
    *,
    http: HttpOptions | None = None,
    status: ServerStatus | None = None,
    announce: Callable[[str], None] | None = None,
) -> None:
    """Blocking entry point for a server's ``__main__``: stdio unless ``http`` is given.

    Over HTTP the port is bound before anything else starts, so a port in use is one
    :class:`HostingError` naming it; ``announce`` receives the URL once the server listens.

    What the start made (modules, classes, the server and its tools: about 100,000 objects in the
    memory server) lives as long as the process, so it is frozen first: out of every later
    collection. A full collection walked all of it, 40 to 100 ms, in whichever call it landed.
    """
    gc.freeze()
    if http is None:
        anyio.run(serve_stdio, server)
        return
    http.check()
    try:
        sock = listen(http.host, http.port)
    except ListenError as exc:
        raise HostingError(exc.advice("--http HOST:PORT")) from None
    anyio.run(_serve_until_signalled, server, http, status, sock, announce)


async def _serve_until_signalled(
    server: MCPServer[Any],
    http: HttpOptions,
    status: ServerStatus | None,
    sock: socket.socket,
    announce: Callable[[str], None] | None,
) -> None:
    """SIGTERM or SIGINT ends the server gracefully (requests in flight finish), exit status 0."""

    async def ready(host: str, port: int) -> None:
        if announce is not None:
            announce(mcp_url(host, port))

    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        await serve_http(server, http, status=status, on_ready=ready, sock=sock)
