"""What goes over the wire in HTTP/1.1, for :mod:`shared.http1`: a request's head and body, how a
response's body ends and whether its connection is kept; and whether the environment sends a URL
through a proxy (then the client is left to httpx2's own transports)."""

from __future__ import annotations

import urllib.parse
import urllib.request

import httpx2

_NO_BODY_STATUS = frozenset({204, 304})


def proxied(url: str) -> bool:
    """Whether the environment sends ``url`` through a proxy (``HTTPS_PROXY``, ``HTTP_PROXY``,
    ``ALL_PROXY``, less ``NO_PROXY``): such a client is left to httpx2's own transports, which an
    httpx2 client given a transport of its own would not build."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    # In CPython since 3.x, not in its type stubs: NO_PROXY as urllib reads it.
    return not urllib.request.proxy_bypass_environment(parts.hostname or "", proxies)  # type: ignore[attr-defined]


def request_head(request: httpx2.Request) -> bytes:
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), request.url.raw_path)]
    lines.extend(b"%s: %s" % (name, value) for name, value in request.headers.raw)
    lines.append(b"\r\n")
    return b"\r\n".join(lines)


async def request_body(request: httpx2.Request) -> bytes:
    """The request's body as bytes, chunk-framed when its headers say so."""
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    parts: list[bytes] = []
    async for part in request.stream:  # type: ignore[union-attr]
        if not part:
            continue
        parts.append(b"%x\r\n%s\r\n" % (len(part), part) if chunked else part)
    if chunked:
        parts.append(b"0\r\n\r\n")
    return b"".join(parts)


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key.lower() == name:
            return value
    return None


def framing(method: str, status: int, headers: list[tuple[bytes, bytes]]) -> tuple[str, int]:
    """How the body ends (RFC 9112, 6.3): none, a length, chunked, or the connection's close."""
    if method == "HEAD" or status in _NO_BODY_STATUS or status < 200:
        return "none", 0
    encoding = _header(headers, b"transfer-encoding")
    if encoding is not None and encoding.lower().rsplit(b",", 1)[-1].strip() == b"chunked":
        return "chunked", 0
    length = _header(headers, b"content-length")
    if length is not None:
        if not length.strip().isdigit():
            return "close", 0
        return "length", int(length)
    return "close", 0


def keeps_alive(version: bytes, request: httpx2.Request, headers: list[tuple[bytes, bytes]]) -> bool:
    if request.headers.get("connection", "").lower() == "close":
        return False
    connection = (_header(headers, b"connection") or b"").lower()
    if version == b"HTTP/1.0":
        return connection == b"keep-alive"
    return connection != b"close"
