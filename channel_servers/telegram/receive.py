"""The two ways updates arrive: long polling (the default) and a webhook.

Either way an update is stored before Telegram is told it arrived: polling moves ``offset`` past an
update only after it is stored (Telegram keeps unconfirmed updates and sends them again), and the
webhook answers 200 only after storing. A repeat is stored once (the dedupe key).
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from channel_servers.telegram.api import ApiError, BotApi, NetworkError
from channel_servers.telegram.settings import TelegramSettings
from shared.channelkit import EventLogFull, serve_asgi

logger = logging.getLogger("nexo.telegram")

ALLOWED_UPDATES = ["message", "edited_message", "callback_query"]
WEBHOOK_PATH = "/telegram"
MAX_BODY = 1024 * 1024
SECRET_HEADER = "x-telegram-bot-api-secret-token"  # noqa: S105 -- a header name
_PAUSES_S = (1.0, 2.0, 5.0, 10.0, 30.0)

Handle = Callable[[dict[str, Any]], Awaitable[None]]
"""Store one update (raises EventLogFull when the inbox is full)."""


async def poll(api: BotApi, settings: TelegramSettings, handle: Handle, on_ready: Callable[[], None]) -> None:
    """Long-poll for updates until cancelled; the offset moves past an update only once it is stored."""
    await api.call("deleteWebhook", {"drop_pending_updates": False})
    on_ready()
    offset = 0
    failures = 0
    while True:
        try:
            updates = await api.call(
                "getUpdates",
                {"offset": offset, "timeout": settings.poll_timeout_s, "allowed_updates": ALLOWED_UPDATES},
                timeout=settings.poll_timeout_s + 10,
            )
            for update in updates:
                await handle(update)
                offset = max(offset, int(update["update_id"]) + 1)
            failures = 0
        except (ApiError, NetworkError, EventLogFull) as exc:
            # Nothing is confirmed: what was not stored comes again after the pause.
            pause = _PAUSES_S[min(failures, len(_PAUSES_S) - 1)]
            failures += 1
            if isinstance(exc, ApiError) and exc.code == 409:
                logger.warning(
                    "telegram: %s; another program polls this bot (or a webhook is set): only one may", exc
                )
            else:
                logger.warning("telegram: polling paused %.0f s: %s", pause, exc)
            await api.sleep(pause)


def webhook_app(secret: str, handle: Handle) -> Starlette:
    """The endpoint Telegram posts to: the secret header checked in constant time, 200 once stored."""
    expected = secret.encode()

    async def receive_update(request: Request) -> Response:
        presented = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(presented, expected):
            return Response(status_code=401)
        body = await request.body()
        if len(body) > MAX_BODY:
            return Response(status_code=413)
        try:
            update = json.loads(body)
        except ValueError:
            return Response("the body is not JSON", status_code=400)
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            return Response("not a Telegram update (no update_id)", status_code=400)
        try:
            await handle(update)
        except EventLogFull:
            return Response(status_code=503)  # Telegram retries later
        return Response(status_code=200)

    return Starlette(routes=[Route(WEBHOOK_PATH, receive_update, methods=["POST"])])


async def serve_webhook(
    api: BotApi, settings: TelegramSettings, app: Starlette, on_ready: Callable[[], None]
) -> None:
    """Listen, then ask Telegram (``setWebhook`` with the secret) to post updates here."""
    assert settings.webhook_url is not None
    assert settings.webhook_secret is not None
    secret = settings.webhook_secret.get_secret_value()

    async def listening(host: str, port: int) -> None:
        await api.call(
            "setWebhook",
            {"url": settings.webhook_url, "secret_token": secret, "allowed_updates": ALLOWED_UPDATES},
        )
        logger.info("telegram: webhook listening on %s:%d", host, port)
        on_ready()

    await serve_asgi(
        app,
        settings.webhook_host,
        settings.webhook_port,
        on_ready=listening,
        setting="NEXO_TELEGRAM_WEBHOOK_PORT",
    )
