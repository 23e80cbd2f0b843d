"""A loopback proxy that adds a bearer token to every request, for clients that cannot send one.

Every nexo HTTP server requires a bearer token, and the conformance suite's command line has no way
to give it one. The proxy stands where a client configured with the token would: it forwards each
request unchanged but for ``Authorization`` and streams the answer back (SSE included).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio.from_thread
import httpx2
from starlette.types import Receive, Scope, Send

from shared.hosting.listener import listen, serve_asgi

HOP_BY_HOP = {b"host", b"authorization", b"content-length", b"connection", b"transfer-encoding"}


class TokenProxy:
    """ASGI app forwarding to ``upstream`` (``http://host:port``) with ``Authorization: Bearer``."""

    def __init__(self, upstream: str, token: str, client: httpx2.AsyncClient) -> None:
        self.upstream = upstream
        self.token = token
        self.client = client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_BY_HOP]
        headers.append((b"authorization", f"Bearer {self.token}".encode()))
        query = scope["query_string"].decode()
        url = f"{self.upstream}{scope['path']}" + (f"?{query}" if query else "")
        request = self.client.build_request(scope["method"], url, headers=headers, content=bytes(body))
        response = await self.client.send(request, stream=True)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


@asynccontextmanager
async def _serving(upstream_url: str, token: str) -> AsyncIterator[str]:
    scheme, _, rest = upstream_url.partition("://")
    authority, _, path = rest.partition("/")
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=None)) as client:
        app = TokenProxy(f"{scheme}://{authority}", token, client)
        async with serve_asgi(app, listen("127.0.0.1", 0)) as (host, port):
            yield f"http://{host}:{port}/{path}"


@contextmanager
def token_proxy(upstream_url: str, token: str) -> Iterator[str]:
    """Serve a :class:`TokenProxy` for ``upstream_url`` on a free loopback port while the block runs
    (in a thread of its own); yields the same URL, path included, on the proxy."""
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(_serving(upstream_url, token)) as url,
    ):
        yield url
