"""Keep the HTTP connection of a tool call for the next one, in the handshake protocol era too.

In the 2025-11-25 era a server answers a request as an event stream that ends right after the
answer. The SDK's client closes that stream as soon as it has the answer, before reading the few
bytes that end it, and an HTTP/1.1 connection closed mid-response cannot be reused: every call paid
for a new connection. This transport reads what is left of such a stream (bounded by
:data:`DRAIN_S`) before it lets go, so the connection goes back to the pool; a stream that does not
end that soon is closed as before.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx2

DRAIN_S = 0.05
"""How long to wait for the end of an answered event stream before giving up its connection."""
EVENT_STREAM = "text/event-stream"


class _DrainOnClose(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        try:
            if not self._ended:
                with anyio.move_on_after(DRAIN_S):
                    async for _ in self._inner:
                        pass
        except httpx2.HTTPError:
            pass  # the connection is broken anyway; closing it below is all there is to do
        finally:
            await self._inner.aclose()


class ConnectionKeepingTransport(httpx2.AsyncBaseTransport):
    """``inner`` (a pooled transport), with answered event streams drained before they close."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        content_type = response.headers.get("content-type", "")
        if request.method == "POST" and content_type.startswith(EVENT_STREAM):
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _DrainOnClose(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
