"""The WhatsApp channel server, built on the channel kit.

Receive: Meta's webhook (``/webhook`` on ``host:port``, reached through the operator's tunnel or
reverse proxy). Each message is stored under its ``wamid`` before the 200; statuses update the
outbox. Send: the Cloud API's messages endpoint (see :mod:`channel_servers.whatsapp.outbound`).
Approvals: reply buttons to the ``approval_numbers``, answered by a press or ``yes <id>``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.server import MCPServer
from starlette.applications import Starlette

from channel_servers.whatsapp.api import ApiError, ApiUnreachable, CloudApi, Sleep, open_api
from channel_servers.whatsapp.approvals import Approvals
from channel_servers.whatsapp.inbound import Intake
from channel_servers.whatsapp.outbound import Sender
from channel_servers.whatsapp.settings import NAME, WhatsAppSettings, load_settings
from channel_servers.whatsapp.store import open_store
from channel_servers.whatsapp.webhook import PATH, Webhook
from shared.channelkit import (
    Channel,
    PromptClosed,
    Unreachable,
    channel_main,
    define_channel,
    serve_asgi,
)
from shared.hosting.errors import HostingError
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.whatsapp")

MEDIA_LIMIT = 16 * 1024 * 1024
"""The largest audio or video WhatsApp takes (images: 5 MB, documents: 100 MB)."""
TYPING_INTERVAL_S = 20.0
"""WhatsApp shows "typing..." for up to 25 s: renewed before it fades, until the reply goes out."""


class TokenRefused(HostingError):
    """The access token does not work: the server does not start (``nexo channel doctor`` shows why)."""


class WhatsApp:
    """The platform side: the webhook, the API client and the channel's own store."""

    def __init__(
        self,
        settings: WhatsAppSettings,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Sleep = anyio.sleep,
    ) -> None:
        self.settings = settings
        self.url = ""
        self.app: Starlette | None = None
        """The webhook's ASGI app once the channel runs (tests drive it in process)."""
        self._transport = transport
        self._clock = clock
        self._sleep = sleep
        self._sender: Sender | None = None
        self._intake: Intake | None = None
        self._approvals: Approvals | None = None

    async def receive(self, channel: Channel) -> None:
        settings = self.settings
        async with AsyncExitStack() as stack:
            api = await stack.enter_async_context(
                open_api(settings, transport=self._transport, sleep=self._sleep)
            )
            await self._check_token(api)
            store = await stack.enter_async_context(
                open_store(settings.channel_dir(NAME) / "platform.db", self._clock)
            )
            self._sender = Sender(api, store, settings, self._clock)
            self._approvals = Approvals(api, self._sender, settings)
            intake = self._intake = Intake(channel, api, store, settings)
            webhook = Webhook(
                app_secret=settings.app_secret.get_secret_value().encode(),
                verify_token=settings.verify_token.get_secret_value().encode(),
                phone_number_id=settings.phone_number_id,
                handle=intake.handle,
            )

            async def listening(host: str, port: int) -> None:
                self.url = f"http://{f'[{host}]' if ':' in host else host}:{port}{PATH}"
                logger.info("WhatsApp webhook listening at %s (expose it over HTTPS for Meta)", self.url)
                channel.ready()

            self.app = webhook.app()
            await serve_asgi(
                self.app, settings.host, settings.port, on_ready=listening, setting="NEXO_WHATSAPP_PORT"
            )

    async def _check_token(self, api: CloudApi) -> None:
        try:
            number = await api.check_token()
        except ApiError as exc:
            raise TokenRefused(
                f"WhatsApp refused the access token or phone number id ({exc}): set a valid "
                "NEXO_WHATSAPP_ACCESS_TOKEN and NEXO_WHATSAPP_PHONE_NUMBER_ID, then run "
                "`nexo channel doctor`"
            ) from None
        except ApiUnreachable as exc:
            logger.warning("could not check the WhatsApp token at start (%s); sends will retry", exc)
            return
        logger.info("WhatsApp number %s ready", number or self.settings.phone_number_id)

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        if self._sender is None:
            raise Unreachable("the WhatsApp channel is still starting")
        return await self._sender.send(chat_id, text, reply_to)

    async def send_file(
        self, chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        if self._sender is None:
            raise Unreachable("the WhatsApp channel is still starting")
        return await self._sender.send_file(chat_id, path, caption, reply_to, mime)

    async def show_typing(self, chat_id: str) -> None:
        if self._intake is not None:
            await self._intake.show_typing(chat_id)

    async def prompt(self, params: PermissionRequestParams) -> int:
        if self._approvals is None:
            return 0
        return await self._approvals.prompts.show(params)

    async def closed(self, closed: PromptClosed) -> None:
        if self._approvals is not None:
            await self._approvals.prompts.closed(closed)


def build_server(
    settings: WhatsAppSettings,
    whatsapp: WhatsApp | None = None,
    *,
    clock: Callable[[], float] = time.time,
) -> MCPServer[Any]:
    whatsapp = whatsapp or WhatsApp(settings, clock=clock)
    return define_channel(
        NAME,
        settings=settings,
        receive=whatsapp.receive,
        send=whatsapp.send,
        prompt=whatsapp.prompt,
        closed=whatsapp.closed,
        send_file=whatsapp.send_file,
        max_file_bytes=MEDIA_LIMIT,
        typing=whatsapp.show_typing,
        typing_interval_s=TYPING_INTERVAL_S,
        wait_until_ready=True,
        clock=clock,
        instructions=(
            f'WhatsApp messages arrive as <channel source="{NAME}" chat_id="..." user_id="..." ...>; '
            "chat_id is the contact's WhatsApp id. Reply with the send_message tool, passing that chat_id. "
            "Markdown is converted to WhatsApp's formatting; long replies are split."
        ),
    )


def main() -> int:
    return channel_main(f"channel_servers.{NAME}", lambda: build_server(load_settings()))
