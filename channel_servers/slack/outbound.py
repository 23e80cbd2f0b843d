"""Sending to Slack: a reply split into parts of at most 4,000 characters (Slack's advice for one
message), each rendered as mrkdwn and posted in the thread of the message answered, errors mapped to the kit's
outcomes. A permanent failure that concerns the whole app or channel (a revoked token, the bot
removed from a channel) is also logged once as an error for the operator.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from channel_servers.slack.api import REVOKED, ApiError, NetworkError, RateLimited, WebApi
from channel_servers.slack.events import split_chat_id
from channel_servers.slack.threads import Threads
from shared.channelkit import SendFailed, Unreachable
from shared.channelkit.text import split_markdown, to_slack_mrkdwn

logger = logging.getLogger("nexo.slack")

MAX_MESSAGE = 4000
_FIXES = {
    "not_in_channel": "invite the app (/invite @your-app), then check with `nexo channel doctor`",
    "channel_not_found": "the channel does not exist or the app cannot see it; check the chat id",
    "is_archived": "the channel is archived",
}
_REVOKED_FIX = (
    "reinstall the app to get a new Bot User OAuth Token, set NEXO_SLACK_BOT_TOKEN, restart `nexo run` "
    "and check with `nexo channel doctor`"
)


class Sender:
    """Posts one chat's parts in order (a lock per Slack channel)."""

    def __init__(self, api: WebApi, threads: Threads) -> None:
        self.api = api
        self._threads = threads
        self._locks: dict[str, anyio.Lock] = {}
        self._told: set[tuple[str, str]] = set()

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        """Deliver ``text`` (Markdown); the platform id lists each part's ``ts``."""
        channel, thread = await self.target(chat_id, reply_to)
        ids: list[str] = []
        async with self._locks.setdefault(channel, anyio.Lock()):
            for part in split_markdown(text, MAX_MESSAGE):
                params: dict[str, Any] = {"channel": channel, "text": to_slack_mrkdwn(part), "mrkdwn": True}
                if thread is not None:
                    params["thread_ts"] = thread
                try:
                    posted = await self.call("chat.postMessage", params)
                except (Unreachable, SendFailed) as exc:
                    if ids:
                        # Earlier parts are out: sending them again later would duplicate them.
                        raise RuntimeError(
                            f"parts {', '.join(ids)} were sent, part {len(ids) + 1} was not: {exc}"
                        ) from None
                    raise
                ids.append(str(posted["ts"]))
        return ",".join(ids)

    async def target(self, chat_id: str, reply_to: str | None) -> tuple[str, str | None]:
        """The channel, and the thread to post in: the one ``chat_id`` names, else the thread of the
        message answered (``reply_to``), else none."""
        try:
            channel, thread = split_chat_id(chat_id)
        except ValueError as exc:
            raise SendFailed(str(exc)) from None
        if thread is None and reply_to:
            thread = await self._threads.root(channel, reply_to)
        return channel, thread

    async def call_form(self, method: str, params: dict[str, Any]) -> Any:
        """``call`` for the methods that take only a form body (the file upload ones)."""
        return await self.call(method, params, form=True)

    async def call(self, method: str, params: dict[str, Any], *, form: bool = False) -> Any:
        try:
            return await self.api.call(method, params, form=form)
        except ApiError as exc:
            if exc.permanent:
                self._tell_operator(exc, str(params.get("channel") or params.get("channel_id") or ""))
                raise SendFailed(f"Slack refused {method}: {exc.error}") from None
            raise
        except RateLimited as exc:
            raise Unreachable(str(exc)) from None
        except NetworkError as exc:
            if exc.sent:
                raise  # it may have arrived: the kit records it as uncertain
            raise Unreachable(str(exc)) from None

    def _tell_operator(self, exc: ApiError, channel: str) -> None:
        scope = "app" if exc.error in REVOKED else channel
        if (exc.error, scope) in self._told:
            return
        self._told.add((exc.error, scope))
        fix = _REVOKED_FIX if exc.error in REVOKED else _FIXES.get(exc.error, "see docs/channels/slack.md")
        logger.error("slack: %s (channel %s): %s", exc.error, channel or "-", fix)
