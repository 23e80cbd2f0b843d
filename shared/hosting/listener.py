"""Bind a port and serve any ASGI app on it: MCP over HTTP, a channel's web side, webhooks, metrics."""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Literal

import anyio
from starlette.types import ASGIApp


class ListenError(OSError):
    """A listener cannot bind; ``reason`` is the system's word for why (e.g. address in use)."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        self.host, self.port = host, port
        self.reason = cause.strerror or str(cause)
        super().__init__(cause.errno, f"cannot listen on {host}:{port} ({self.reason}); is the port in use?")

    def advice(self, setting: str) -> str:
        """One line naming the port, why it cannot be used, and what to do about it."""
        if self.errno == errno.EADDRINUSE:
            fix = (
                f"another process already listens there (see it with `ss -ltnp 'sport = :{self.port}'`); "
                f"stop it, or choose another port with {setting}"
            )
        elif self.errno == errno.EACCES:
            fix = f"ports below 1024 need privileges; choose a port above 1024 with {setting}"
        else:
            fix = f"choose another address with {setting}"
        return f"cannot listen on {self.host}:{self.port}: {self.reason}; {fix}"


def listen(host: str, port: int) -> socket.socket:
    """Bind and listen now: a port in use is an OSError naming it, and port 0 tells the real port.

    Listening before the server runs also means a client arriving early waits instead of failing.
    The protocol is named (``IPPROTO_TCP``, not 0) because accepted sockets inherit it and asyncio
    switches Nagle's algorithm off (``TCP_NODELAY``) only on sockets that say TCP: without it every
    response written as headers then body waits ~40 ms for the client's delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ListenError(host, port, exc) from exc
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def serve_asgi(
    app: ASGIApp,
    sock: socket.socket,
    *,
    lifespan: Literal["on", "off"] = "off",
    server_header: bool = True,
    header_timeout_s: float | None = None,
) -> AsyncIterator[tuple[str, int]]:
    """Serve ``app`` on a listening ``sock`` (see :func:`listen`) while the block runs; yields the
    bound host and port. On exit, or when cancelled, new connections are refused and requests in
    flight get up to 5 s to finish. Signals stay with the hosting process (uvicorn's own capture is
    switched off), so one process can embed several servers and still drain on SIGTERM itself.

    The one place every HTTP listener of nexo goes through: MCP over HTTP, a channel's web side,
    webhooks, metrics. ``header_timeout_s`` closes connections whose headers trickle in (see
    :mod:`shared.http_deadline`).
    """
    import uvicorn

    from shared.http_deadline import header_deadline_protocol

    class Embedded(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        server_header=server_header,
        lifespan=lifespan,
        timeout_graceful_shutdown=5,
        http="auto" if header_timeout_s is None else header_deadline_protocol(header_timeout_s),
    )
    server = Embedded(config)
    finished = anyio.Event()

    async def run() -> None:
        # Shielded so a cancel from outside becomes a graceful shutdown that closes every connection.
        with anyio.CancelScope(shield=True):
            try:
                await server.serve(sockets=[sock])
            finally:
                sock.close()
                finished.set()

    host, port = sock.getsockname()[:2]
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        try:
            yield str(host), int(port)
        finally:
            server.should_exit = True
            with anyio.CancelScope(shield=True), anyio.move_on_after(10):
                await finished.wait()
