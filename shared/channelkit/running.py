"""Running a channel: its ``main()``, and the web server of a receive side that takes webhooks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from mcp.server import MCPServer
from starlette.types import ASGIApp

from shared.hosting import listener
from shared.hosting.errors import HostingError
from shared.hosting.main import server_main


async def serve_asgi(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    on_ready: Callable[[str, int], Awaitable[None]] | None = None,
    setting: str = "the channel's port setting",
) -> None:
    """Serve a receive side's web app (webhooks, a page) until cancelled, then shut down gracefully.

    The socket is bound first, so a port in use fails at once, as one :class:`HostingError` that
    names the port and ``setting`` (the variable that moves it), and ``on_ready`` gets the real port.
    """
    try:
        sock = listener.listen(host, port)
    except listener.ListenError as exc:
        raise HostingError(exc.advice(setting)) from None
    async with listener.serve_asgi(app, sock) as (bound_host, bound_port):
        if on_ready is not None:
            await on_ready(bound_host, bound_port)
        await anyio.sleep_forever()


def channel_main(module: str, build: Callable[[], MCPServer[Any]]) -> int:
    """The whole ``main()`` of a channel: ``python -m MODULE [--http HOST:PORT]``."""
    return server_main(module, build)
