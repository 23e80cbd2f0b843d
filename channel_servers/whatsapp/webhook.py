"""The webhook Meta calls: the GET verification handshake and signed POSTs of messages and statuses.

The signature (``X-Hub-Signature-256: sha256=<hex>``, HMAC-SHA256 of the raw body with the app
secret) is checked in constant time on the raw bytes before anything parses them. A POST is answered
200 only once every message in it is stored, so a crash before that makes Meta deliver it again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from starlette.applications import Starlette
from starlette.background import BackgroundTasks
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from channel_servers.whatsapp.payload import Change, Malformed, parse
from shared.events import EventLogFull

logger = logging.getLogger("nexo.whatsapp")

PATH: Final = "/webhook"
SIGNATURE_HEADER: Final = "x-hub-signature-256"
MAX_BODY_BYTES: Final = 3 * 1024 * 1024

Handle = Callable[[list[Change], BackgroundTasks], Awaitable[None]]
"""Store what the changes hold; raise EventLogFull when the inbox is full."""


def signature_matches(body: bytes, presented: str, app_secret: bytes) -> bool:
    expected = "sha256=" + hmac.new(app_secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(presented.strip().lower().encode(), expected.encode())


class Webhook:
    def __init__(self, *, app_secret: bytes, verify_token: bytes, phone_number_id: str, handle: Handle):
        self._app_secret = app_secret
        self._verify_token = verify_token
        self._phone_number_id = phone_number_id
        self._handle = handle

    async def handshake(self, request: Request) -> Response:
        params = request.query_params
        token = params.get("hub.verify_token", "").encode()
        challenge = params.get("hub.challenge", "")
        if params.get("hub.mode") != "subscribe" or not challenge:
            return PlainTextResponse("expected hub.mode=subscribe and a hub.challenge", status_code=400)
        if not hmac.compare_digest(token, self._verify_token):
            logger.warning("webhook handshake with a wrong verify token refused")
            return PlainTextResponse("verify token mismatch", status_code=403)
        logger.info("webhook verified by Meta")
        return PlainTextResponse(challenge)

    async def notify(self, request: Request) -> Response:
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return PlainTextResponse("payload too large", status_code=413)
        presented = request.headers.get(SIGNATURE_HEADER)
        if presented is None:
            return PlainTextResponse(f"missing header {SIGNATURE_HEADER}", status_code=401)
        if not signature_matches(body, presented, self._app_secret):
            return PlainTextResponse("signature mismatch", status_code=401)
        try:
            changes = parse(json.loads(body), self._phone_number_id)
        except (ValueError, Malformed) as exc:
            logger.warning("a signed webhook is not the documented payload: %s", exc)
            return PlainTextResponse(f"malformed payload: {exc}", status_code=400)
        tasks = BackgroundTasks()
        try:
            await self._handle(changes, tasks)
        except EventLogFull as exc:
            logger.warning("webhook answered 503 so Meta retries: %s", exc)
            return PlainTextResponse("inbox full, retry later", status_code=503)
        return Response(status_code=200, background=tasks)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route(PATH, self.handshake, methods=["GET"]),
                Route(PATH, self.notify, methods=["POST"]),
            ]
        )
