"""The Telegram channel: a bot over the Bot API, built on the channel kit.

``receive`` checks the token (``getMe``), then long-polls or serves a webhook; each update is
stored before Telegram is told it arrived. ``send`` splits and formats replies; ``prompt`` shows
permission prompts with Approve / Deny buttons in the operator's chats.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx2
from mcp.server import MCPServer
from starlette.applications import Starlette

from channel_servers.telegram.api import ApiError, BotApi, NetworkError, Sleep, Unauthorized, scrubbing
from channel_servers.telegram.approvals import Approvals
from channel_servers.telegram.media import with_files
from channel_servers.telegram.outbound import Sender
from channel_servers.telegram.receive import poll, serve_webhook, webhook_app
from channel_servers.telegram.settings import NAME, TOKEN_VARIABLE, TelegramSettings, load_settings
from channel_servers.telegram.updates import Message, Press, parse
from shared.channelkit import Channel, channel_main, define_channel
from shared.channelkit.prompts import PromptClosed
from shared.hosting.errors import HostingError
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.telegram")

MAX_UPLOAD = 50 * 1024 * 1024
"""What the Bot API takes from a bot (it hands out files of at most 20 MB)."""
TOPICS_KEPT = 1000
"""Recent forum-topic messages remembered, so a reply quoting one stops that topic's typing."""


class Telegram:
    """The platform side of the channel; ``transport`` and ``sleep`` let tests reach a stand-in."""

    def __init__(
        self,
        settings: TelegramSettings,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        self.settings = settings
        self.bot_username = ""
        self._transport = transport
        self._sleep = sleep
        self.channel: Channel | None = None
        self._sender: Sender | None = None
        self._approvals: Approvals | None = None
        self.webhook_app: Starlette | None = None
        """The webhook endpoint, once it serves (mode webhook)."""
        self._topic_of: dict[tuple[str, str], str] = {}
        """(chat, message id) -> ``<chat>:<topic>`` for recent messages in forum topics."""

    async def receive(self, channel: Channel) -> None:
        token = self.settings.bot_token.get_secret_value()
        self.channel = channel
        async with httpx2.AsyncClient(transport=self._transport) as http:
            extra: dict[str, Any] = {"sleep": self._sleep} if self._sleep is not None else {}
            api = BotApi(
                http,
                self.settings.api_base_url,
                token,
                max_retries=self.settings.max_retries,
                max_retry_wait_s=self.settings.max_retry_wait_s,
                **extra,
            )
            with scrubbing(token):
                me = await self._introduce(api)
                self.bot_username = str(me.get("username", ""))
                self._sender = Sender(api)
                self._approvals = Approvals(self._sender, channel, self.settings.approval_chat_ids)
                if self.settings.webhook_secret is not None and self.settings.mode == "webhook":
                    secret = self.settings.webhook_secret.get_secret_value()
                    self.webhook_app = webhook_app(secret, self._handle)
                    await serve_webhook(api, self.settings, self.webhook_app, channel.ready)
                else:
                    await poll(api, self.settings, self._handle, channel.ready)

    async def _introduce(self, api: BotApi) -> dict[str, Any]:
        """``getMe``: a wrong or revoked token fails the start with one line naming the setting."""
        try:
            me: dict[str, Any] = await api.call_retrying("getMe")
        except Unauthorized as exc:
            raise HostingError(
                f"{exc}: set {TOKEN_VARIABLE} to the token @BotFather gave (/token), then restart"
            ) from None
        except (ApiError, NetworkError) as exc:
            raise HostingError(
                f"cannot reach the Telegram Bot API at {self.settings.api_base_url}: {exc}; check the "
                "network or NEXO_TELEGRAM_API_BASE_URL"
            ) from None
        return me

    async def _handle(self, update: dict[str, Any]) -> None:
        assert self.channel is not None
        assert self._approvals is not None
        event = parse(update, bot_username=self.bot_username, edits=self.settings.edits_as_messages)
        if isinstance(event, Press):
            await self._approvals.pressed(event)
        elif isinstance(event, Message):
            content = event.content
            if event.media and not await self.channel.stored(event.dedupe_key):
                assert self._sender is not None
                content = await with_files(self._sender.api, self.channel, event)
            received = await self.channel.inbound(content, event.meta, event.dedupe_key)
            if received.new:
                # What waited for this chat (or its topic) goes out first, then typing shows.
                where = event.meta.get("thread_id", event.chat_id)
                for chat_id in {event.chat_id, where}:
                    await self.channel.flush(chat_id)
                if where != event.chat_id:
                    self._remember_topic(event.chat_id, event.meta["message_id"], where)
                self.channel.typing_started(where)  # in a topic, "typing..." shows in that topic

    def _remember_topic(self, chat_id: str, message_id: str, topic: str) -> None:
        self._topic_of[(chat_id, message_id)] = topic
        if len(self._topic_of) > TOPICS_KEPT:
            del self._topic_of[next(iter(self._topic_of))]

    def _answered_in_topic(self, chat_id: str, reply_to: str | None) -> None:
        """A reply sent to the plain chat goes into the topic of the message it quotes (Telegram
        places it there): the typing shown in that topic stops as well."""
        typing = self.channel.typing if self.channel is not None else None
        topic = self._topic_of.get((chat_id, reply_to)) if reply_to is not None else None
        if typing is not None and topic is not None:
            typing.stop(topic)

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        assert self._sender is not None, "send before the channel started"
        self._answered_in_topic(chat_id, reply_to)
        return await self._sender.send(chat_id, text, reply_to)

    async def send_file(
        self, chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        assert self._sender is not None, "send_file before the channel started"
        self._answered_in_topic(chat_id, reply_to)
        return await self._sender.send_file(chat_id, path, caption, reply_to, mime)

    async def typing(self, chat_id: str) -> None:
        if self._sender is not None:
            await self._sender.typing(chat_id)

    async def closed(self, closed: PromptClosed) -> None:
        if self._approvals is not None:
            await self._approvals.prompts.closed(closed)

    async def prompt(self, params: PermissionRequestParams) -> int:
        assert self._approvals is not None, "prompt before the channel started"
        return await self._approvals.prompts.show(params)


def build_server(settings: TelegramSettings, telegram: Telegram | None = None) -> MCPServer[Any]:
    telegram = telegram or Telegram(settings)
    return define_channel(
        NAME,
        settings=settings,
        receive=telegram.receive,
        send=telegram.send,
        prompt=telegram.prompt,
        closed=telegram.closed,
        send_file=telegram.send_file,
        max_file_bytes=MAX_UPLOAD,
        typing=telegram.typing,
        wait_until_ready=True,
        instructions=(
            f'Telegram messages arrive as <channel source="{NAME}" chat_id="..." user="..." ...>. '
            "Answer with the send_message tool, passing the chat_id from the tag (in a forum topic, "
            "the thread_id, which is <chat_id>:<topic_id>); Markdown is formatted for Telegram and "
            "long answers are split."
        ),
    )


def main() -> int:
    return channel_main(f"channel_servers.{NAME}", lambda: build_server(load_settings()))
