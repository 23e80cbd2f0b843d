"""The Slack channel: an app over Socket Mode and the Web API, built on the channel kit.

``receive`` checks the bot token (``auth.test``) and the app-level token, then receives events over
Socket Mode (each stored before its envelope is acknowledged) or the Events API (each request
verified, then stored before Slack gets its ``200``). ``send`` splits replies, renders them
as mrkdwn and posts them in the chat's thread.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.server import MCPServer
from starlette.applications import Starlette

from channel_servers.slack import socket_mode
from channel_servers.slack.api import ApiError, NetworkError, RateLimited, Sleep, WebApi
from channel_servers.slack.approvals import Approvals, parse_press
from channel_servers.slack.events import parse
from channel_servers.slack.events_api import EVENTS_PATH, events_app
from channel_servers.slack.files import send_file, with_files
from channel_servers.slack.outbound import Sender
from channel_servers.slack.settings import (
    APP_TOKEN_VARIABLE,
    BOT_TOKEN_VARIABLE,
    NAME,
    SlackSettings,
    load_settings,
)
from channel_servers.slack.threads import Threads
from shared.channelkit import Channel, EventLogFull, channel_main, define_channel, serve_asgi
from shared.channelkit.prompts import PromptClosed
from shared.hosting.errors import HostingError
from shared.protocol.channel import PermissionRequestParams

logger = logging.getLogger("nexo.slack")

MAX_UPLOAD = 1024 * 1024 * 1024
"""Slack's limit for one uploaded file (1 GB); the ``max_file_bytes`` setting usually caps lower."""


class Slack:
    """The platform side of the channel; ``sleep`` lets tests record backoffs instead of waiting."""

    def __init__(self, settings: SlackSettings, *, sleep: Sleep | None = None) -> None:
        self.settings = settings
        self.bot_user_id = ""
        self._sleep: Sleep = sleep or anyio.sleep
        self.channel: Channel | None = None
        self._sender: Sender | None = None
        self._approvals: Approvals | None = None
        self._threads: Threads | None = None
        self.events_app: Starlette | None = None
        """Mode ``events``: the endpoint Slack posts to, once it serves."""
        self.events_url = ""

    async def receive(self, channel: Channel) -> None:
        self.channel = channel
        app_token = self.settings.app_token.get_secret_value() if self.settings.app_token else ""
        async with httpx2.AsyncClient() as http:
            api = WebApi(
                http,
                self.settings.api_base_url,
                self.settings.bot_token.get_secret_value(),
                max_retries=self.settings.max_retries,
                max_retry_wait_s=self.settings.max_retry_wait_s,
                sleep=self._sleep,
            )
            self.bot_user_id = await self._introduce(api)
            self._threads = Threads(channel.db)
            await self._threads.open()
            self._sender = Sender(api, self._threads)
            self._approvals = Approvals(self._sender, channel, self.settings.approval_channel_ids)
            if self.settings.mode == "events":
                await self._serve_events(channel)
            else:
                try:
                    await socket_mode.run(api, app_token, self._handle, channel.ready, self._sleep)
                except ApiError as exc:
                    raise HostingError(
                        f"Slack refused the app-level token ({exc.error}): set {APP_TOKEN_VARIABLE} to an "
                        "app-level token (xapp-) with the scope connections:write, then restart `nexo run`"
                    ) from None

    async def _serve_events(self, channel: Channel) -> None:
        assert self.settings.signing_secret is not None
        self.events_app = events_app(self.settings.signing_secret.get_secret_value().encode(), self._handle)

        async def listening(host: str, port: int) -> None:
            self.events_url = f"http://{host}:{port}{EVENTS_PATH}"
            channel.ready()

        await serve_asgi(
            self.events_app,
            self.settings.events_host,
            self.settings.events_port,
            on_ready=listening,
            setting="NEXO_SLACK_EVENTS_PORT",
        )

    async def _introduce(self, api: WebApi) -> str:
        """``auth.test``: a wrong or revoked token fails the start with one line naming the setting."""
        try:
            me = await api.call("auth.test")
        except ApiError as exc:
            raise HostingError(
                f"Slack refused the bot token ({exc.error}): set {BOT_TOKEN_VARIABLE} to the Bot User "
                "OAuth Token (xoxb-) of your app, then restart `nexo run`"
            ) from None
        except (NetworkError, RateLimited) as exc:
            raise HostingError(
                f"cannot reach the Slack Web API at {self.settings.api_base_url}: {exc}; check the "
                "network or NEXO_SLACK_API_BASE_URL"
            ) from None
        return str(me["user_id"])

    async def _handle(self, kind: str, payload: dict[str, Any]) -> bool:
        """One envelope; ``True`` once what it carries is stored (or needs no storing)."""
        assert self.channel is not None
        if kind == "interactive":
            press = parse_press(payload)
            if press is not None and self._approvals is not None:
                try:
                    await self._approvals.pressed(press)
                except EventLogFull:
                    return False
            return True
        if kind != "events_api":
            return True
        event = payload.get("event")
        if not isinstance(event, dict):
            return True
        message = parse(event, bot_user_id=self.bot_user_id, edits=self.settings.edits)
        if message is None:
            return True
        if message.root is not None:
            assert self._threads is not None
            await self._threads.remember(message.chat_id, message.ts, message.root)
        content = message.text
        if message.files and not await self.channel.stored(message.dedupe_key):
            assert self._sender is not None
            content = await with_files(self._sender.api, self.settings.api_base_url, self.channel, message)
        try:
            received = await self.channel.inbound(content, message.meta, message.dedupe_key)
        except EventLogFull:
            logger.warning("slack: the inbox is full; Slack will deliver the event again")
            return False
        if received.new:
            await self.channel.flush(message.chat_id)
        return True

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        assert self._sender is not None, "send before the channel started"
        return await self._sender.send(chat_id, text, reply_to)

    async def send_file(
        self, chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        assert self._sender is not None, "send_file before the channel started"
        return await send_file(self._sender, chat_id, path, caption, reply_to)

    async def prompt(self, params: PermissionRequestParams) -> int:
        assert self._approvals is not None, "prompt before the channel started"
        return await self._approvals.prompts.show(params)

    async def closed(self, closed: PromptClosed) -> None:
        if self._approvals is not None:
            await self._approvals.prompts.closed(closed)


def build_server(settings: SlackSettings, slack: Slack | None = None) -> MCPServer[Any]:
    slack = slack or Slack(settings)
    return define_channel(
        NAME,
        settings=settings,
        receive=slack.receive,
        send=slack.send,
        prompt=slack.prompt,
        closed=slack.closed,
        send_file=slack.send_file,
        max_file_bytes=MAX_UPLOAD,
        wait_until_ready=True,
        instructions=(
            f'Slack messages arrive as <channel source="{NAME}" chat_id="..." user_id="..." ...>. '
            "Answer with the send_message tool, passing the chat_id and, as reply_to, the message_id "
            "from the tag: the answer goes into the message's thread. Markdown is formatted for Slack "
            "and long answers are split."
        ),
    )


def main() -> int:
    return channel_main(f"channel_servers.{NAME}", lambda: build_server(load_settings()))
