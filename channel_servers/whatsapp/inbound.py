"""What arrives through the webhook: contacts' messages become channel events, statuses update the outbox.

The sender is the ``wa_id`` the platform puts in ``from``: the stable id pairing and approvals go by,
never a profile name or a number typed in a message. Each chat is 1:1, so ``chat_id`` is the wa_id.
"""

from __future__ import annotations

import logging
from typing import Final

import httpx2
from starlette.background import BackgroundTasks

from channel_servers.whatsapp.api import ApiError, ApiUnreachable, CloudApi
from channel_servers.whatsapp.approvals import parse_button
from channel_servers.whatsapp.payload import Change, Inbound, MediaRef, Status
from channel_servers.whatsapp.settings import WhatsAppSettings
from channel_servers.whatsapp.store import PlatformStore
from shared.channelkit import Channel
from shared.channelkit.media import TooLarge, message_content

logger = logging.getLogger("nexo.whatsapp")

TEXT_KINDS: Final = frozenset({"text", "interactive", "button"})
SAVED_MEDIA: Final = frozenset({"image", "audio", "document", "video"})


def meta_of(message: Inbound) -> dict[str, str]:
    meta = {
        "chat_id": message.wa_id,
        "message_id": message.message_id,
        "user_id": message.wa_id,
        "chat_type": "private",
        "ts": str(int(message.timestamp)),
    }
    if message.name:
        meta["user"] = message.name
    if message.context_id:
        meta["reply_to"] = message.context_id
    return meta


class Intake:
    def __init__(
        self,
        channel: Channel,
        api: CloudApi,
        store: PlatformStore,
        settings: WhatsAppSettings,
    ) -> None:
        self._channel = channel
        self._api = api
        self._store = store
        self._settings = settings
        self._latest: dict[str, str] = {}

    async def handle(self, changes: list[Change], tasks: BackgroundTasks) -> None:
        for change in changes:
            for message in change.messages:
                await self._message(message, tasks)
            for status in change.statuses:
                await self._status(status)

    async def _message(self, message: Inbound, tasks: BackgroundTasks) -> None:
        # Any message from the contact, a reaction too, opens the 24-hour window.
        await self._store.wrote(message.wa_id, message.timestamp)
        if message.kind not in TEXT_KINDS | SAVED_MEDIA:
            logger.info(
                "ignored a %s message %s from %s: not a kind the channel relays",
                message.kind,
                message.message_id,
                message.wa_id,
            )
            return
        meta = meta_of(message)
        press = parse_button(message.button_id) if message.button_id else None
        if press is not None:
            # Who pressed is the platform's sender id; the host decides whether it may approve.
            await self._channel.press(
                press.request_id,
                press.behavior,
                sender=message.wa_id,
                chat_id=message.wa_id,
                dedupe_key=message.message_id,
                sender_name=message.name or None,
            )
            return
        content = message.text
        if message.media is not None:
            content = await self._media_content(message, message.media)
        received = await self._channel.inbound(content, meta, message.message_id)
        if received.new:
            self._latest[message.wa_id] = message.message_id
            self._channel.typing_started(message.wa_id)
            tasks.add_task(self._channel.flush, message.wa_id)

    async def _media_content(self, message: Inbound, media: MediaRef) -> str:
        """The caption and a reference to the file saved in the workspace (or why it was not)."""
        known = await self._store.media_content(message.message_id)
        if known is not None:
            return known
        name = media.file_name or media.kind
        limit = self._settings.media_max_bytes
        try:
            info = await self._api.media_info(media.media_id)
            if info.file_size > limit:
                raise TooLarge(name, info.mime_type, limit)
            async with self._api.download(info.url) as chunks:
                attachment = await self._channel.save_inbound_file(
                    message.wa_id,
                    name,
                    chunks,
                    max_bytes=limit,
                    mime=media.mime_type.split(";")[0].strip() or info.mime_type,
                )
        except TooLarge as exc:
            content = message_content(media.caption, [], [exc.note()])
        except (ApiError, ApiUnreachable, httpx2.HTTPError) as exc:
            logger.warning(
                "media %s of message %s not downloaded: %s", media.media_id, message.message_id, exc
            )
            note = f"[attachment not saved: {name} ({media.mime_type}) could not be downloaded from WhatsApp]"
            return message_content(media.caption, [], [note])
        else:
            content = message_content(media.caption, [attachment])
        await self._store.saved_media(message.message_id, content)
        return content

    async def show_typing(self, chat_id: str) -> None:
        """Mark the chat's latest message read and show "typing..." (WhatsApp keeps it up to 25 s)."""
        message_id = self._latest.get(chat_id)
        if message_id is None:
            return
        try:
            await self._api.read_and_typing(message_id)
        except (ApiError, ApiUnreachable) as exc:
            logger.debug("read receipt for %s not sent: %s", message_id, exc)

    async def _status(self, status: Status) -> None:
        if status.status != "failed":
            logger.debug("message %s to %s: %s", status.message_id, status.recipient, status.status)
            return
        key = await self._store.message_key(status.message_id) or status.message_id
        error = f"WhatsApp could not deliver it: {status.error or 'no reason given'}"
        changed = await self._channel.db.execute(
            "UPDATE outbox SET status = 'failed', error = ? WHERE provider_id = ? AND status != 'failed'",
            (error, key),
        )
        if changed:
            logger.warning("message %s to %s failed: %s", key, status.recipient, status.error)
