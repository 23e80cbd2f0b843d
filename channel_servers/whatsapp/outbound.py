"""Sending to a contact: the 24-hour window, splitting at 4096 characters, WhatsApp's markup.

WhatsApp lets a business send free-form messages only within 24 hours of the contact's last
message (the customer-service window). Outside it only an approved template goes out: the channel
sends ``notice_template`` with the text as its body parameter, or refuses with :class:`SendFailed`
naming the window and the setting. Nothing is dropped silently.
"""

from __future__ import annotations

import logging
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Final

from channel_servers.whatsapp.api import (
    INVALID_PARAMETER,
    OUTSIDE_WINDOW,
    TOKEN_INVALID,
    UNDELIVERABLE,
    ApiError,
    ApiUnreachable,
    CloudApi,
)
from channel_servers.whatsapp.settings import WA_ID, WhatsAppSettings
from channel_servers.whatsapp.store import PlatformStore
from shared.channelkit import SendFailed, Unreachable
from shared.channelkit.text import split_markdown, to_plain, to_whatsapp

logger = logging.getLogger("nexo.whatsapp")

TEXT_LIMIT: Final = 4096
WINDOW_S: Final = 24 * 3600
TEMPLATE_PARAMETER_LIMIT: Final = 1024
"""A template body parameter is short and single-line; longer notices are cut."""


def window_refusal(chat_id: str) -> SendFailed:
    return SendFailed(
        f"WhatsApp contact {chat_id} last wrote more than 24 hours ago (outside the customer-service "
        "window), so only an approved template can reach them: set NEXO_WHATSAPP_NOTICE_TEMPLATE to "
        "a template with one body parameter, or wait until they write again"
    )


def refusal_of(chat_id: str, exc: ApiError) -> Exception:
    """The kit's outcome for an error the API kept answering (retries are done by then)."""
    if exc.code == OUTSIDE_WINDOW:
        return window_refusal(chat_id)
    if exc.code == TOKEN_INVALID:
        # Stays queued: a fixed token delivers it at the contact's next message.
        return Unreachable(
            f"the WhatsApp access token is invalid or expired ({exc}): set a new "
            "NEXO_WHATSAPP_ACCESS_TOKEN and check it with `nexo channel doctor`"
        )
    if exc.code in UNDELIVERABLE:
        return SendFailed(f"WhatsApp cannot deliver to {chat_id} ({exc}); check the number")
    return SendFailed(str(exc))


def media_kind(mime: str) -> str:
    if mime in ("image/jpeg", "image/png"):
        return "image"
    if mime.startswith("audio/"):
        return "audio"
    if mime in ("video/mp4", "video/3gpp"):
        return "video"
    return "document"


class Sender:
    def __init__(
        self, api: CloudApi, store: PlatformStore, settings: WhatsAppSettings, clock: Callable[[], float]
    ) -> None:
        self._api = api
        self._store = store
        self._settings = settings
        self._clock = clock

    async def inside_window(self, wa_id: str) -> bool:
        last = await self._store.last_inbound(wa_id)
        return last is not None and self._clock() - last < WINDOW_S

    def _check_chat(self, chat_id: str) -> None:
        if not WA_ID.fullmatch(chat_id):
            raise SendFailed(f"chat_id {chat_id!r} is not a WhatsApp wa_id (digits, country code first)")

    async def send(self, chat_id: str, text: str, reply_to: str | None) -> str:
        """Every part of ``text`` in order; the first part's id stands for the message."""
        self._check_chat(chat_id)
        if not await self.inside_window(chat_id):
            return await self._template(chat_id, text)
        parts = split_markdown(text, TEXT_LIMIT)
        sent: list[str] = []
        for index, part in enumerate(parts):
            try:
                sent.append(await self._part(chat_id, part, reply_to if index == 0 else None))
            except (SendFailed, Unreachable) as exc:
                if not sent:
                    raise
                await self._store.sent_parts(chat_id, sent)
                # Resending would repeat what arrived: the gap is reported instead.
                raise SendFailed(
                    f"parts 1 to {len(sent)} of {len(parts)} were delivered, part {index + 1} was not: {exc}"
                ) from exc
        await self._store.sent_parts(chat_id, sent)
        return sent[0]

    async def _part(self, chat_id: str, part: str, reply_to: str | None) -> str:
        try:
            try:
                formatted = to_whatsapp(part)
                # The markup is rarely longer than the Markdown; when it is, the Markdown goes as is.
                return await self._api.text(
                    chat_id, formatted if len(formatted) <= TEXT_LIMIT else part, reply_to
                )
            except ApiError as exc:
                if exc.code not in INVALID_PARAMETER:
                    raise
                plain = to_plain(part)[:TEXT_LIMIT]
                logger.info("WhatsApp refused a formatted part (%s); resending it as plain text", exc)
                return await self._api.text(chat_id, plain, reply_to)
        except ApiError as exc:
            raise refusal_of(chat_id, exc) from exc
        except ApiUnreachable as exc:
            raise Unreachable(str(exc)) from exc

    async def _template(self, chat_id: str, text: str) -> str:
        name = self._settings.notice_template
        if name is None:
            raise window_refusal(chat_id)
        parameter = " ".join(to_plain(text).split())
        if len(parameter) > TEMPLATE_PARAMETER_LIMIT:
            parameter = parameter[: TEMPLATE_PARAMETER_LIMIT - 1] + "…"
        try:
            platform_id = await self._api.template(
                chat_id, name, self._settings.notice_template_language, parameter
            )
        except ApiError as exc:
            raise refusal_of(chat_id, exc) from exc
        except ApiUnreachable as exc:
            raise Unreachable(str(exc)) from exc
        await self._store.sent_parts(chat_id, [platform_id])
        return platform_id

    async def send_file(
        self, chat_id: str, path: Path, caption: str | None, reply_to: str | None, mime: str
    ) -> str:
        self._check_chat(chat_id)
        if not await self.inside_window(chat_id):
            raise window_refusal(chat_id)
        mime = mime or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        try:
            media_id = await self._api.upload(path, mime)
            platform_id = await self._api.media(
                chat_id, media_kind(mime), media_id, to_whatsapp(caption) if caption else None, path.name
            )
        except ApiError as exc:
            raise refusal_of(chat_id, exc) from exc
        except ApiUnreachable as exc:
            raise Unreachable(str(exc)) from exc
        await self._store.sent_parts(chat_id, [platform_id])
        return platform_id
