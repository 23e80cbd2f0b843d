"""A loopback server speaking raw HTTP/1.1 bytes: for tests of HTTP clients that must see exactly
what goes over the wire (framing, kept connections, a connection closed under the client)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class Server:
    def __init__(self) -> None:
        self.connections = 0
        self.port = 0


@asynccontextmanager
async def serving(handler: Handler, context: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(accept, "127.0.0.1", 0, ssl=context)
    server.port = listener.sockets[0].getsockname()[1]
    async with listener:
        yield server


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """One request: its request line, headers (lower-case names) and body (length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    line, *lines = head[:-4].split(b"\r\n")
    headers = {name.strip().lower(): value.strip() for name, _, value in (x.partition(b":") for x in lines)}
    body = b""
    if headers.get(b"transfer-encoding") == b"chunked":
        while size := int((await reader.readuntil(b"\r\n")).strip(), 16):
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readexactly(2)
    elif b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
    return line, headers, body
