"""The webhook listener: a Starlette app that verifies, limits and hands each delivery to a sink.

Per request, in order: route (404) and method (405); the body, read with its size cap (413) and
its deadline (408); the signature on the raw bytes (401) and the replay window (400); the source's
concurrency cap (503); the source's rate (429); the delivery id (400); then the sink, which answers
only once the event is durable (202 stored, 200 duplicate, 409 same id with another body, 503 inbox
full).

The concurrency cap and the rate count only verified deliveries, on purpose: a slow or unsigned
client cannot hold a real sender's slots or use up its budget. What it can hold is bounded by the
read deadline and the body cap (and the listener's header deadline, see ``serve``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qsl

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from channel_servers.webhook.sources import Source, find_first
from channel_servers.webhook.verify import Refused, body_digest
from shared.hosting.errors import HostingError
from shared.hosting.listener import ListenError, listen, serve_asgi

logger = logging.getLogger("nexo.webhook")

MAX_ID_CHARS = 256
MAX_KIND_CHARS = 128
FULL_RETRY_AFTER_S = 60
HEADER_TIMEOUT_S = 10.0

Outcome = Literal["stored", "duplicate", "conflict", "full"]
Clock = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Delivery:
    """A verified request, ready to become an event."""

    source: Source
    delivery_id: str
    event_kind: str | None
    body: bytes
    document: Any
    """The body parsed as JSON (or form fields), None when it is neither."""
    digest: str


Sink = Callable[[Delivery], Awaitable[Outcome]]


class TokenBucket:
    """``rate_per_minute`` tokens, refilled continuously; a full bucket allows a minute's burst."""

    def __init__(self, rate_per_minute: int, clock: Clock) -> None:
        self._capacity = float(rate_per_minute)
        self._per_second = rate_per_minute / 60
        self._tokens = self._capacity
        self._clock = clock
        self._last = clock()

    def take(self) -> float:
        """0 when a token was taken, else the seconds until one is available."""
        now = self._clock()
        self._tokens = min(self._capacity, self._tokens + max(0.0, now - self._last) * self._per_second)
        self._last = now
        if self._tokens >= 1:
            self._tokens -= 1
            return 0.0
        return (1 - self._tokens) / self._per_second


@dataclass(slots=True)
class _Gate:
    source: Source
    bucket: TokenBucket
    in_flight: int = 0


