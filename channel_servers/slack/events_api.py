"""The Events API: Slack POSTs each event to a public URL, signed with the app's signing secret.

Every request is checked before anything parses it: ``X-Slack-Signature`` is ``v0=`` and the
HMAC-SHA256 of ``v0:{X-Slack-Request-Timestamp}:{raw body}`` under the signing secret, compared in
constant time, and the timestamp must be within 5 minutes of now (a captured request cannot be
replayed later). Then the URL verification challenge is answered, or the event handed over and
``200`` sent only once it is stored. Slack retries an event it got no ``200`` for (with
``X-Slack-Retry-Num``) under the same ``event_id``; the message's dedupe key stores it once.
Button presses (``block_actions``) arrive at the interactivity URL as a form field ``payload``,
signed the same way and checked the same way.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

logger = logging.getLogger("nexo.slack")

WINDOW_S = 300
EVENTS_PATH = "/slack/events"
INTERACTIVITY_PATH = "/slack/interactivity"
Handler = Callable[[str, dict[str, Any]], Awaitable[bool]]
"""``("events_api", payload)``; ``False`` when it could not be stored (Slack retries after a 503)."""
Clock = Callable[[], float]


def signature(secret: bytes, timestamp: str, body: bytes) -> str:
    """The ``X-Slack-Signature`` value Slack sends for ``body`` at ``timestamp``."""
    return "v0=" + hmac.new(secret, b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256).hexdigest()


def verified(secret: bytes, headers: dict[str, str], body: bytes, now: float) -> bool:
    """Signed by Slack, within the replay window. Every request is hashed (no early exit on shape)."""
    stamp = headers.get("x-slack-request-timestamp", "")
    presented = headers.get("x-slack-signature", "")
    expected = signature(secret, stamp, body)
    same = hmac.compare_digest(presented.encode(), expected.encode())
    return same and stamp.isascii() and stamp.isdigit() and abs(now - int(stamp)) <= WINDOW_S


def events_app(secret: bytes, handle: Handler, clock: Clock = time.time) -> Starlette:
    async def events(request: Request) -> Response:
        body = await request.body()
        headers = {key.lower(): value for key, value in request.headers.items()}
        if not verified(secret, headers, body, clock()):
            return PlainTextResponse("invalid signature", status_code=401)
        try:
            payload = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return PlainTextResponse("not JSON", status_code=400)
        if not isinstance(payload, dict):
            return PlainTextResponse("not an Events API payload", status_code=400)
        kind = payload.get("type")
        if kind == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                return PlainTextResponse("url_verification without a challenge", status_code=400)
            return JSONResponse({"challenge": challenge})
        if kind != "event_callback" or not isinstance(payload.get("event"), dict):
            return PlainTextResponse("not an Events API payload", status_code=400)
        if request.headers.get("x-slack-retry-num"):
            logger.debug(
                "slack: event %s delivered again (retry %s, %s)",
                payload.get("event_id"),
                request.headers.get("x-slack-retry-num"),
                request.headers.get("x-slack-retry-reason", "-"),
            )
        if not await handle("events_api", payload):
            return PlainTextResponse("busy, retry later", status_code=503)
        return Response(status_code=200)

    async def interactivity(request: Request) -> Response:
        body = await request.body()
        headers = {key.lower(): value for key, value in request.headers.items()}
        if not verified(secret, headers, body, clock()):
            return PlainTextResponse("invalid signature", status_code=401)
        try:
            form = parse_qs(body.decode(), strict_parsing=True)
            payload = json.loads(form["payload"][0])
        except (ValueError, UnicodeDecodeError, KeyError):
            return PlainTextResponse("not an interactivity payload", status_code=400)
        if not isinstance(payload, dict):
            return PlainTextResponse("not an interactivity payload", status_code=400)
        if not await handle("interactive", payload):
            return PlainTextResponse("busy, retry later", status_code=503)
        return Response(status_code=200)

    return Starlette(
        routes=[
            Route(EVENTS_PATH, events, methods=["POST"]),
            Route(INTERACTIVITY_PATH, interactivity, methods=["POST"]),
        ]
    )
