"""A lean HTTP/1.1 transport for httpx2 clients on asyncio: keep-alive connections, TLS, and response
bodies streamed as they arrive (a fixed length, chunked, or to the connection's end).

httpx2's own transport goes through httpcore2's pool and the h11 state machine: on a small machine
that is about a millisecond of CPU per request on each side of a turn's model call and of every tool
call over Streamable HTTP. This one speaks the same wire with asyncio's streams and a parser of the
status line and headers, behind the same interface (``httpx2.AsyncBaseTransport``), so the client
above it (its timeouts, headers, errors and response objects) does not change. What it leaves to
httpx2: proxies (:func:`shared.http1_wire.proxied` tells a caller to build its client without
this transport when the environment names one), HTTP/2 and Unix sockets.

Errors are httpx2's: a connect that fails is ``ConnectError`` (``ConnectTimeout`` past its timeout),
a response that does not come in time ``ReadTimeout``, a malformed or cut response
``RemoteProtocolError``. A request sent on a kept connection that the server had closed meanwhile
(the race every keep-alive client meets) is sent once more on a new connection, as long as no byte
of a response had come back.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

import httpx2

from shared.http1_wire import framing, keeps_alive, request_body, request_head
from shared.tls import default_context

KEEPALIVE_S = 5.0
"""How long an idle connection is kept (uvicorn closes its own side after 5 s idle)."""
MAX_IDLE_PER_ORIGIN = 8
MAX_HEAD_BYTES = 256 * 1024
"""A status line and headers longer than this are refused as malformed."""
_READ_SIZE = 256 * 1024


@dataclass(eq=False)
class _Connection:
    origin: tuple[bytes, str, int]
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0
    reused: bool = False

    def usable(self, now: float) -> bool:
        return (
            now - self.idle_since < KEEPALIVE_S
            and not self.reader.at_eof()
            and not self.writer.is_closing()
            and self.reader.exception() is None
        )

    def close(self) -> None:
        self.writer.close()


class _ClosingProtocol(asyncio.StreamReaderProtocol):
    """asyncio's stream protocol, except that a server's end of the connection closes ours too: an
    idle kept connection the server let go is not left half open (and unclosed) in the pool."""

    def eof_received(self) -> bool:
        super().eof_received()
        return False


class _Fresh(Exception):
    """A kept connection ended before any byte of its response: send again on a new one."""


class Http1Transport(httpx2.AsyncBaseTransport):
    """HTTP/1.1 over asyncio streams, with a pool of idle connections per origin."""

    def __init__(
        self, *, ssl_context: ssl.SSLContext | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ssl_context = ssl_context
        self._clock = clock
        self._idle: dict[tuple[bytes, str, int], list[_Connection]] = {}
        self._closed = False

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._closed:
            raise RuntimeError("the HTTP transport is closed")
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx2.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}", request=request)
        origin = (url.raw_scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        timeouts = request.extensions.get("timeout", {})
        head = request_head(request)
        body = await request_body(request)
        connection = self._take(origin)
        if connection is not None:
            try:
                return await self._exchange(connection, request, head, body, timeouts)
            except _Fresh:
                pass
        connection = await self._connect(origin, request, timeouts)
        try:
            return await self._exchange(connection, request, head, body, timeouts)
        except _Fresh:
            raise httpx2.RemoteProtocolError(
                "the server closed the connection without sending a response", request=request
            ) from None

    def _take(self, origin: tuple[bytes, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        now = self._clock()
        while idle:
            connection = idle.pop()
            if connection.usable(now):
                connection.reused = True
                return connection
            connection.close()
        return None

    def _release(self, connection: _Connection) -> None:
        idle = self._idle.setdefault(connection.origin, [])
        if self._closed or len(idle) >= MAX_IDLE_PER_ORIGIN:
            connection.close()
            return
        connection.idle_since = self._clock()
        idle.append(connection)

    async def _connect(
        self, origin: tuple[bytes, str, int], request: httpx2.Request, timeouts: dict[str, float | None]
    ) -> _Connection:
        scheme, host, port = origin
        context = None
        if scheme == b"https":
            if self._ssl_context is None:
                self._ssl_context = default_context()
            context = self._ssl_context
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_HEAD_BYTES, loop=loop)
        protocol = _ClosingProtocol(reader, loop=loop)
        try:
            async with asyncio.timeout(timeouts.get("connect")):
                transport, _ = await loop.create_connection(
                    lambda: protocol, host, port, ssl=context, server_hostname=host if context else None
                )
        except TimeoutError:
            raise httpx2.ConnectTimeout(f"connecting to {host}:{port} timed out", request=request) from None
        except (OSError, ssl.SSLError) as exc:
            raise httpx2.ConnectError(f"cannot connect to {host}:{port}: {exc}", request=request) from exc
        return _Connection(origin, reader, asyncio.StreamWriter(transport, protocol, reader, loop))

    async def _exchange(
        self,
        connection: _Connection,
        request: httpx2.Request,
        head: bytes,
        body: bytes,
        timeouts: dict[str, float | None],
    ) -> httpx2.Response:
        writer = connection.writer
        try:
            writer.write(head + body if len(body) < 65536 else head)
            if len(body) >= 65536:
                writer.write(body)
            try:
                async with asyncio.timeout(timeouts.get("write")):
                    await writer.drain()
            except TimeoutError as exc:
                raise httpx2.WriteTimeout("the request could not be sent in time", request=request) from exc
            async with asyncio.timeout(timeouts.get("read")):
                status, reason, version, headers = await _response_head(connection, request)
        except TimeoutError as exc:
            connection.close()
            raise httpx2.ReadTimeout("the server did not answer in time", request=request) from exc
        except (_Fresh, httpx2.TransportError):
            connection.close()
            raise
        except OSError as exc:
            connection.close()
            if connection.reused:
                raise _Fresh from exc
            raise httpx2.ReadError(f"the connection failed: {exc}", request=request) from exc
        except BaseException:
            connection.close()
            raise
        keep = keeps_alive(version, request, headers)
        stream = _Body(self, connection, request, headers, status, keep, timeouts.get("read"))
        return httpx2.Response(
            status,
            headers=headers,
            stream=stream,
            extensions={"http_version": version, "reason_phrase": reason},
        )

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()


class _Body(httpx2.AsyncByteStream):
    """A response's body as it arrives; the connection goes back to the pool once it is all read."""

    def __init__(
        self,
        transport: Http1Transport,
        connection: _Connection,
        request: httpx2.Request,
        headers: list[tuple[bytes, bytes]],
        status: int,
        keep: bool,
        read_timeout: float | None,
    ) -> None:
        self._transport = transport
        self._connection: _Connection | None = connection
        self._request = request
        self._keep = keep
        self._timeout = read_timeout
        self._framing = framing(request.method, status, headers)
        self._reading: AsyncIterator[bytes] | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        # One reading of the body, however many times it is iterated: a reader that stops early
        # and iterates again (a drain before close) goes on where it stopped.
        if self._reading is None:
            self._reading = self._body()
        async for chunk in self._reading:
            yield chunk

    async def _body(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            return
        kind, length = self._framing
        try:
            if kind == "length":
                while length > 0:
                    chunk = await self._read(connection.reader.read(min(length, _READ_SIZE)))
                    if not chunk:
                        raise self._cut()
                    length -= len(chunk)
                    yield chunk
            elif kind == "chunked":
                async for chunk in self._chunks(connection.reader):
                    yield chunk
            elif kind == "close":
                self._keep = False
                while chunk := await self._read(connection.reader.read(_READ_SIZE)):
                    yield chunk
        except BaseException:
            self._drop()
            raise
        if self._connection is not None:
            self._connection = None
            if self._keep:
                self._transport._release(connection)
            else:
                connection.close()

    async def _chunks(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        while True:
            line = await self._read(reader.readuntil(b"\r\n"))
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise httpx2.RemoteProtocolError(
                    f"malformed chunk size {line[:40]!r}", request=self._request
                ) from None
            if size == 0:
                while (await self._read(reader.readuntil(b"\r\n"))) != b"\r\n":
                    pass  # trailers: not used
                return
            while size > 0:
                chunk = await self._read(reader.read(min(size, _READ_SIZE)))
                if not chunk:
                    raise self._cut()
                size -= len(chunk)
                yield chunk
            if await self._read(reader.readexactly(2)) != b"\r\n":
                raise httpx2.RemoteProtocolError("a chunk did not end with CRLF", request=self._request)

    async def _read(self, reading: Awaitable[bytes]) -> bytes:
        try:
            async with asyncio.timeout(self._timeout):
                return await reading
        except TimeoutError:
            raise httpx2.ReadTimeout(
                "the server stopped sending the response", request=self._request
            ) from None
        except asyncio.IncompleteReadError:
            raise self._cut() from None
        except asyncio.LimitOverrunError:
            raise httpx2.RemoteProtocolError("a chunk size line is too long", request=self._request) from None
        except OSError as exc:
            raise httpx2.ReadError(f"the connection failed: {exc}", request=self._request) from exc

    def _cut(self) -> httpx2.RemoteProtocolError:
        return httpx2.RemoteProtocolError(
            "the server closed the connection mid-response", request=self._request
        )

    async def aclose(self) -> None:
        self._drop()

    def _drop(self) -> None:
        """Closed before its end: the connection cannot be reused."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()


async def _response_head(
    connection: _Connection, request: httpx2.Request
) -> tuple[int, bytes, bytes, list[tuple[bytes, bytes]]]:
    """The status line and headers of the next final response (informational ones skipped)."""
    while True:
        try:
            raw = await connection.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if not exc.partial and connection.reused:
                raise _Fresh from None
            raise httpx2.RemoteProtocolError(
                "the server closed the connection without sending a response", request=request
            ) from None
        except asyncio.LimitOverrunError:
            raise httpx2.RemoteProtocolError(
                f"the response's headers exceed {MAX_HEAD_BYTES} bytes", request=request
            ) from None
        status_line, *lines = raw[:-4].split(b"\r\n")
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise httpx2.RemoteProtocolError(f"malformed status line {status_line[:80]!r}", request=request)
        status = int(parts[1])
        headers: list[tuple[bytes, bytes]] = []
        for line in lines:
            name, sep, value = line.partition(b":")
            if not sep or not name or name != name.strip():
                raise httpx2.RemoteProtocolError(f"malformed header line {line[:80]!r}", request=request)
            headers.append((name, value.strip()))
        if 100 <= status < 200 and status != 101:
            continue
        reason = parts[2] if len(parts) > 2 else b""
        return status, reason, parts[0], headers
