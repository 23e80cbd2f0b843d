"""Sending to Telegram: a reply split into parts of at most 4096 characters, each sent as HTML (or
once more as plain text when Telegram cannot parse it), platform errors mapped to the kit's outcomes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

from channel_servers.telegram.api import ApiError, BotApi, NetworkError
from channel_servers.telegram.updates import split_chat_id
from shared.channelkit import SendFailed, Unreachable
from shared.channelkit.text import split_markdown, to_plain, to_telegram_html

logger = logging.getLogger("nexo.telegram")

MAX_MESSAGE = 4096
MAX_CAPTION = 1024
MAX_PHOTO = 10 * 1024 * 1024
PHOTO_TYPES = frozenset({"image/jpeg", "image/png", "image/webp"})
CANNOT_PARSE = "can't parse entities"


class Sender:
    """Sends one chat's messages in order (a lock per chat), so a 429 for one chat delays only it."""

    def __init__(self, api: BotApi) -> None:
        self.api = api
        self._locks: dict[str, anyio.Lock] = {}

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        """Deliver ``text`` (Markdown) to ``chat_id``; the platform id lists each part's message id."""
        chat, thread = _target(chat_id)
        lock = self._locks.setdefault(chat, anyio.Lock())
        ids: list[str] = []
        async with lock:
            for number, part in enumerate(split_markdown(text, MAX_MESSAGE)):
                params: dict[str, Any] = {"chat_id": chat}
                if thread is not None:
                    params["message_thread_id"] = thread
                if reply_to and number == 0 and reply_to.isdigit():
                    params["reply_parameters"] = {
                        "message_id": int(reply_to),
                        "allow_sending_without_reply": True,
                    }
                try:
                    ids.append(await self._send_part(params, part))
                except (Unreachable, SendFailed) as exc:
                    if ids:
                        # Earlier parts are out: resending them later would duplicate them.
                        raise RuntimeError(
                            f"parts {', '.join(ids)} were sent, part {len(ids) + 1} was not: {exc}"
                        ) from None
                    raise
        return ",".join(ids)

    async def _send_part(self, params: dict[str, Any], part: str) -> str:
        try:
            sent = await self.call(
                "sendMessage", {**params, "text": to_telegram_html(part), "parse_mode": "HTML"}
            )
        except SendFailed as exc:
            if CANNOT_PARSE not in str(exc):
                raise
            logger.warning("telegram: a part was refused as HTML, sending it as plain text: %s", exc)
            sent = await self.call("sendMessage", {**params, "text": to_plain(part)})
        return str(sent["message_id"])

    async def send_file(
        self, chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        """A workspace file as a photo (JPEG, PNG, WebP up to 10 MB) or else a document."""
        chat, thread = _target(chat_id)
        content = await anyio.Path(path).read_bytes()
        size = len(content)
        kind, method = (
            ("photo", "sendPhoto")
            if mime in PHOTO_TYPES and size <= MAX_PHOTO
            else ("document", "sendDocument")
        )
        params: dict[str, Any] = {"chat_id": chat}
        if thread is not None:
            params["message_thread_id"] = thread
        if reply_to and reply_to.isdigit():
            params["reply_parameters"] = {"message_id": int(reply_to), "allow_sending_without_reply": True}
        if caption:
            if len(to_plain(caption)) > MAX_CAPTION:
                raise SendFailed(
                    f"the caption has more than {MAX_CAPTION} characters, Telegram's limit; send the file "
                    "with a short caption and the text with send_message"
                )
            params |= {"caption": to_telegram_html(caption), "parse_mode": "HTML"}
        upload = {kind: (path.name, content, mime)}
        async with self._locks.setdefault(chat, anyio.Lock()):
            sent = await self.call(method, params, files=upload, timeout=120.0)
        return str(sent["message_id"])

    async def typing(self, chat_id: str) -> None:
        """Show "typing..." in the chat once (Telegram hides it after about 5 seconds)."""
        chat, thread = _target(chat_id)
        params: dict[str, Any] = {"chat_id": chat, "action": "typing"}
        if thread is not None:
            params["message_thread_id"] = thread
        try:
            await self.api.call("sendChatAction", params, timeout=10.0)
        except (ApiError, NetworkError) as exc:
            logger.debug("telegram: typing not shown in %s: %s", chat, exc)

    async def call(self, method: str, params: Mapping[str, Any], **kwargs: Any) -> Any:
        """``method`` with retries; what is left fails as the kit expects (queued, or failed for good)."""
        try:
            return await self.api.call_retrying(method, params, **kwargs)
        except ApiError as exc:
            if exc.permanent:
                raise SendFailed(f"Telegram answered {exc.code}: {exc.description}") from None
            if exc.code == 429 or exc.code >= 500:
                raise Unreachable(f"Telegram answered {exc.code}: {exc.description}") from None
            raise
        except NetworkError as exc:
            if exc.sent:
                raise  # it may have arrived: the kit records it as uncertain
            raise Unreachable(str(exc)) from None


def _target(chat_id: str) -> tuple[str, int | None]:
    try:
        return split_chat_id(chat_id)
    except ValueError as exc:
        raise SendFailed(str(exc)) from None