def parse_document(body: bytes, content_type: str) -> Any:
    """JSON, or form fields (a field holding JSON is expanded); None for anything else."""
    media = content_type.split(";")[0].strip().lower()
    if media == "application/x-www-form-urlencoded":
        try:
            pairs = parse_qsl(body.decode(), keep_blank_values=True, strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return None
        return {key: _maybe_json(value) for key, value in pairs}
    try:
        return json.loads(body)
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return None


def _maybe_json(value: str) -> Any:
    if value[:1] in ("{", "["):
        with contextlib.suppress(ValueError):
            return json.loads(value)
    return value


def _error(status: int, message: str, retry_after: float | None = None) -> JSONResponse:
    headers = {} if retry_after is None else {"Retry-After": str(max(1, math.ceil(retry_after)))}
    return JSONResponse({"error": message}, status_code=status, headers=headers)


async def _read_body(request: Request, cap: int, timeout_s: float) -> bytes:
    """The raw body within ``cap`` bytes and ``timeout_s`` seconds (a client that trickles is refused)."""
    with anyio.move_on_after(timeout_s):
        return await _read_capped(request, cap)
    raise Refused(408, f"body not received within {timeout_s:g} s")


async def _read_capped(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isascii() or not declared.isdigit():
            raise Refused(400, "malformed header Content-Length")
        if int(declared) > cap:
            raise Refused(413, f"body larger than {cap} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise Refused(413, f"body larger than {cap} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _is_slack_handshake(source: Source, document: Any) -> bool:
    return (
        source.config.scheme == "slack"
        and isinstance(document, dict)
        and document.get("type") == "url_verification"
    )


def _identify(
    source: Source, request: Request, document: Any, fallback: str | None
) -> tuple[str, str | None]:
    if source.config.delivery_id is not None:
        fallback = None  # the operator said where the id is: its absence is the sender's mistake
    delivery_id = find_first(source.delivery_locators, request.headers, document) or fallback
    if delivery_id is None:
        where = " or ".join(locator.spec for locator in source.delivery_locators) or "the request"
        raise Refused(400, f"missing delivery id (looked in {where})")
    if len(delivery_id) > MAX_ID_CHARS:
        raise Refused(400, f"delivery id longer than {MAX_ID_CHARS} characters")
    kind = find_first(source.kind_locators, request.headers, document)
    return delivery_id, None if kind is None else kind[:MAX_KIND_CHARS]


class Receiver:
    """Builds the ASGI app for ``sources``; ``clock`` (Unix seconds) drives replay windows and rates."""

    def __init__(self, sources: Sequence[Source], sink: Sink, *, clock: Clock = time.time) -> None:
        self._sink = sink
        self._clock = clock
        self._gates = [_Gate(source, TokenBucket(source.config.rate_per_minute, clock)) for source in sources]

    def app(self) -> Starlette:
        routes = [Route(gate.source.path, self._endpoint(gate), methods=["POST"]) for gate in self._gates]
        app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
        app.router.redirect_slashes = False  # a POST redirected would lose its body
        return app

    def _endpoint(self, gate: _Gate) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await self._receive(gate, request)
            except Refused as refused:
                return self._refuse(gate, refused)
            except ClientDisconnect:
                return Response(status_code=400)  # nobody is left to read it

        return endpoint

    def _refuse(self, gate: _Gate, refused: Refused, retry_after: float | None = None) -> Response:
        logger.info("webhook %s refused (%d): %s", gate.source.name, refused.status, refused.message)
        return _error(refused.status, refused.message, retry_after)

    async def _receive(self, gate: _Gate, request: Request) -> Response:
        source = gate.source
        body = await _read_body(request, source.config.max_body_bytes, source.config.read_timeout_s)
        verified = source.verifier.verify(request.headers, body, self._clock())
        # Only a verified delivery takes one of the source's slots.
        if gate.in_flight >= source.config.max_concurrency:
            return self._refuse(gate, Refused(503, "too many deliveries in progress"), retry_after=1)
        gate.in_flight += 1
        try:
            return await self._handle(gate, request, body, verified.fallback_id)
        finally:
            gate.in_flight -= 1

    async def _handle(self, gate: _Gate, request: Request, body: bytes, fallback_id: str | None) -> Response:
        source = gate.source
        wait = gate.bucket.take()
        if wait > 0:
            return self._refuse(gate, Refused(429, "rate limit exceeded"), retry_after=wait)
        document = parse_document(body, request.headers.get("content-type", ""))
        if _is_slack_handshake(source, document):
            # Slack's one-time check when the URL is registered: echo the challenge, store nothing.
            return JSONResponse({"challenge": str(document.get("challenge", ""))})
        delivery_id, kind = _identify(source, request, document, fallback_id)
        delivery = Delivery(source, delivery_id, kind, body, document, body_digest(body))
        outcome = await self._sink(delivery)
        if outcome == "stored":
            return JSONResponse({"duplicate": False, "delivery_id": delivery_id}, status_code=202)
        if outcome == "duplicate":
            return JSONResponse({"duplicate": True, "delivery_id": delivery_id})
        if outcome == "conflict":
            raise Refused(409, "delivery id already received with a different body")
        return self._refuse(
            gate, Refused(503, "the agent's inbox is full; retry later"), retry_after=FULL_RETRY_AFTER_S
        )


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=exc.headers)


class ListenerError(HostingError):
    """The webhook listener cannot bind; the message says how to fix it."""


def base_url(address: tuple[Any, ...]) -> str:
    """``http://host:port`` for a socket address (IPv6 hosts in brackets)."""
    host, port = address[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@asynccontextmanager
async def serve(
    app: ASGIApp, host: str, port: int, *, header_timeout_s: float = HEADER_TIMEOUT_S
) -> AsyncIterator[str]:
    """Serve ``app`` on ``host:port`` (0: any free port); yields the base URL. A connection whose
    request headers are not complete within ``header_timeout_s`` is closed.

    On exit the listener stops taking connections and lets requests in progress finish, so every
    accepted webhook is answered before the caller closes the store behind it.
    """
    try:
        sock = listen(host, port)
    except ListenError as exc:
        raise ListenerError(
            f"cannot listen for webhooks on {host}:{port}: {exc.reason}; "
            "free the port or choose another with NEXO_WEBHOOK_PORT (and NEXO_WEBHOOK_HOST)"
        ) from None
    async with serve_asgi(app, sock, server_header=False, header_timeout_s=header_timeout_s) as address:
        url = base_url(address)
        logger.info("listening for webhooks at %s", url)
        yield url
